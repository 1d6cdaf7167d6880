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
  private t: number;
  private seq = 0;
  private timers: Pending[] = [];
  readonly sleep: Clock['sleep'];
  readonly sleepUntil: Clock['sleepUntil'];

  constructor(start = Date.UTC(2026, 10, 22, 12, 0, 0)) {
    this.t = start;
    const fns = sleepFns(this);
    this.sleep = fns.sleep;
    this.sleepUntil = fns.sleepUntil;
  }

  now(): number {
    return this.t;
  }

  setTimer(fn: () => void, ms: number): Timer {
    const entry: Pending = { at: this.t + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(entry);
    return { cancel: () => (this.timers = this.timers.filter((p) => p !== entry)) };
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing due timers in order and settling promises after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await flush();
    for (;;) {
      const next = this.timers.filter((p) => p.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.timers = this.timers.filter((p) => p !== next);
      this.t = Math.max(this.t, next.at);
      next.fn();
      await flush();
    }
    this.t = end;
    await flush();
  }

  /** Lets pending promise callbacks run without moving time. */
  settle(): Promise<void> {
    return flush();
  }
}

/** Several macrotask turns: enough for chains of awaits (and undici-free code) to settle. */
async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
