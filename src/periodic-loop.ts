// One round of work again and again on the Clock: the daemon's periodic loops (the account watch,
// the price increases, the cluster's heartbeat, the notifier's deliveries, the event streams' poll
// and heartbeats, the create gate's recheck) are each one of these, so scheduling, "now", stopping
// and back-off are decided here once.
//
// The next round is timed from the end of the one before (never from its start), so a slow round
// never overlaps the next. A round that throws or rejects is reported (`onError`) and the loop goes
// on: with `backoff`, after the back-off wait, else after the interval.
//
// States: idle (no round due: waits to be asked) ⇄ waiting (one timer armed) ⇄ running (one round in
// flight) → stopped. `checkNow` runs a round at once (or joins the one in flight); `soon` brings the
// next round to within a time; `cancelPending` drops the armed timer; `stop` drops it and lets a
// round in flight finish without scheduling another.
import type { Clock, Timer } from './clock.js';

interface Backoff {
  /** The wait after the first failure in a row, ms; it doubles per failure after that. */
  firstMs: number;
  /** The longest wait, ms. */
  maxMs: number;
  /** Up to this part (0 to 1) of each wait is taken off at random, so many clients do not retry together; 0 by default. */
  jitter?: number;
  /** Random source in [0, 1) for the jitter; tests pass a fixed one. */
  random?: () => number;
}

interface PeriodicLoopOptions {
  clock: Pick<Clock, 'setTimer' | 'now'>;
  /** One round. A throw or a rejection is a failure, reported and survived. */
  run(): void | Promise<void>;
  /**
   * Ms from the end of one round to the start of the next, asked as each is scheduled (so it may
   * differ round to round); null: no round until one is asked for (`checkNow`, `soon`).
   */
  intervalMs: number | null | (() => number | null);
  /** A round failed; `failures` counts the failures in a row, this one included. */
  onError(err: unknown, failures: number): void;
  /** After a failure, the next round waits this instead of the interval. */
  backoff?: Backoff | undefined;
}

export class PeriodicLoop {
  private timer: Timer | undefined;
  /** When the armed timer falls due (the clock's `now`). */
  private timerAt = Number.POSITIVE_INFINITY;
  private inFlight: Promise<void> | undefined;
  private running = false;
  /** The latest the round after the one running may start (`soon` while running). */
  private dueBy = Number.POSITIVE_INFINITY;
  private failures = 0;
  private ended = false;

  constructor(private readonly options: PeriodicLoopOptions) {}

  /** True once `stop` was called. */
  get stopped(): boolean {
    return this.ended;
  }

  /** Arms the first round, `firstInMs` from now (the interval by default). */
  start(firstInMs?: number): void {
    if (this.ended || this.running) return;
    const ms = firstInMs ?? this.interval();
    if (ms === null) return;
    this.cancelPending();
    this.arm(this.options.clock.now() + ms);
  }

  /**
   * Runs a round now, or joins the one in flight; the next is timed from its end. Resolves once it
   * is done (a failure is reported, never thrown). Does nothing once stopped.
   */
  checkNow(): Promise<void> {
    if (this.ended) return Promise.resolve();
    if (this.running) return this.inFlight ?? Promise.resolve();
    return this.round();
  }

  /**
   * The next round starts within `ms` from now: an earlier one armed already stands. While a round
   * runs, the one after it starts within `ms` of its end, or sooner by its interval.
   */
  soon(ms = 0): void {
    if (this.ended) return;
    const at = this.options.clock.now() + Math.max(0, ms);
    if (this.running) {
      this.dueBy = Math.min(this.dueBy, at);
      return;
    }
    if (this.timer && this.timerAt <= at) return;
    this.cancelPending();
    this.arm(at);
  }

  /** Drops the armed round, if any: the loop is idle until asked again. */
  cancelPending(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  /** No round is started from now on; one in flight finishes, and schedules none after it. */
  stop(): void {
    this.ended = true;
    this.cancelPending();
  }

  private interval(): number | null {
    const { intervalMs } = this.options;
    return typeof intervalMs === 'function' ? intervalMs() : intervalMs;
  }

  private arm(at: number): void {
    this.timerAt = at;
    this.timer = this.options.clock.setTimer(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        void this.round();
      },
      Math.max(0, at - this.options.clock.now()),
    );
  }

  /** One round; a round that returns no promise is done at once, so a synchronous loop stays synchronous. */
  private round(): Promise<void> {
    this.cancelPending();
    this.running = true;
    let result: void | Promise<void>;
    try {
      result = this.options.run();
    } catch (err) {
      this.finish({ err });
      return Promise.resolve();
    }
    if (!(result instanceof Promise)) {
      this.finish(null);
      return Promise.resolve();
    }
    this.inFlight = result.then(
      () => this.finish(null),
      (err: unknown) => this.finish({ err }),
    );
    return this.inFlight;
  }

  /** `failed`: null when the round went through. */
  private finish(failed: { err: unknown } | null): void {
    this.running = false;
    this.inFlight = undefined;
    const dueBy = this.dueBy;
    this.dueBy = Number.POSITIVE_INFINITY;
    let wait: number | null;
    if (failed === null) {
      this.failures = 0;
      wait = this.ended ? null : this.interval();
    } else {
      this.failures++;
      try {
        this.options.onError(failed.err, this.failures);
      } catch {
        // A report that fails must not end the loop.
      }
      wait = this.ended ? null : this.options.backoff ? this.backoffMs(this.options.backoff) : this.interval();
    }
    if (this.ended) return;
    const now = this.options.clock.now();
    const at = Math.min(wait === null ? Number.POSITIVE_INFINITY : now + wait, dueBy);
    if (at !== Number.POSITIVE_INFINITY) this.arm(at);
  }

  private backoffMs({ firstMs, maxMs, jitter = 0, random = Math.random }: Backoff): number {
    const ms = Math.min(maxMs, firstMs * 2 ** Math.min(this.failures - 1, 30));
    return jitter > 0 ? ms * (1 - jitter * random()) : ms;
  }
}
