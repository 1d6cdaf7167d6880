// A count and its noun as people write them ("1 offer", "3 offers"), shared by the daemon's messages
// and the CLI, in place of "offer(s)". Free of imports, like ./usd-text.ts.

/** `1 run`, `2 runs`; `plural` for nouns that do not take a plain "s". */
export function countText(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}
