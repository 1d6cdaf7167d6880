// The followed output of one attempt between its reads and its store writes (issue #49): the
// out-file's bytes as the stream hands them over, cut into complete lines, bounded whatever the
// container prints. Each chunk is looked at once (its newlines found where they are, never the
// held output rescanned from its start), so a 64 MB line costs the daemon a few hundred KiB and
// one pass over its bytes.
//
// States of the line being read:
//   - whole: its bytes are held (at most LINE_MAX) until its newline makes it complete;
//   - skipping: it passed LINE_MAX, so its first LINE_MAX bytes were made a complete line of their
//     own, ending in CUT_MARK, and its bytes up to and with its newline are counted (the offset
//     moves past them) but not held; its newline makes the next line whole again.
// What is held: the complete lines (the caller writes them once they reach its own bound, or on a
// timer), plus at most LINE_MAX bytes of the unfinished line: bounded by the caller's bound + LINE_MAX.

/** The longest line kept whole; a longer one keeps this much, then CUT_MARK. */
export const LINE_MAX = 64 * 1024;
/** What ends a line cut at LINE_MAX (the rest of it, up to its newline, is not kept). */
export const CUT_MARK = ' … [line cut at 64 KiB]';

const NL = 0x0a;
const CUT_LINE_END = Buffer.from(`${CUT_MARK}\n`);

/** What a take hands over: the text of the lines, and how many bytes of the out-file they span. */
export interface TakenLines {
  text: string;
  bytes: number;
}

/** What is held, for a write that must be undone (a group commit that failed). */
export interface HeldLines {
  readonly done: Buffer[];
  readonly doneLen: number;
  readonly doneBytes: number;
  readonly line: Buffer[];
  readonly lineLen: number;
  readonly skipping: boolean;
}

export class FollowedLines {
  /** Complete lines (CUT_MARK and newlines in place). */
  private done: Buffer[] = [];
  private doneLen = 0;
  /** Out-file bytes the complete lines span (skipped bytes included). */
  private doneBytes = 0;
  /** The unfinished line's bytes: at most LINE_MAX. */
  private line: Buffer[] = [];
  private lineLen = 0;
  private skipping = false;

  /** Bytes of complete lines held, as text (what a write would store). */
  get heldBytes(): number {
    return this.doneLen;
  }

  /** Out-file bytes read and not yet taken: the complete lines and the unfinished one. */
  get readBytes(): number {
    return this.doneBytes + this.lineLen;
  }

  /** Whether nothing at all is held. */
  get empty(): boolean {
    return this.doneBytes === 0 && this.lineLen === 0;
  }

  /** The next bytes of the out-file. */
  push(chunk: Buffer): void {
    let i = 0;
    // A run of whole short lines from a line's start, held in one piece.
    let runFrom = -1;
    const endRun = (at: number) => {
      if (runFrom < 0) return;
      this.hold(chunk, runFrom, at);
      runFrom = -1;
    };
    while (i < chunk.length) {
      const nl = chunk.indexOf(NL, i);
      if (!this.skipping && this.lineLen === 0 && nl >= 0 && nl - i <= LINE_MAX) {
        if (runFrom < 0) runFrom = i;
        i = nl + 1;
        continue;
      }
      endRun(i);
      const end = nl < 0 ? chunk.length : nl;
      if (this.skipping) {
        this.doneBytes += end - i + (nl < 0 ? 0 : 1);
        if (nl >= 0) this.skipping = false;
      } else {
        const keep = Math.min(end - i, LINE_MAX - this.lineLen);
        if (keep > 0) this.line.push(copyOf(chunk, i, i + keep));
        this.lineLen += keep;
        if (keep < end - i) {
          // Past LINE_MAX: the line so far is made complete, the rest of it skipped.
          this.endLine(CUT_LINE_END);
          this.skipping = true;
          this.doneBytes += end - i - keep + (nl < 0 ? 0 : 1);
          if (nl >= 0) this.skipping = false;
        } else if (nl >= 0) this.endLine(Buffer.from('\n'), 1);
      }
      i = end + 1;
    }
    endRun(chunk.length);
  }

  /** Hands over the complete lines (with `all`, the unfinished one too, as it is) and forgets them; null: nothing held. */
  take(all = false): TakenLines | null {
    if (all && this.lineLen > 0) this.endLine(Buffer.alloc(0));
    if (this.doneBytes === 0) return null;
    const taken = { text: Buffer.concat(this.done, this.doneLen).toString('utf8'), bytes: this.doneBytes };
    this.done = [];
    this.doneLen = 0;
    this.doneBytes = 0;
    if (all) this.skipping = false;
    return taken;
  }

  /** Forgets everything held: the next bytes are those of a line's start. */
  clear(): void {
    this.restore({ done: [], doneLen: 0, doneBytes: 0, line: [], lineLen: 0, skipping: false });
  }

  /** What is held now (the pieces are never changed in place, so this is a copy). */
  snapshot(): HeldLines {
    return {
      done: [...this.done],
      doneLen: this.doneLen,
      doneBytes: this.doneBytes,
      line: [...this.line],
      lineLen: this.lineLen,
      skipping: this.skipping,
    };
  }

  restore(s: HeldLines): void {
    this.done = [...s.done];
    this.doneLen = s.doneLen;
    this.doneBytes = s.doneBytes;
    this.line = [...s.line];
    this.lineLen = s.lineLen;
    this.skipping = s.skipping;
  }

  /** The unfinished line is complete: its bytes, then `end` (which spans `endBytes` of the out-file). */
  private endLine(end: Buffer, endBytes = 0): void {
    for (const piece of this.line) this.done.push(piece);
    this.done.push(end);
    this.doneLen += this.lineLen + end.length;
    this.doneBytes += this.lineLen + endBytes;
    this.line = [];
    this.lineLen = 0;
  }

  private hold(chunk: Buffer, from: number, to: number): void {
    this.done.push(copyOf(chunk, from, to));
    this.doneLen += to - from;
    this.doneBytes += to - from;
  }
}

/**
 * Bytes `from` to `to` of `chunk`: a view where the chunk is small, a copy where it is large, so
 * that a few bytes held never keep a large chunk alive.
 */
function copyOf(chunk: Buffer, from: number, to: number): Buffer {
  const view = chunk.subarray(from, to);
  return chunk.length > LINE_MAX && view.length * 4 < chunk.length ? Buffer.from(view) : view;
}
