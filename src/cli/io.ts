// Where the CLI writes. Results go to stdout (only JSON with --json); problems go to stderr.
// `live` is true when stdout is a terminal: progress is then redrawn in place instead of printed
// one line per change.

export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** stdout is a TTY: redraw progress in place. */
  live: boolean;
  /** Raw stdout for cursor control (live mode only). */
  write(chunk: string): void;
  /** Terminal width; live lines are cut to it so that a redraw knows how many rows to erase. */
  columns: number;
}

export function processIo(): Io {
  return {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    live: process.stdout.isTTY === true,
    write: (chunk) => process.stdout.write(chunk),
    columns: process.stdout.columns || 100,
  };
}

export const printJson = (io: Io, value: unknown): void => io.out(JSON.stringify(value, null, 2));
