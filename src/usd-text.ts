// Dollars as people read them, shared by the daemon's messages and the CLI (kept free of imports so
// that `berth status` does not load the daemon's money code to print a figure).

/** `$0.0123` for people: four decimals below a dollar, two above; the sign before the dollar (`-$0.0072`). */
export function usdText(x: number): string {
  const abs = Math.abs(x);
  const digits = abs < 1 ? abs.toFixed(4) : abs.toFixed(2);
  // A negative amount that rounds to zero shows as zero, not as `-$0.0000`.
  return x < 0 && Number(digits) !== 0 ? `-$${digits}` : `$${digits}`;
}
