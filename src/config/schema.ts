// The configuration's schema: every field with its unit and default (defaults live in
// config/default.json; this schema checks whatever the merge produced).
import { z } from 'zod';

const seconds = z.number().nonnegative();
const positiveSeconds = z.number().positive();

export const relaxStepSchema = z
  .strictObject({
    /** Filter names to remove. */
    drop: z.array(z.string().min(1)).optional(),
    /** Filters to replace, in the service's query language `{field: {op: value}}`. */
    set: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  })
  .refine((s) => s.drop !== undefined || s.set !== undefined, { message: 'a relax step needs "drop" or "set"' });

export type RelaxStep = z.infer<typeof relaxStepSchema>;

const rateGroupSchema = z.strictObject({
  /** Sustained calls per second allowed to this endpoint group. */
  per_s: z.number().positive(),
  /** Calls that may go at once after a quiet period (token bucket size); default 1. */
  burst: z.number().int().positive().default(1),
  /** Calls of this group in flight at once; default unlimited. */
  max_concurrent: z.number().int().positive().optional(),
});

export type RateGroupConfig = z.infer<typeof rateGroupSchema>;

export const RATE_GROUPS = ['search', 'create', 'list', 'show', 'change', 'destroy', 'other'] as const;
export type RateGroup = (typeof RATE_GROUPS)[number];

export const configSchema = z.strictObject({
  service: z.strictObject({
    /** Base address of the marketplace (default https://console.vast.ai). */
    base_url: z.url(),
    /** Per-request timeout for headers and body, seconds (default 30). */
    timeout_s: positiveSeconds,
    /** TCP connect timeout, seconds (default 10). */
    connect_timeout_s: positiveSeconds,
    /** File holding the API key (used when BERTH_API_KEY is not set). */
    api_key_file: z.string().optional(),
  }),
  daemon: z.strictObject({
    /** Control API address, loopback only (default 127.0.0.1:7777; port 0 picks a free one). */
    listen: z.string().regex(/^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/, 'must be a loopback HOST:PORT'),
    /** Runs driven at once; the rest wait in `queued` (default 1000). */
    max_active_runs: z.number().int().positive(),
  }),
  polling: z.strictObject({
    /** One instance-list call per interval for all runs, seconds (default 10, as the seed recommends). */
    interval_s: positiveSeconds,
  }),
  rate_limits: z.strictObject(
    Object.fromEntries(RATE_GROUPS.map((g) => [g, rateGroupSchema])) as Record<RateGroup, typeof rateGroupSchema>,
  ),
  retry: z.strictObject({
    /** Give up retrying one call after this long, seconds (default 60). */
    max_retry_time_s: positiveSeconds,
    /** First retry delay, seconds (default 0.5). */
    min_delay_s: positiveSeconds,
    /** Longest retry delay, seconds (default 15). */
    max_delay_s: positiveSeconds,
    /** Growth of the delay between tries (default 2). */
    factor: z.number().min(1),
  }),
  runs: z.strictObject({
    /** Offers tried per run before it fails (default 8). */
    max_attempts: z.number().int().positive(),
    /** Time an instance may stay loading before it is replaced, seconds (default 600). */
    boot_timeout_s: positiveSeconds,
    /** Time from submission after which an unfinished run fails, seconds (default 7200). */
    deadline_s: positiveSeconds,
    /** Longest wait between retries of a failed destroy, seconds (default 60). */
    destroy_retry_max_delay_s: positiveSeconds,
    /** Wait after a service outage (retries exhausted) before the step is tried again, seconds (default 30). */
    outage_backoff_s: positiveSeconds,
    /** Offers of one search that may turn out gone before the run searches again (default 3). */
    gone_offers_per_search: z.number().int().positive(),
    /** How long a machine that failed any run is tried last by the daemon's other runs, seconds (default 900). */
    machine_quarantine_s: seconds,
    /** Default relax ladder for specs that carry none. */
    relax: z.array(relaxStepSchema),
  }),
});

export type Config = z.infer<typeof configSchema>;
