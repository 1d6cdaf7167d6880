// Where the CLI writes. Results go to stdout (only JSON with --json); problems go to stderr.
// `live` is true when stdout is a terminal: progress is then redrawn in place instead of printed
// one line per change.
//
// Every line passes through `safeText`: run names, images, event messages and the service's own
// status texts end up in what the CLI prints, and a terminal escape in any of them (an image named
// "x\e]0;...\a", a status_msg with "\e[2J") must show as text, not act on the user's terminal.

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

/**
 * Control characters (C0 but tab and newline, DEL, C1) and the invisible characters that reorder
 * or hide text (bidi overrides, zero-width marks). Each is shown as `\uXXXX`, which is also a valid
 * escape inside a JSON string, so JSON output stays JSON.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point: they are escaped
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g;

export function safeText(text: string): string {
  return text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * A reader that closes the pipe early (`berth status | head -3`) is not an error of berth's: stop
 * writing and exit 0, as Unix tools do, instead of dying on an unhandled EPIPE with a stack trace.
 */
function quietOnClosedPipe(stream: NodeJS.WriteStream): void {
  if (stream.listenerCount('error') > 0) return;
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

export function processIo(): Io {
  quietOnClosedPipe(process.stdout);
  return {
    out: (line) => process.stdout.write(`${safeText(line)}\n`),
    err: (line) => process.stderr.write(`${safeText(line)}\n`),
    live: process.stdout.isTTY === true,
    write: (chunk) => process.stdout.write(chunk),
    columns: process.stdout.columns || 100,
  };
}

export const printJson = (io: Io, value: unknown): void => io.out(JSON.stringify(value, null, 2));
