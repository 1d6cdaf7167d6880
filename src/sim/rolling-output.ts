// A container's output as `docker logs` keeps it: everything its starts wrote, in order, up to a
// byte cap, past which the *oldest* bytes go (a rolling file), so the last lines are always there
// however chatty the task. Each container start (each onstart run) writes its own segment, so the
// container log can show every run's output after its own "started" line. A segment whose front
// was dropped loses the rest of its first, partial line too: logs are read by whole lines.

interface Segment {
  parts: Buffer[];
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

  add(key: number, b: Buffer): void {
    const seg = this.segments.get(key);
    if (!seg || b.length === 0) return;
    seg.parts.push(b);
    this.size += b.length;
    this.trim();
  }

  /** Each segment's text by its key, whole lines only where its front was dropped. */
  texts(): Map<number, string> {
    const out = new Map<number, string>();
    for (const key of this.order) {
      const seg = this.segments.get(key)!;
      let text = Buffer.concat(seg.parts).toString('utf8');
      if (seg.cut) {
        const nl = text.indexOf('\n');
        text = nl < 0 ? '' : text.slice(nl + 1);
      }
      out.set(key, text);
    }
    return out;
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
      if (first.length <= over) {
        seg.parts.shift();
        this.size -= first.length;
      } else {
        seg.parts[0] = first.subarray(over);
        this.size -= over;
      }
    }
  }
}
