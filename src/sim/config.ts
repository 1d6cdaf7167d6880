// The simulator's configuration: one zod schema with every default, so a JSON file, the CLI and
// tests give only what they change. Units: sim seconds for life-cycle times, wall milliseconds for
// transport effects (latency, ticks), dollars for money, requests per wall second for rate limits.
import { z } from 'zod';
import { ConfigError } from '../errors.js';

export const FAULT_PROFILES = [
  'healthy',
  'exited',
  'unknown',
  'offline',
  'stuck_loading',
  'oci_failed',
  'lost_after_running',
] as const;
export type FaultProfile = (typeof FAULT_PROFILES)[number];
export const faultProfileSchema = z.enum(FAULT_PROFILES);

/** Endpoint groups that share a token bucket per identity. */
export const RATE_GROUPS = ['create', 'show', 'change', 'destroy', 'list_v0', 'list_v1', 'search', 'secrets', 'other'] as const;
export type RateGroup = (typeof RATE_GROUPS)[number];

const rate = z.number().min(0).max(1);

export const faultConfigSchema = z.object({
  /** Share of API requests answered 500/502/503 without doing anything. */
  error_5xx_rate: rate.default(0),
  /** Extra wall milliseconds before each API request is handled. */
  latency_ms: z.number().min(0).default(0),
  /** Uniform extra 0..jitter wall milliseconds on top of latency_ms. */
  latency_jitter_ms: z.number().min(0).default(0),
  /** Share of API requests whose socket is destroyed with no answer, before anything is done. */
  drop_rate: rate.default(0),
  /** Share of creates that are performed, then answered by a destroyed socket. */
  ambiguous_create_rate: rate.default(0),
  /** Share of creates that find the offer just rented by someone else (410 no_such_ask). */
  offer_taken_rate: rate.default(0),
});
export type FaultConfig = z.output<typeof faultConfigSchema>;

const bucketSchema = z.object({
  /** Sustained requests per wall second (the service's "threshold"). */
  per_s: z.number().positive(),
  /** Bucket size in requests; default max(1, per_s). */
  burst: z.number().min(1).optional(),
});
export type BucketConfig = z.output<typeof bucketSchema>;

const group = (def: BucketConfig | null) => bucketSchema.nullable().default(def);

const rateLimitSchema = z.object({
  /** false turns every bucket off. */
  enabled: z.boolean().default(true),
  /** Answer 429 with the plain text `API requests too frequent` instead of the JSON `detail`. */
  plain_text: z.boolean().default(false),
  /** One bucket per group and identity; null turns a group off. Thresholds from the service's description. */
  groups: z
    .object({
      create: group({ per_s: 4.5 }),
      show: group({ per_s: 2 }),
      change: group({ per_s: 1 }),
      destroy: group({ per_s: 3 }),
      list_v0: group({ per_s: 1 }),
      list_v1: group({ per_s: 1 }),
      // "10 per minute": the service counts it per minute, so the bucket holds the whole minute.
      search: group({ per_s: 10 / 60, burst: 10 }),
      secrets: group({ per_s: 5 }),
      // Everything else (user, keys, templates, webhooks, ssh): unlimited unless set.
      other: group(null),
    })
    .prefault({}),
});
export type RateLimitConfig = z.output<typeof rateLimitSchema>;

const range = (min: number, max: number) =>
  z
    .object({ min: z.number().min(0), max: z.number().min(0) })
    .refine((r) => r.max >= r.min, 'max must be >= min')
    .default({ min, max });

const permissionsSchema = z.object({ api: z.record(z.string(), z.object({}).loose()) });
export type Permissions = z.output<typeof permissionsSchema>;

const keySchema = z.object({
  key: z.string().min(8),
  name: z.string().optional(),
  /** Absent: full access. */
  permissions: permissionsSchema.optional(),
});

const webhookSeedSchema = z.object({
  name: z.string().default(''),
  webhook_url: z.url(),
  event_types: z.array(z.string()).min(1),
  webhook_secret: z.string().min(8).optional(),
});

export const simConfigSchema = z.object({
  /** PRNG seed of the catalog, profiles and fault dice (options.seed overrides). */
  seed: z.number().int().default(1),
  /** Sim seconds per wall second (options.timeScale overrides). */
  time_scale: z.number().positive().default(1),
  catalog: z
    .object({
      /** Number of offers (at least 10). */
      size: z.number().int().min(10).max(20_000).default(600),
    })
    .prefault({}),
  account: z
    .object({
      user_id: z.number().int().default(424242),
      email: z.string().default('sim-user@example.com'),
      /** Starting credit in dollars; the ledger draws it down. */
      credit: z.number().default(250),
      /** `client:low_credit` fires once when credit falls below this many dollars. */
      low_credit_threshold: z.number().default(10),
    })
    .prefault({}),
  lifecycle: z
    .object({
      /** Sim seconds an instance stays `null` before `loading`. */
      provision_s: z.number().min(0).default(5),
      /** Sim seconds of `loading` before `running` (drawn per instance). */
      boot_s: range(60, 180),
      /** Sim seconds of `loading` before exited/unknown/offline profiles fail. */
      fail_after_s: z.number().min(0).default(30),
      /** Sim seconds of `running` before lost_after_running is lost (drawn per instance). */
      lost_after_s: range(120, 600),
      /** Sim seconds of `loading` after a start of a stopped instance. */
      restart_s: z.number().min(0).default(15),
    })
    .prefault({}),
  /** Share of machines given each fault profile (the rest are healthy); the sum must be <= 1. */
  profile_rates: z
    .object({
      exited: rate.default(0),
      unknown: rate.default(0),
      offline: rate.default(0),
      stuck_loading: rate.default(0),
      oci_failed: rate.default(0),
      lost_after_running: rate.default(0),
    })
    .prefault({})
    .refine((r) => Object.values(r).reduce((s, x) => s + x, 0) <= 1, 'the rates must sum to at most 1'),
  /** Forced profiles by machine id and by offer id (offer wins). */
  machine_profiles: z.record(z.string().regex(/^\d+$/), faultProfileSchema).default({}),
  offer_profiles: z.record(z.string().regex(/^\d+$/), faultProfileSchema).default({}),
  faults: faultConfigSchema.prefault({}),
  rate_limits: rateLimitSchema.prefault({}),
  /** Extra API keys besides the full-access key of the options. */
  keys: z.array(keySchema).default([]),
  /** Enables the /_sim/ admin endpoints (404 otherwise). */
  admin: z.boolean().default(false),
  /** The v0 instance list answers 410 deprecated_endpoint. */
  deprecate_v0_list: z.boolean().default(false),
  search: z
    .object({
      /** Offers returned when the query has no limit. */
      default_limit: z.number().int().positive().default(64),
      /** Largest accepted limit; larger values are clamped. */
      max_limit: z.number().int().positive().default(1000),
    })
    .prefault({}),
  onstart_exec: z
    .object({
      /** Run each instance's onstart with `sh -c` when it reaches running. */
      enabled: z.boolean().default(false),
      /** Wall seconds before the script is killed. */
      timeout_s: z.number().positive().default(30),
      /** Bytes of stdout and of stderr kept per script. */
      max_output_bytes: z.number().int().positive().default(65_536),
      /** PATH inside the "container"; the default is a stock image's, not the host's. */
      path: z.string().default('/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'),
    })
    .prefault({}),
  webhooks: z
    .object({
      /** Webhooks that exist at start (owned by the account). */
      initial: z.array(webhookSeedSchema).default([]),
      /** Wall milliseconds before a delivery is abandoned. */
      delivery_timeout_ms: z.number().int().positive().default(5000),
    })
    .prefault({}),
  /** Wall milliseconds between ticks that advance instances, run onstart and send events. */
  tick_ms: z.number().int().min(5).default(50),
});

export type SimConfigInput = z.input<typeof simConfigSchema>;
export type SimConfig = z.output<typeof simConfigSchema>;

/** Validates a partial config; throws a ConfigError naming every bad field by its path. */
export function parseSimConfig(input: unknown): SimConfig {
  const result = simConfigSchema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }));
  throw new ConfigError(
    `Invalid simulator config: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    issues[0]!.path,
  );
}
