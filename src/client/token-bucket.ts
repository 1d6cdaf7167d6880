// The arithmetic of one endpoint group's rate limit: no timers, no I/O, time passed in by the caller
// (the limiter reads it from the Clock), so every schedule can be checked exactly.
//
// The service enforces "a minimum interval between requests for a given endpoint and identity"
// (rate-limits-and-errors.mdx), so the bucket must never let two calls go closer than 1/per_s
// unless the user configured a burst. One `mode`, three states:
// - full: `burst` tokens and nothing accrues, fractions included: the service counts its interval
//   from the last request, so a token saved up while idle would let the next-but-one call arrive
//   early. Left by take() → flowing.
// - flowing: one token accrues every 1/per_s, counted from the take that left `full`; back to full
//   once `burst` tokens are there.
// - paused: after a 429. No tokens, nothing accrues until `pausedUntil`; resume() hands out one
//   probe token and the count starts again from then.
export type BucketMode = 'full' | 'flowing' | 'paused';

export class TokenBucket {
  mode: BucketMode = 'full';
  tokens: number;
  /** flowing: when the next token accrues (ms, the caller's clock). */
  nextAt = 0;
  /** paused: when the pause ends. */
  pausedUntil = 0;
  private intervalMs: number;
  private rate: { perS: number; burst: number };

  constructor(perS: number, burst: number) {
    checkRate(perS, burst);
    this.rate = { perS, burst };
    this.tokens = burst;
    this.intervalMs = 1000 / perS;
  }

  get perS(): number {
    return this.rate.perS;
  }

  get burst(): number {
    return this.rate.burst;
  }

  /**
   * A new rate from `now` on (a daemon's share of an account's limit changed). The next token is
   * timed from the last one at the new interval, so a slower rate never lets a call go sooner than
   * it would have; tokens above a smaller burst are dropped. A pause is kept as it is.
   */
  setRate(perS: number, burst: number, now: number): void {
    checkRate(perS, burst);
    const interval = 1000 / perS;
    if (this.mode === 'flowing' && this.nextAt !== Number.POSITIVE_INFINITY) this.nextAt += interval - this.intervalMs;
    this.intervalMs = interval;
    this.rate = { perS, burst };
    this.tokens = Math.min(this.tokens, burst);
    if (this.mode === 'full' && this.tokens < burst) {
      // The service counts its interval from the last request, which a full bucket did not keep.
      this.mode = 'flowing';
      this.nextAt = now + interval;
    }
    this.accrue(now);
  }

  /**
   * A call took a token at `now`. The limiter only runs a call when it holds a token; a call let
   * through just before a pause emptied the bucket still counts, and leaves it empty.
   */
  take(now: number): void {
    this.accrue(now);
    this.tokens = Math.max(0, this.tokens - 1);
    if (this.mode === 'paused') return;
    if (this.mode === 'full' || this.nextAt === Number.POSITIVE_INFINITY) {
      this.mode = 'flowing';
      this.nextAt = now + this.intervalMs;
    }
  }

  /** Adds the tokens due by `now` and returns how many; a full or paused bucket gains none. */
  accrue(now: number): number {
    if (this.mode !== 'flowing') return 0;
    let added = 0;
    while (this.tokens < this.burst && this.nextAt <= now) {
      this.tokens++;
      added++;
      this.nextAt += this.intervalMs;
    }
    if (this.tokens >= this.burst) this.mode = 'full';
    return added;
  }

  /** Whether a call at `now` would find a token, without crediting any (a read-only peek). */
  hasTokenAt(now: number): boolean {
    if (this.mode === 'paused') return false;
    return this.tokens >= 1 || (this.mode === 'flowing' && this.nextAt <= now);
  }

  /** When something changes without a call: the next token (flowing), the resume (paused), or never (full). */
  nextChangeAt(): number | undefined {
    if (this.mode === 'flowing') return this.nextAt;
    if (this.mode === 'paused') return this.pausedUntil;
    return undefined;
  }

  /** flowing: when the bucket will be full again if nobody takes a token (the last token's time). */
  fullAt(): number | undefined {
    if (this.mode !== 'flowing') return undefined;
    return this.nextAt + (this.burst - this.tokens - 1) * this.intervalMs;
  }

  /** Empties the bucket until `until` (a later pause already running is kept). */
  pause(until: number): void {
    this.pausedUntil = this.mode === 'paused' ? Math.max(this.pausedUntil, until) : until;
    this.mode = 'paused';
    this.tokens = 0;
  }

  /** Ends a pause with one probe token; the next one accrues a whole interval after it is taken. */
  resume(): void {
    if (this.mode !== 'paused') return;
    this.pausedUntil = 0;
    this.tokens = 1;
    this.mode = this.tokens >= this.burst ? 'full' : 'flowing';
    // A flowing bucket after a resume counts its next token from the probe's take (see take()).
    this.nextAt = Number.POSITIVE_INFINITY;
  }
}

function checkRate(perS: number, burst: number): void {
  if (!(perS > 0) || !(burst >= 1)) throw new RangeError(`a token bucket needs per_s > 0 and burst >= 1, got ${perS} and ${burst}`);
}

/** How `pauseMs` is bounded. */
export interface PausePolicy {
  /** Longest pause, ms (`retry.max_delay_s`): the jitter never takes it past this; the 429's own interval, when longer, does. */
  maxPauseMs: number;
  /** Shortest pause, ms: the service's `penalty` for this endpoint (create: 12 s); wins over the cap. */
  penaltyMs?: number;
}

/**
 * The pause after a 429: ~1/threshold s, doubled per 429 in a row, jittered up to +50%, then capped;
 * never shorter than 1/threshold s, the interval the 429 names, whatever the cap. The docs enforce
 * "a minimum interval between requests" (rate-limits-and-errors.mdx:26) and are silent on whether a
 * refused request restarts it; the simulator takes the strictest reading (it does: `count_refused`,
 * docs/simulator.md's evidence table), under which every retry sooner than the interval is refused
 * too. Seen: a daemon with `retry.max_delay_s` 0.5 asked the `other` group (1 a second) every 0.5 s
 * and was refused 26 times in a row while two other daemons shared the account.
 */
export function pauseMs(threshold: number | undefined, consecutive: number, random: number, policy: PausePolicy): number {
  const base = threshold ? 1000 / threshold : 1000;
  const grown = base * 2 ** Math.min(Math.max(consecutive, 1) - 1, 16);
  const jittered = grown * (1 + 0.5 * random);
  return Math.round(Math.max(policy.penaltyMs ?? 0, base, Math.min(policy.maxPauseMs, jittered)));
}
