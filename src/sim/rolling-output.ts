// A container's output as `docker logs` keeps it: everything its starts wrote, in order, up to a
// byte cap, past which the *oldest* bytes go (a rolling file), so the last lines are always there
// however chatty the task. Each container start (each onstart run) writes its own segment, so the
// container log can show every run's output after its own "started" line. A segment whose front
// was dropped loses the rest of its first, partial line too: logs are read by whole lines. Each
// chunk keeps the sim moment it was written, so that a line takes its place in the container log
// among sshd's lines by when it began (the log then only grows at its end).
import type { Line } from './container-logs.js';

interface Part {
  b: Buffer;
  /** Sim seconds when it was written. */
  at: number;
}

interface Segment {
  parts: Part[];
  /** Some of its oldest bytes were dropped for the cap. */
  cut: boolean;
}

export class RollingOutput {
  private readonly segments = new Map<number, Segment>();
  /** Segment keys in the order they began: the oldest bytes are dropped from the first ones. */
  private readonly order: number[] = [];
  private size = 0;

  constructor(private readonly max: number) {}

  /** Starts the segment of one run; `key` orders nothing, it only names it (a status index). */
  begin(key: number): void {
    if (this.segments.has(key)) return;
    this.segments.set(key, { parts: [], cut: false });
    this.order.push(key);
  }

  /** Bytes written by run `key` at sim second `at`. */
  add(key: number, b: Buffer, at = 0): void {
    const seg = this.segments.get(key);
    if (!seg || b.length === 0) return;
    seg.parts.push({ b, at });
    this.size += b.length;
    this.trim();
  }

  /** Each segment's text by its key, whole lines only where its front was dropped. */
  texts(): Map<number, string> {
    const out = new Map<number, string>();
    for (const [key, lines] of this.lines())
      out.set(
        key,
        lines
          .map((l) => `${l.text}\n`)
          .join('')
          .slice(0, this.endsOpen(key) ? -1 : undefined),
      );
    return out;
  }

  /** Each segment's lines by its key (a last line without its newline too), each at the moment its first byte was written. */
  lines(): Map<number, Line[]> {
    const out = new Map<number, Line[]>();
    for (const key of this.order) {
      const seg = this.segments.get(key)!;
      const all = Buffer.concat(seg.parts.map((p) => p.b));
      // The moment of the byte at `offset` (asked in increasing order): that of the part holding it.
      const starts: number[] = [];
      let size = 0;
      for (const p of seg.parts) {
        starts.push(size);
        size += p.b.length;
      }
      let i = 0;
      const atOf = (offset: number) => {
        while (i + 1 < starts.length && starts[i + 1]! <= offset) i++;
        return seg.parts[i]!.at;
      };
      const lines: Line[] = [];
      // A cut segment's first line is partial: it starts after the first newline.
      let from = seg.cut ? all.indexOf(0x0a) + 1 : 0;
      if (seg.cut && from === 0) from = all.length;
      while (from < all.length) {
        const nl = all.indexOf(0x0a, from);
        const to = nl < 0 ? all.length : nl;
        lines.push({ at: atOf(from), text: all.subarray(from, to).toString('utf8') });
        from = to + 1;
      }
      out.set(key, lines);
    }
    return out;
  }

  /** Whether the segment's last line has no newline yet. */
  private endsOpen(key: number): boolean {
    const last = this.segments.get(key)!.parts.at(-1);
    return last !== undefined && last.b[last.b.length - 1] !== 0x0a;
  }

  private trim(): void {
    let i = 0;
    while (this.size > this.max && i < this.order.length) {
      const seg = this.segments.get(this.order[i]!)!;
      const first = seg.parts[0];
      if (!first) {
        i++;
        continue;
      }
      seg.cut = true;
      const over = this.size - this.max;
      if (first.b.length <= over) {
        seg.parts.shift();
        this.size -= first.b.length;
      } else {
        seg.parts[0] = { b: first.b.subarray(over), at: first.at };
        this.size -= over;
      }
    }
  }
}
