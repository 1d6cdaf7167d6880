// Rate limits as rate-limits-and-errors.mdx describes them: per endpoint and per identity, enforced
// as a minimum interval between requests, with max-calls-per-period limits on some endpoints and
// create's penalty after a violation. All on wall time; state is kept lazily per (endpoint,
// identity) and needs no timer.
//
// Per key, a limiter holds: `tokens` (1 after a quiet interval; more only with the `burst` test
// knob), the times of the recent requests inside the max-calls window, and `blockedUntil` (a
// penalty). A request is refused while blocked, without a token, or with the window full. With
// `count_refused` (the default) a refused request still counts: it empties the tokens and fills
// the window, so a client that keeps hammering keeps being refused.
import { rateLimitSchema, type LimitConfig, type RateGroup, type RateLimitConfig } from './config.js';

interface State {
  tokens: number;
  at: number;
  recent: number[];
  blockedUntil: number;
}

/** What can change at run time (`plain_text` is read by the server from the start config). */
export interface RateLimitUpdate {
  enabled?: boolean | undefined;
  count_refused?: boolean | undefined;
  groups?: Partial<Record<RateGroup, unknown>> | undefined;
}

export type RateVerdict = { ok: true } | { ok: false; threshold: string | null };

export class RateLimiter {
  private readonly states = new Map<string, State>();
  private config: RateLimitConfig;

  constructor(
    initial: RateLimitConfig,
    private readonly now: () => number,
  ) {
    this.config = { ...initial, groups: { ...initial.groups } };
  }

  current(): RateLimitConfig {
    return { ...this.config, groups: { ...this.config.groups } };
  }

  /**
   * Merges a partial update (the group limits given replace theirs; null turns one off), validated
   * like the config file's. It applies from the next request; what each key has used so far stays.
   */
  update(partial: RateLimitUpdate): RateLimitConfig {
    const given = Object.fromEntries(Object.entries(partial).filter(([, v]) => v !== undefined));
    this.config = rateLimitSchema.parse({ ...this.config, ...given, groups: { ...this.config.groups, ...partial.groups } });
    return this.current();
  }

  /** `endpoint` names the method and path template; `identity` comes from `identityKey`. */
  take(group: RateGroup, endpoint: string, identity: string): RateVerdict {
    if (!this.config.enabled) return { ok: true };
    const spec = this.config.groups[group];
    if (!spec) return { ok: true };
    const t = this.now();
    const key = `${endpoint}\u0000${identity}`;
    let s = this.states.get(key);
    if (!s) {
      s = { tokens: spec.burst, at: t, recent: [], blockedUntil: 0 };
      this.states.set(key, s);
    }
    if (spec.per_s !== undefined) {
      s.tokens = Math.min(spec.burst, s.tokens + ((t - s.at) / 1000) * spec.per_s);
    }
    s.at = t;
    if (spec.max_calls) {
      const since = t - spec.max_calls.window_s * 1000;
      while (s.recent.length > 0 && s.recent[0]! <= since) s.recent.shift();
    }

    const refused =
      t < s.blockedUntil ||
      (spec.per_s !== undefined && s.tokens < 1) ||
      (spec.max_calls !== undefined && s.recent.length >= spec.max_calls.requests);
    if (!refused) {
      if (spec.per_s !== undefined) s.tokens -= 1;
      if (spec.max_calls) s.recent.push(t);
      return { ok: true };
    }
    if (this.config.count_refused) {
      if (spec.per_s !== undefined) s.tokens = 0;
      if (spec.max_calls) s.recent.push(t);
    }
    if (spec.penalty_s > 0) s.blockedUntil = t + spec.penalty_s * 1000;
    return { ok: false, threshold: thresholdText(spec) };
  }
}

/** The threshold as the service prints it, one decimal for round values ("4.5", "1.0"); none for a window. */
function thresholdText(spec: LimitConfig): string | null {
  const x = spec.per_s;
  if (x === undefined) return null;
  return Number.isInteger(x * 10) ? x.toFixed(1) : String(Math.round(x * 1000) / 1000);
}
