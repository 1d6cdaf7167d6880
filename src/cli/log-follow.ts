// What `berth logs --follow` prints next. Each read is the log's last N lines, so a new read
// overlaps what was printed: the longest run of lines that ends what was printed and begins the
// new read is the overlap, and only what follows it is new. No overlap means more than N lines
// were written between two reads: all of the new read is printed, after a line saying lines may be
// missing.
export function newLines(printed: readonly string[], next: readonly string[]): { lines: string[]; gap: boolean } {
  if (printed.length === 0) return { lines: [...next], gap: false };
  for (let k = Math.min(printed.length, next.length); k > 0; k--) {
    let same = true;
    for (let i = 0; i < k && same; i++) same = printed[printed.length - k + i] === next[i];
    if (same) return { lines: next.slice(k), gap: false };
  }
  return { lines: [...next], gap: next.length > 0 };
}

/** The lines of a log text (a last newline ends the last line, it does not start an empty one). */
export const linesOf = (text: string): string[] => (text === '' ? [] : text.replace(/\n$/, '').split('\n'));
