// A block of lines that follows a changing thing. On a terminal the block is redrawn in place and
// log lines scroll above it; elsewhere (CI logs, pipes) the block is printed only when its key
// changes, so the output is one line per change and never a flood of identical frames.
import type { Io } from './io.js';

export class LiveView {
  private drawn = 0;
  private lastKey: string | undefined;
  private frame: string[] = [];

  constructor(private readonly io: Io) {}

  /** Shows `lines`; `key` is what counts as a change for non-TTY output (e.g. without the clock). */
  update(lines: string[], key = lines.join('\n')): void {
    this.frame = lines;
    if (this.io.live) {
      this.erase();
      this.draw();
    } else if (key !== this.lastKey) {
      for (const l of lines) this.io.out(l);
    }
    this.lastKey = key;
  }

  /** A line that stays (an attempt ended, an event): printed above the live block. */
  log(line: string): void {
    if (!this.io.live) return this.io.out(line);
    this.erase();
    this.io.out(line);
    this.draw();
  }

  /** Leaves the last frame on screen and moves below it. */
  done(): void {
    this.drawn = 0;
  }

  private erase(): void {
    // Up to the first line of the block, then clear to the end of the screen.
    if (this.drawn > 0) this.io.write(`\x1b[${this.drawn}F\x1b[J`);
    this.drawn = 0;
  }

  private draw(): void {
    for (const l of this.frame) this.io.out(l.length < this.io.columns ? l : `${l.slice(0, this.io.columns - 2)}…`);
    this.drawn = this.frame.length;
  }
}
