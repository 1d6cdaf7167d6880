// A Clock for unit tests: time stands still until the test moves it. `advance` fires every timer
// that falls due on the way, in order, each at its own moment, and lets promise callbacks run
// between them, so code that sleeps in a loop sees the same schedule it would see for real.
import { sleepFns, type Clock, type Timer } from '../../src/clock.js';

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

export class FakeClock implements Clock {
  /** The monotonic time: `advance` moves it, `step` does not. Timers fall due on it, as real ones do. */
  private m = 0;
  /** The wall clock less the monotonic one (`step` moves it). */
  private wallOffset: number;
  private seq = 0;
  private timers: Pending[] = [];
  readonly sleep: Clock['sleep'];
  readonly sleepUntil: Clock['sleepUntil'];

  /**
   * `timeoutTurns`: setTimeout(0) turns to let run after each step, for code under test whose
   * libraries yield with setTimeout(0) (bottleneck does at every queue step); 0 by default.
   */
  constructor(
    start = Date.UTC(2026, 10, 22, 12, 0, 0),
    private readonly options: { timeoutTurns?: number } = {},
  ) {
    this.wallOffset = start;
    const fns = sleepFns(this);
    this.sleep = fns.sleep;
    this.sleepUntil = fns.sleepUntil;
  }

  now(): number {
    return this.m + this.wallOffset;
  }

  monotonic(): number {
    return this.m;
  }

  /**
   * Steps the wall clock by `ms` (either way) as NTP or an operator would: `now()` jumps, the
   * monotonic clock and the timers do not (nothing falls due).
   */
  step(ms: number): void {
    this.wallOffset += ms;
  }

  setTimer(fn: () => void, ms: number): Timer {
    const entry: Pending = { at: this.m + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(entry);
    return { cancel: () => (this.timers = this.timers.filter((p) => p !== entry)) };
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing due timers in order and settling promises after each. */
  async advance(ms: number): Promise<void> {
    const end = this.m + ms;
    await flush(this.options.timeoutTurns ?? 0);
    for (;;) {
      const next = this.timers.filter((p) => p.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.timers = this.timers.filter((p) => p !== next);
      this.m = Math.max(this.m, next.at);
      next.fn();
      await flush(this.options.timeoutTurns ?? 0);
    }
    this.m = end;
    await flush(this.options.timeoutTurns ?? 0);
  }

  /** Lets pending promise callbacks run without moving time. */
  settle(): Promise<void> {
    return flush(this.options.timeoutTurns ?? 0);
  }
}

/** Several macrotask turns: enough for chains of awaits (and undici-free code) to settle. */
async function flush(timeoutTurns: number): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  for (let i = 0; i < timeoutTurns; i++) {
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
