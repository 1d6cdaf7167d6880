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

/**
 * newLines for a read from another source than the lines printed: the first read that says where
 * the run's stream stands is the follower's kept out-file, while what was printed before came from
 * the container's log, which also holds sshd's lines (the follower's own login among them, right
 * after the task's first output). Lines of the printed log that the new read cannot hold are left
 * out before the overlap is sought, so such a line does not hide it (all of the task's output was
 * printed twice).
 */
export function newLinesAcrossSources(printed: readonly string[], next: readonly string[]): { lines: string[]; gap: boolean } {
  const held = new Set(next);
  return newLines(
    printed.filter((line) => held.has(line)),
    next,
  );
}

/** The lines of a log text (a last newline ends the last line, it does not start an empty one). */
export const linesOf = (text: string): string[] => (text === '' ? [] : text.replace(/\n$/, '').split('\n'));

/** A batch of a followed task's output, as the run's event stream sends it (StreamOutput's fields used here). */
interface OutputBatch {
  n: number;
  from: number;
  to: number;
  lines: string[];
  left_out: number;
}

/**
 * Where a streamed log stands: the attempt and the byte of its out-file after the last line printed.
 * A batch is printed once, from the offset the stored log was read at on: one that ends at or before
 * it was in that read; one of a later attempt starts that attempt's output; one that starts past it
 * (or says lines were left out) follows a gap.
 */
export class StreamedLog {
  constructor(private at: { n: number; offset: number }) {}

  /** What to print of a batch: its lines, and whether lines before them were not sent. */
  take(o: OutputBatch): { lines: string[]; gap: boolean } {
    if (o.n < this.at.n) return { lines: [], gap: false };
    if (o.n > this.at.n) this.at = { n: o.n, offset: 0 };
    if (o.to <= this.at.offset) return { lines: [], gap: false };
    const gap = o.left_out > 0 || o.from > this.at.offset;
    this.at = { n: o.n, offset: o.to };
    return { lines: o.lines, gap };
  }

  get attempt(): number {
    return this.at.n;
  }
}
