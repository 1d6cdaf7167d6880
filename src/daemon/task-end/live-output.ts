// A followed task's output, line by line, to whoever watches its run live (issue #39): the event
// streams that asked for it (GET /v1/events/stream?run=ID&output=1), which `berth logs --follow`
// and the dashboard's run page read. The follower (./task-follow.ts) hands over each batch of
// complete lines once the store holds it (the attempt's kept tail and its offset, one write), with
// the out-file's bytes it spans: a watcher that read the stored log first prints from its offset on,
// and nothing twice. Nothing is kept here: what a watcher missed (before it came, lines left out)
// is in what the store keeps, and nothing is built for a run no stream watches.
//
// Bounds, so that megabytes of output cannot flood a stream or memory: each line is cut at
// LINE_MAX characters, and each attempt sends at most RATE_PER_S characters a second (a bucket that
// holds BURST): past it, a batch's last lines that fit are sent and the lines before them counted
// (`left_out`, which also counts the lines of batches left out whole since the last one sent). A stream that reads slower than that leaves out lines too (../control/event-stream.ts),
// never buffering more than one batch. Per attempt watched, one bucket (a few numbers) is held.
import type { Clock } from '../../clock.js';
import type { StreamOutput } from '../../wire/control-api.js';

/** The longest line sent, in characters; a longer one is cut there and ends with CUT_MARK. */
export const LINE_MAX = 4096;
/** Characters sent per attempt per second at most, on average. */
export const RATE_PER_S = 64 * 1024;
/** Characters an attempt may send at once after a quiet spell. */
const BURST = 64 * 1024;
/** What a cut line ends with. */
const CUT_MARK = ' …';

type Watcher = (out: StreamOutput) => void;

interface Bucket {
  chars: number;
  at: number;
  /** Lines not sent since the last batch that was. */
  leftOut: number;
}

export class LiveOutput {
  private readonly watchers = new Map<string, Set<Watcher>>();
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly clock: Pick<Clock, 'now'>) {}

  /** Calls `fn` with each batch of the run's output from now on; returns the function that stops it. */
  watch(runId: string, fn: Watcher): () => void {
    let set = this.watchers.get(runId);
    if (!set) this.watchers.set(runId, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size > 0) return;
      this.watchers.delete(runId);
      for (const key of this.buckets.keys()) if (key.startsWith(`${runId}:`)) this.buckets.delete(key);
    };
  }

  /**
   * Attempt n's output from byte `from` to byte `to` of its out-file, kept in the store: `text` its
   * lines, secrets already scrubbed (a last line without its newline is one the follower cut).
   */
  publish(t: { runId: string; n: number }, from: number, to: number, text: string): void {
    const set = this.watchers.get(t.runId);
    if (!set) return;
    const key = `${t.runId}:${t.n}`;
    const now = this.clock.now();
    let bucket = this.buckets.get(key);
    if (!bucket) this.buckets.set(key, (bucket = { chars: BURST, at: now, leftOut: 0 }));
    bucket.chars = Math.min(BURST, bucket.chars + ((now - bucket.at) * RATE_PER_S) / 1000);
    bucket.at = now;
    // Over the rate, a batch's last lines are sent (what a watcher wants to see is the latest), and
    // the ones before them counted.
    const all = text.replace(/\n$/, '').split('\n');
    const lines: string[] = [];
    for (let i = all.length - 1; i >= 0; i--) {
      const whole = all[i]!;
      const line = whole.length > LINE_MAX ? whole.slice(0, LINE_MAX) + CUT_MARK : whole;
      // A line costs its characters and its place in the message.
      const cost = line.length + 4;
      if (cost > bucket.chars) break;
      bucket.chars -= cost;
      lines.push(line);
    }
    const leftOut = bucket.leftOut + all.length - lines.length;
    if (lines.length === 0) {
      bucket.leftOut = leftOut;
      return;
    }
    bucket.leftOut = 0;
    const out: StreamOutput = { run_id: t.runId, n: t.n, from, to, lines: lines.reverse(), left_out: leftOut };
    for (const fn of [...set]) fn(out);
  }
}
