// One bottleneck limiter per endpoint group (search, create, list, show, change, destroy, other).
//
// Each group is a token bucket: bottleneck's reservoir is the bucket (capacity `burst`) and gates
// jobs, bottleneck's maxConcurrent caps calls in flight. The refill is ours, not bottleneck's
// `reservoirIncrease*`: that one adds at most one step per heartbeat (250 ms by default, so rates
// above 4/s silently fall short) and `updateSettings` stops its heartbeat, so it could not be
// paused and resumed. Our refill credits tokens by elapsed time, which keeps the long-run rate at
// `per_s` whatever the tick.
//
// A group is in one of three states:
// - full: `burst` tokens and nobody waiting; no timer runs (seven groups would otherwise wake the
//   daemon up to 70 times a second for nothing) and, like the service's bucket, nothing accrues.
//   Left when a job is scheduled (demand) and takes a token (tookToken): the count starts then;
// - flowing: the refill tick adds tokens up to `burst`, then the group is full again;
// - paused: after a 429 the reservoir is emptied and the refill stops; jobs of this group wait in
//   bottleneck's queue (other groups are untouched). A timer resumes the group with a single token,
//   then it flows again.
// The pause is ~1/threshold s (1 s when the 429 named none), doubled for each further 429 that
// arrives after a resume without a success in between, with jitter, capped at `maxPauseMs`.
import Bottleneck from 'bottleneck';
import { RATE_GROUPS, type Config, type RateGroup } from '../config/schema.js';
import { abortedError, raceAbort } from './abort.js';

export interface GroupStats {
  /** Jobs handed to the limiter. */
  scheduled: number;
  /** Jobs that got a token and ran (HTTP attempts). */
  sent: number;
  /** 429 answers seen. */
  rateLimited: number;
  /** Pauses started (429s that arrive during a pause extend nothing and count only above). */
  pauses: number;
  paused: boolean;
  /** Milliseconds spent paused in total. */
  pausedMs: number;
  /** Configured steady rate, per second. */
  perS: number;
  /** Waiting for a token or a slot. */
  queued: number;
  /** The refill tick runs (false once the bucket is full and nothing waits). */
  refilling: boolean;
}

export interface PauseInfo {
  group: RateGroup;
  pauseMs: number;
  threshold: number | undefined;
  /** 429s in a row in this group without a success in between. */
  consecutive: number;
}

export interface LimiterOptions {
  /** Longest pause after repeated 429s, ms (default 15000). */
  maxPauseMs?: number;
  onPause?: (info: PauseInfo) => void;
  onResume?: (group: RateGroup) => void;
  /** Random source in [0, 1) for the pause jitter; tests pass a fixed one. */
  random?: () => number;
}

export interface Limiter {
  /** Runs `fn` when its group has a token and a free slot; rejects early if `signal` fires. */
  schedule<T>(group: RateGroup, fn: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Pauses the group after a 429; `pauseMs` is the wait until it resumes. */
  pause(group: RateGroup, threshold: number | undefined): PauseInfo;
  /** Resolves when the group is not paused (at once if it is not). */
  waitUntilResumed(group: RateGroup, signal?: AbortSignal): Promise<void>;
  /** A call of the group succeeded: the next 429 starts the backoff from its base again. */
  succeeded(group: RateGroup): void;
  stats(): Record<RateGroup, GroupStats>;
  close(): Promise<void>;
}

class Group {
  readonly bottleneck: Bottleneck;
  readonly counters = { scheduled: 0, sent: 0, rateLimited: 0, pauses: 0, pausedMs: 0 };
  consecutive = 0;
  pausedUntil = 0;
  private pauseStartedAt = 0;
  private credit = 0;
  private last = performance.now();
  private refilling = false;
  /** The last refill filled the bucket: a full bucket accrues nothing until a token is taken. */
  private full = true;
  private readonly tickMs: number;
  private refillTimer: NodeJS.Timeout | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;
  private waiters: Array<() => void> = [];

  constructor(
    readonly name: RateGroup,
    readonly perS: number,
    readonly burst: number,
    private readonly maxConcurrent: number | undefined,
    private readonly onResume: (group: RateGroup) => void,
  ) {
    this.bottleneck = new Bottleneck({ reservoir: burst, maxConcurrent: maxConcurrent ?? null });
    // Tick at most every 100 ms and at least twice per token, so a bucket of 1 never overflows
    // between ticks; the credit is by elapsed time, so the tick only bounds the lateness of a token.
    this.tickMs = Math.min(100, Math.max(1, 1000 / perS / 2));
  }

  /** A job is about to take a token: make sure the bucket refills. */
  demand(): void {
    if (this.refillTimer) return;
    // The bucket was full until now, so nothing accrued while the timer was off.
    this.credit = 0;
    this.last = performance.now();
    this.refillTimer = setInterval(() => void this.refill(), this.tickMs);
    this.refillTimer.unref();
  }

  /** A job got its token. If the bucket was full, the next token is counted from now. */
  tookToken(): void {
    if (!this.full) return;
    this.full = false;
    this.credit = 0;
    this.last = performance.now();
  }

  get ticking(): boolean {
    return this.refillTimer !== undefined;
  }

  private idle(): void {
    clearInterval(this.refillTimer);
    this.refillTimer = undefined;
  }

  get paused(): boolean {
    return this.pausedUntil > 0;
  }

  private async refill(): Promise<void> {
    const now = performance.now();
    if (this.paused || this.refilling) {
      this.last = now;
      return;
    }
    this.credit += ((now - this.last) * this.perS) / 1000;
    this.last = now;
    const whole = Math.floor(this.credit);
    if (whole < 1) return;
    this.refilling = true;
    try {
      const reservoir = (await this.bottleneck.currentReservoir()) ?? 0;
      this.credit -= whole;
      const add = Math.min(whole, this.burst - reservoir);
      if (add > 0 && !this.paused) await this.bottleneck.incrementReservoir(add);
      if (reservoir + Math.max(add, 0) < this.burst) return;
      // Full. A job waiting for a token takes it at once, so the fraction counts on. Otherwise the
      // bucket sits full, and like the service's own bucket it accrues nothing, fractions included,
      // until a token is taken (tookToken); with nobody about to take one, the tick stops until
      // the next demand(). A stale reading here only errs on the slow side.
      const c = this.bottleneck.counts();
      const inFlight = c.RUNNING + c.EXECUTING;
      const waitingForToken = c.RECEIVED + c.QUEUED > 0 && (this.maxConcurrent === undefined || inFlight < this.maxConcurrent);
      if (waitingForToken) return;
      this.credit = 0;
      this.full = true;
      if (c.RECEIVED + c.QUEUED + c.RUNNING === 0) this.idle();
    } finally {
      this.refilling = false;
    }
  }

  pause(pauseMs: number): void {
    const now = Date.now();
    if (!this.paused) this.pauseStartedAt = now;
    this.pausedUntil = Math.max(this.pausedUntil, now + pauseMs);
    this.counters.pauses++;
    this.full = false;
    // Empty the bucket so that queued jobs of this group wait; the refill is stopped while paused.
    void this.bottleneck.currentReservoir().then((r) => (r && r > 0 ? this.bottleneck.incrementReservoir(-r) : r));
    clearTimeout(this.resumeTimer);
    this.resumeTimer = setTimeout(() => this.resume(), this.pausedUntil - now);
    this.resumeTimer.unref();
  }

  private resume(): void {
    this.counters.pausedMs += Date.now() - this.pauseStartedAt;
    this.pausedUntil = 0;
    this.credit = 0;
    this.last = performance.now();
    // One probe token; the steady refill brings the rest.
    this.demand();
    void this.bottleneck.currentReservoir().then((r) => (r !== null && r < 1 ? this.bottleneck.incrementReservoir(1 - r) : r));
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
    this.onResume(this.name);
  }

  waitUntilResumed(signal?: AbortSignal): Promise<void> {
    if (!this.paused) return Promise.resolve();
    return raceAbort(new Promise<void>((resolve) => this.waiters.push(resolve)), signal);
  }

  async close(): Promise<void> {
    this.idle();
    clearTimeout(this.resumeTimer);
    for (const w of this.waiters.splice(0)) w();
    await this.bottleneck.stop({ dropWaitingJobs: true, dropErrorMessage: 'The marketplace client was closed.' });
  }
}

export function createLimiter(rateLimits: Config['rate_limits'], options: LimiterOptions = {}): Limiter {
  const maxPauseMs = options.maxPauseMs ?? 15_000;
  const random = options.random ?? Math.random;
  const onResume = options.onResume ?? (() => {});
  const groups = Object.fromEntries(
    RATE_GROUPS.map((name) => {
      const cfg = rateLimits[name];
      return [name, new Group(name, cfg.per_s, cfg.burst, cfg.max_concurrent, onResume)];
    }),
  ) as Record<RateGroup, Group>;

  return {
    schedule(group, fn, signal) {
      const g = groups[group];
      g.counters.scheduled++;
      g.demand();
      const job = g.bottleneck.schedule(async () => {
        // The token is spent either way, but a cancelled call must not reach the service.
        g.tookToken();
        if (signal?.aborted) throw abortedError(signal.reason);
        g.counters.sent++;
        return fn();
      });
      return raceAbort(job, signal);
    },

    pause(group, threshold) {
      const g = groups[group];
      g.counters.rateLimited++;
      const now = Date.now();
      // Several calls in flight can all get 429 from one burst: they share the pause already running
      // instead of each doubling it.
      if (g.paused && g.pausedUntil > now) return { group, pauseMs: g.pausedUntil - now, threshold, consecutive: g.consecutive };
      g.consecutive++;
      const base = threshold ? 1000 / threshold : 1000;
      const grown = base * 2 ** Math.min(g.consecutive - 1, 16);
      const pauseMs = Math.round(Math.min(maxPauseMs, grown) * (1 + 0.5 * random()));
      g.pause(pauseMs);
      const info = { group, pauseMs, threshold, consecutive: g.consecutive };
      options.onPause?.(info);
      return info;
    },

    waitUntilResumed(group, signal) {
      return groups[group].waitUntilResumed(signal);
    },

    succeeded(group) {
      groups[group].consecutive = 0;
    },

    stats() {
      return Object.fromEntries(
        RATE_GROUPS.map((name) => {
          const g = groups[name];
          return [name, { ...g.counters, paused: g.paused, perS: g.perS, queued: g.bottleneck.queued(), refilling: g.ticking }];
        }),
      ) as Record<RateGroup, GroupStats>;
    },

    async close() {
      await Promise.all(RATE_GROUPS.map((name) => groups[name].close()));
    },
  };
}
