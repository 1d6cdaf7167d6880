// Dollars as people read them, shared by the daemon's messages and the CLI (kept free of imports so
// that `berth status` does not load the daemon's money code to print a figure).

/** `$0.0123` for people: four decimals below a dollar, two above. */
export function usdText(x: number): string {
  return Math.abs(x) < 1 ? `$${x.toFixed(4)}` : `$${x.toFixed(2)}`;
}
