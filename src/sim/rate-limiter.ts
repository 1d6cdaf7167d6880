// Token buckets per endpoint group and identity, on wall time. A threshold T means T sustained
// requests per second with a bucket of max(1, T) tokens (the service does not publish its window;
// this reading lets a client at exactly T never see a 429). Buckets refill lazily on use.
import type { BucketConfig, RateGroup, RateLimitConfig } from './config.js';

interface Bucket {
  tokens: number;
  at: number;
}

export type RateVerdict = { ok: true } | { ok: false; threshold: string };

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly config: RateLimitConfig,
    private readonly now: () => number,
  ) {}

  take(group: RateGroup, identity: string): RateVerdict {
    if (!this.config.enabled) return { ok: true };
    const spec = this.config.groups[group];
    if (!spec) return { ok: true };
    const burst = spec.burst ?? Math.max(1, spec.per_s);
    const key = `${group}\u0000${identity}`;
    const t = this.now();
    const b = this.buckets.get(key) ?? { tokens: burst, at: t };
    b.tokens = Math.min(burst, b.tokens + ((t - b.at) / 1000) * spec.per_s);
    b.at = t;
    this.buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, threshold: thresholdText(spec) };
  }
}

/** The threshold as the service prints it: one decimal for round values ("4.5", "1.0"). */
export function thresholdText(spec: BucketConfig): string {
  const x = spec.per_s;
  return Number.isInteger(x * 10) ? x.toFixed(1) : String(Math.round(x * 1000) / 1000);
}
