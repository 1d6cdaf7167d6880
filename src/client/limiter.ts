// One limiter per endpoint group (search, create, list, show, change, bid, destroy, destroy_bulk,
// recycle, update, other).
//
// bottleneck holds the queue of calls that must wait and caps them in flight (`max_concurrent`);
// its reservoir is the gate a queued call waits at. How many tokens the gate holds, and when, is
// decided by the group's TokenBucket (./token-bucket.ts: modes full, flowing and paused), with time
// from the Clock: the limiter only mirrors the bucket into the reservoir and arms one timer for the
// bucket's next change (a token, or the end of a pause). A full group arms no timer at all, and unit
// tests drive the whole schedule with a fake clock.
//
// A call that finds a token, a free slot and nobody queued before it goes at once, without passing
// through bottleneck: bottleneck's local datastore yields through setTimeout(0) (>= 1 ms in Node)
// several times per job, ~5 ms a call, 20-odd times a bare call on loopback (issue #20 item 4). The
// bucket is the truth for both paths; the reservoir is only read by queued calls, so it is set from
// the bucket whenever the queue starts again (`demand`) and kept in step while calls wait.
//
// A 429 pauses only its group: ~1/threshold s (1 s when the 429 named none), doubled for each
// further 429 after a resume without a success in between, jittered, capped at `maxPauseMs`
// (`retry.max_delay_s`) and never shorter than the group's `penalty_s` (create: the service's
// `penalty: 12`).
//
// Daemons that share one API key share its limits (issue #21): `setShare(1/N)` gives every group
// 1/N of its configured rate and burst, for the calls not yet let through; queued calls stay queued.
//
// A `background` call (the task probe's log reads, issue #37) queues behind every other call of its
// group, whenever that one joined the queue (bottleneck's job priority): a failure log asked for
// before a destroy never waits behind a queue of them, only, at worst, for the one token a
// background call took just before it.
import Bottleneck from 'bottleneck';
import { systemClock, type Clock, type Timer } from '../clock.js';
import { RATE_GROUPS, type Config, type RateGroup } from '../config/schema.js';
import { abortedError, raceAbort } from './abort.js';
import { pauseMs, TokenBucket, type BucketMode } from './token-bucket.js';

/** bottleneck's job priorities (0 goes first, 5 is its default): a background call yields to every other. */
const FOREGROUND_PRIORITY = 5;
const BACKGROUND_PRIORITY = 9;

export interface GroupStats {
  /** Jobs handed to the limiter. */
  scheduled: number;
  /** Jobs that got a token and ran (HTTP attempts). */
  sent: number;
  /** 429 answers seen. */
  rateLimited: number;
  /** Pauses started (429s that arrive during a pause extend nothing and count only above). */
  pauses: number;
  mode: BucketMode;
  paused: boolean;
  /** Milliseconds spent paused in total. */
  pausedMs: number;
  /** Steady rate now, per second: the configured one times the share (see Limiter.setShare). */
  perS: number;
  /** Tokens the group may save up now: the configured burst times the share, at least 1. */
  burst: number;
  /** Waiting for a token or a slot. */
  queued: number;
  /** A timer is armed for the next token or the end of a pause (never while the bucket is full). */
  refilling: boolean;
}

interface PauseInfo {
  group: RateGroup;
  pauseMs: number;
  threshold: number | undefined;
  /** 429s in a row in this group without a success in between. */
  consecutive: number;
}

export interface LimiterOptions {
  /** Time and timers; default the wall clock. */
  clock?: Clock;
  /** Longest pause after repeated 429s, ms (default 15000); the jitter stays within it. */
  maxPauseMs?: number | undefined;
  onPause?: (info: PauseInfo) => void;
  onResume?: (group: RateGroup) => void;
  /** Random source in [0, 1) for the pause jitter; tests pass a fixed one. */
  random?: () => number;
}

export interface Limiter {
  /**
   * Runs `fn` when its group has a token and a free slot; rejects early if `signal` fires. A
   * `background` call goes after every other call queued in its group.
   */
  schedule<T>(group: RateGroup, fn: () => Promise<T>, signal?: AbortSignal, options?: { background?: boolean }): Promise<T>;
  /**
   * Whether a call of `group` scheduled now would wait (no token now, a call queued, the group
   * paused, or no free slot). A read-only peek: nothing is taken or credited.
   */
  wouldWait(group: RateGroup): boolean;
  /** Pauses the group after a 429; `pauseMs` is the wait until it resumes. */
  pause(group: RateGroup, threshold: number | undefined): PauseInfo;
  /** Resolves when the group is not paused (at once if it is not). */
  waitUntilResumed(group: RateGroup, signal?: AbortSignal): Promise<void>;
  /** A call of the group succeeded: the next 429 starts the backoff from its base again. */
  succeeded(group: RateGroup): void;
  /**
   * This process's share of the account's limits, in (0, 1]: every group's rate and burst become
   * that fraction of the configured ones (a burst stays at least 1), for calls not yet let through.
   * 1 restores the configured limits. `overrides` gives some groups another share (the leader of
   * several daemons sweeps the account: it takes the larger part of the list budget).
   */
  setShare(fraction: number, overrides?: Partial<Record<RateGroup, number>>): void;
  /** The share set last (1 unless setShare changed it). */
  share(): number;
  stats(): Record<RateGroup, GroupStats>;
  close(): Promise<void>;
}

class Group {
  readonly bottleneck: Bottleneck;
  readonly bucket: TokenBucket;
  readonly counters = { scheduled: 0, sent: 0, rateLimited: 0, pauses: 0, pausedMs: 0 };
  consecutive = 0;
  private pauseStartedAt = 0;
  private timer: Timer | undefined;
  private timerAt = 0;
  private waiters: Array<() => void> = [];
  /** Calls handed to bottleneck that have not passed the gate yet. */
  private waiting = 0;
  /** Calls running, by either path; at most `maxConcurrent`. */
  private inFlight = 0;
  private readonly maxConcurrent: number;
  /** Queued calls that passed the gate while fast calls held every slot. */
  private slotWaiters: Array<() => void> = [];

  constructor(
    readonly name: RateGroup,
    cfg: Config['rate_limits'][RateGroup],
    private readonly clock: Clock,
    private readonly onResume: (group: RateGroup) => void,
  ) {
    this.bucket = new TokenBucket(cfg.per_s, cfg.burst);
    this.bottleneck = new Bottleneck({ reservoir: cfg.burst, maxConcurrent: cfg.max_concurrent ?? null });
    this.maxConcurrent = cfg.max_concurrent ?? Number.POSITIVE_INFINITY;
  }

  /**
   * The fast path: takes a token now if one is there, a slot is free and no queued call is ahead
   * (so the queue's order holds); false sends the call to bottleneck's queue.
   */
  tryTakeNow(): boolean {
    if (this.waiting > 0 || this.inFlight >= this.maxConcurrent || this.bucket.mode === 'paused') return false;
    const now = this.clock.now();
    this.bucket.accrue(now);
    if (this.bucket.tokens < 1) return false;
    this.bucket.take(now);
    this.inFlight++;
    this.arm();
    return true;
  }

  /** Whether a call scheduled now would wait: tryTakeNow's test, taking nothing and changing nothing. */
  wouldWait(): boolean {
    if (this.waiting > 0 || this.inFlight >= this.maxConcurrent) return true;
    return !this.bucket.hasTokenAt(this.clock.now());
  }

  /** A queued call that passed bottleneck's gate waits here only while fast calls hold every slot. */
  async slot(): Promise<void> {
    while (this.inFlight >= this.maxConcurrent) await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
    this.inFlight++;
  }

  /** A call of either path ended: its slot goes to the first queued call waiting for one. */
  done(): void {
    this.inFlight--;
    this.slotWaiters.shift()?.();
  }

  get armed(): boolean {
    return this.timer !== undefined;
  }

  /** A call joins the queue: tokens accrued while nobody waited reach the gate now. */
  demand(): void {
    this.accrue(this.clock.now());
    // Fast calls took tokens the reservoir never saw: the first queued call sets it from the bucket
    // (bottleneck applies settings in call order, so this lands before the job reaches the gate).
    if (this.waiting++ === 0 && this.bucket.mode !== 'paused') void this.bottleneck.updateSettings({ reservoir: this.bucket.tokens });
    this.arm();
  }

  /** A new rate and burst, from now on (see Limiter.setShare). */
  setRate(perS: number, burst: number): void {
    const before = this.bucket.tokens;
    this.bucket.setRate(perS, burst, this.clock.now());
    // Queued calls read the reservoir: it follows the bucket (fewer tokens with a smaller burst).
    const delta = this.bucket.tokens - before;
    if (delta !== 0 && this.waiting > 0 && this.bucket.mode !== 'paused') void this.bottleneck.incrementReservoir(delta);
    this.arm();
  }

  /** A queued call passed the gate: the bucket counts it, and the next token is timed from now. */
  tookToken(): void {
    this.waiting--;
    this.bucket.take(this.clock.now());
    this.arm();
  }

  pause(ms: number): void {
    const now = this.clock.now();
    if (this.bucket.mode !== 'paused') this.pauseStartedAt = now;
    this.bucket.pause(now + ms);
    this.counters.pauses++;
    // Queued calls of this group wait at the emptied gate; other groups are untouched.
    void this.bottleneck.updateSettings({ reservoir: 0 });
    this.arm();
  }

  waitUntilResumed(signal?: AbortSignal): Promise<void> {
    if (this.bucket.mode !== 'paused') return Promise.resolve();
    return raceAbort(new Promise<void>((resolve) => this.waiters.push(resolve)), signal);
  }

  async close(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    for (const w of this.waiters.splice(0)) w();
    for (const w of this.slotWaiters.splice(0)) w();
    await this.bottleneck.stop({ dropWaitingJobs: true, dropErrorMessage: 'The marketplace client was closed.' });
  }

  /**
   * One timer, at the bucket's next change: the next token while a call waits for it, else the
   * moment it is full again (tokens are credited by time, so one wake-up does for all of them);
   * none while it is full.
   */
  private arm(): void {
    const at = this.waiting > 0 ? this.bucket.nextChangeAt() : (this.bucket.fullAt() ?? this.bucket.nextChangeAt());
    if (at === undefined || at === Number.POSITIVE_INFINITY) {
      this.timer?.cancel();
      this.timer = undefined;
      return;
    }
    if (this.timer && this.timerAt === at) return;
    this.timer?.cancel();
    this.timerAt = at;
    this.timer = this.clock.setTimer(() => this.due(), at - this.clock.now());
  }

  private due(): void {
    this.timer = undefined;
    const now = this.clock.now();
    if (this.bucket.mode === 'paused') {
      if (now >= this.bucket.pausedUntil) this.resume(now);
    } else {
      this.accrue(now);
    }
    this.arm();
  }

  private accrue(now: number): void {
    const added = this.bucket.accrue(now);
    // With nobody queued the reservoir is not read (the next demand sets it): no datastore round.
    if (added > 0 && this.waiting > 0) void this.bottleneck.incrementReservoir(added);
  }

  private resume(now: number): void {
    this.counters.pausedMs += now - this.pauseStartedAt;
    this.bucket.resume();
    // One probe token; the steady rate brings the rest once it is taken.
    void this.bottleneck.updateSettings({ reservoir: this.bucket.tokens });
    for (const w of this.waiters.splice(0)) w();
    this.onResume(this.name);
  }
}

export function createLimiter(rateLimits: Config['rate_limits'], options: LimiterOptions = {}): Limiter {
  const clock = options.clock ?? systemClock;
  const maxPauseMs = options.maxPauseMs ?? 15_000;
  const random = options.random ?? Math.random;
  const onResume = options.onResume ?? (() => {});
  let share = 1;
  const groups = Object.fromEntries(RATE_GROUPS.map((name) => [name, new Group(name, rateLimits[name], clock, onResume)])) as Record<
    RateGroup,
    Group
  >;

  /** Runs a call that holds a slot, and frees the slot when it settles. */
  const run = async <T>(g: Group, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } finally {
      g.done();
    }
  };

  return {
    schedule(group, fn, signal, options) {
      const g = groups[group];
      g.counters.scheduled++;
      if (signal?.aborted) return Promise.reject(abortedError(signal.reason));
      if (g.tryTakeNow()) {
        g.counters.sent++;
        return run(g, fn);
      }
      g.demand();
      const priority = options?.background ? BACKGROUND_PRIORITY : FOREGROUND_PRIORITY;
      const job = g.bottleneck.schedule({ priority }, async () => {
        // A slot first (fast calls may hold them all), so that the next token is timed from the send.
        await g.slot();
        // The token is spent either way, but a cancelled call must not reach the service.
        g.tookToken();
        if (signal?.aborted) {
          g.done();
          throw abortedError(signal.reason);
        }
        g.counters.sent++;
        return run(g, fn);
      });
      return raceAbort(job, signal);
    },

    pause(group, threshold) {
      const g = groups[group];
      g.counters.rateLimited++;
      const now = clock.now();
      // Several calls in flight can all get 429 from one burst: they share the pause already running
      // instead of each doubling it.
      if (g.bucket.mode === 'paused' && g.bucket.pausedUntil > now) {
        return { group, pauseMs: g.bucket.pausedUntil - now, threshold, consecutive: g.consecutive };
      }
      g.consecutive++;
      const penaltyS = rateLimits[group].penalty_s;
      const ms = pauseMs(threshold, g.consecutive, random(), {
        maxPauseMs,
        ...(penaltyS === undefined ? {} : { penaltyMs: penaltyS * 1000 }),
      });
      g.pause(ms);
      const info = { group, pauseMs: ms, threshold, consecutive: g.consecutive };
      options.onPause?.(info);
      return info;
    },

    wouldWait(group) {
      return groups[group].wouldWait();
    },

    waitUntilResumed(group, signal) {
      return groups[group].waitUntilResumed(signal);
    },

    succeeded(group) {
      groups[group].consecutive = 0;
    },

    setShare(fraction, overrides = {}) {
      for (const f of [fraction, ...Object.values(overrides)])
        if (!(f > 0 && f <= 1)) throw new RangeError(`a rate share is in (0, 1], got ${f}`);
      share = fraction;
      for (const name of RATE_GROUPS) {
        const cfg = rateLimits[name];
        const part = overrides[name] ?? fraction;
        groups[name].setRate(cfg.per_s * part, Math.max(1, Math.floor(cfg.burst * part)));
      }
    },

    share() {
      return share;
    },

    stats() {
      return Object.fromEntries(
        RATE_GROUPS.map((name) => {
          const g = groups[name];
          return [
            name,
            {
              ...g.counters,
              mode: g.bucket.mode,
              paused: g.bucket.mode === 'paused',
              perS: g.bucket.perS,
              burst: g.bucket.burst,
              queued: g.bottleneck.queued(),
              refilling: g.armed,
            },
          ];
        }),
      ) as Record<RateGroup, GroupStats>;
    },

    async close() {
      await Promise.all(RATE_GROUPS.map((name) => groups[name].close()));
    },
  };
}
