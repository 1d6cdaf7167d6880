// The configuration's schema: every field with its unit and default (defaults live in
// config/default.json; this schema checks whatever the merge produced).
import { z } from 'zod';
import { NOTIFY_EVENTS } from '../wire/notify-events.js';
import { isPgUrl, pgUrlProblem } from '../store/store-url.js';

// Every duration has a documented maximum. Timers past setTimeout's limit (2^31-1 ms, 24.8 days)
// fire at once, and a deadline past the Date range is not a time at all, so each bound is far
// below both; the clock (src/clock.ts) chains waits longer than the timer limit.
const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Longest deadline or boot timeout a run may have, seconds (365 days). */
export const MAX_RUN_DURATION_S = 365 * DAY;

const seconds = (max: number) => z.number().nonnegative().max(max);
const positiveSeconds = (max: number) => z.number().positive().max(max);

/** A port number, 0 (pick a free one) to 65535. */
const port = (text: string) => Number(text) <= 65535;

/** Names that would reach an object's prototype instead of being a key of their own. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
const notReserved = (k: string) => !RESERVED_KEYS.has(k);
const RESERVED_MESSAGE = 'is a reserved name (__proto__, constructor, prototype), not a field';

const relaxStepSchema = z
  .strictObject({
    /** Filter names to remove. */
    drop: z.array(z.string().min(1).refine(notReserved, RESERVED_MESSAGE)).optional(),
    /** Filters to replace, in the service's query language `{field: {op: value}}`. */
    set: z
      .record(z.string().refine(notReserved, RESERVED_MESSAGE), z.record(z.string().refine(notReserved, RESERVED_MESSAGE), z.unknown()))
      .optional(),
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
  /** Shortest pause after a 429 on this group, seconds (the service's `penalty`; create: 12); default none. */
  penalty_s: z.number().nonnegative().optional(),
});

/**
 * The client's endpoint groups, one token bucket each. `destroy_bulk` is the official client's bulk
 * destroy (`DELETE /instances/` with `instance_ids`, vast-cli `vastai/api/instances.py`), used when
 * single destroys would wait (src/client/bulk-destroy.ts). `recycle` is recycle_instance.yaml's
 * endpoint (1.0), `update` the update_template one (the preview spec: 2 s between calls).
 */
export const RATE_GROUPS = [
  'search',
  'create',
  'list',
  'show',
  'change',
  'bid',
  'destroy',
  'destroy_bulk',
  'recycle',
  'update',
  'other',
] as const;
export type RateGroup = (typeof RATE_GROUPS)[number];

/** One receiver of run notifications (docs/notifications.md). */
const notifyTargetSchema = z.strictObject({
  /** Where the notifications are POSTed, http:// or https://. */
  url: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// address' })
    // undici sends no userinfo: a receiver wanting it would answer 401 forever with no hint why.
    .refine((u) => {
      const { username, password } = new URL(u);
      return !username && !password;
    }, 'must not hold a user name or password (put a secret in secret_env)'),
  /** The run events sent there (default every one). */
  events: z.array(z.enum(NOTIFY_EVENTS)).min(1).optional(),
  /** The environment variable holding the HMAC-SHA256 key of the Berth-Signature header (none: unsigned). */
  secret_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable')
    .optional(),
  /** `json` (berth's body, default) or `slack` (a Slack-compatible `{text}` body). */
  format: z.enum(['json', 'slack']).default('json'),
});

export type NotifyTargetConfig = z.infer<typeof notifyTargetSchema>;

export const configSchema = z.strictObject({
  service: z.strictObject({
    /** Base address of the marketplace, http:// or https:// (default https://console.vast.ai). */
    base_url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// address' }),
    /** Per-request timeout for headers and body, seconds (default 30, at most 3600). */
    timeout_s: positiveSeconds(HOUR),
    /** TCP connect timeout, seconds (default 10, at most 3600). */
    connect_timeout_s: positiveSeconds(HOUR),
    /** File holding the API key (used when BERTH_API_KEY is not set). */
    api_key_file: z.string().optional(),
  }),
  daemon: z.strictObject({
    /** Control API address, loopback only (default 127.0.0.1:7777; port 0 picks a free one). */
    listen: z
      .string()
      .regex(/^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):\d{1,5}$/, 'must be a loopback HOST:PORT')
      .refine((hp) => port(hp.slice(hp.lastIndexOf(':') + 1)), 'the port must be 0 to 65535'),
    /** Runs driven at once; the rest wait in `queued` (default 1000). */
    max_active_runs: z.number().int().positive(),
  }),
  polling: z.strictObject({
    /** One instance-list call per interval for all runs, seconds (default 10, as the seed recommends; at most 3600). */
    interval_s: positiveSeconds(HOUR),
  }),
  rate_limits: z.strictObject(
    Object.fromEntries(RATE_GROUPS.map((g) => [g, rateGroupSchema])) as Record<RateGroup, typeof rateGroupSchema>,
  ),
  retry: z.strictObject({
    /** Give up retrying one call after this long, seconds (default 60, at most 86400). */
    max_retry_time_s: positiveSeconds(DAY),
    /** First retry delay, seconds (default 0.5, at most 3600). */
    min_delay_s: positiveSeconds(HOUR),
    /** Longest retry delay, seconds (default 15, at most 3600). */
    max_delay_s: positiveSeconds(HOUR),
    /** Growth of the delay between tries (default 2). */
    factor: z.number().min(1),
  }),
  runs: z.strictObject({
    /** Offers tried per run before it fails (default 8). */
    max_attempts: z.number().int().positive(),
    /** Time an instance may stay loading before it is replaced, seconds (default 600, at most 365 days). */
    boot_timeout_s: positiveSeconds(MAX_RUN_DURATION_S),
    /** Time from submission after which an unfinished run fails, seconds (default 7200, at most 365 days). */
    deadline_s: positiveSeconds(MAX_RUN_DURATION_S),
    /** Longest wait between retries of a failed destroy, seconds (default 60, at most 3600). */
    destroy_retry_max_delay_s: positiveSeconds(HOUR),
    /** Wait after a service outage (retries exhausted) before the step is tried again, seconds (default 30, at most 3600). */
    outage_backoff_s: positiveSeconds(HOUR),
    /** Offers of one search that may turn out gone before the run searches again (default 3, at most 100). */
    gone_offers_per_search: z.number().int().positive().max(100),
    /** How long a machine that failed any run is tried last by the daemon's other runs, seconds (default 900, at most 30 days). */
    machine_quarantine_s: seconds(30 * DAY),
    /** Default relax ladder for specs that carry none. */
    relax: z.array(relaxStepSchema),
    /** Default max_runtime_s for specs that leave it out: total seconds `running` before the run expires (default none, at most 365 days). */
    max_runtime_s: positiveSeconds(MAX_RUN_DURATION_S).nullish(),
    /**
     * How long one offer search serves the daemon's runs that make the same query, seconds (default
     * 30, at most 600); 0: every run searches for itself (the switch the bench compares against).
     */
    search_share_s: seconds(600),
    /** How long an outbid instance may stay stopped after its bid was raised before it is raised again, seconds (default 30, at most 3600). */
    rebid_wait_s: positiveSeconds(HOUR),
    /** How long before an idle instance is destroyed (idle_timeout_s) the idle.warning is given, seconds (default 300, at most 1 day). */
    idle_warning_s: seconds(DAY).default(300),
    /**
     * How often a running task's log is read for its end marker when its image could not stop its
     * instance (no curl or wget, no way to the service), seconds (default null: two poll intervals;
     * at most 1 day). Spaced further with many tasks: the reads take at most half the `other` group.
     */
    task_probe_interval_s: positiveSeconds(DAY).nullish(),
    /**
     * How many running tasks this daemon follows over SSH at once, their output streamed and their
     * end seen from the container (default null: 200; at most 10 000; 0: none). Above it, tasks are read
     * through the logs endpoint as without SSH. Each followed task holds one SSH connection.
     */
    task_follow_max: z.number().int().min(0).max(10_000).nullish(),
  }),
  readiness: z.strictObject({
    /**
     * How long an instance the service lists as running may leave its SSH endpoints silent (no
     * `SSH-2.0-` banner) before it is replaced as `unreachable`, seconds (default 180). It fits
     * within the run's boot timeout: the wait ends at the boot deadline at the latest (the boot
     * timeout counts from the create to a reachable instance), also `unreachable`. Once the banner
     * answers, berth's login (a command run) is tried until the same deadline; without one by then
     * the instance is ready by its banner (docs/ssh.md).
     */
    ssh_timeout_s: positiveSeconds(MAX_RUN_DURATION_S),
    /**
     * The address at which instances reach the daemon's readiness callback listener (for example a
     * tunnel to `callback_listen`), http:// or https://. When set, each instance's onstart ends with
     * one line that posts a per-attempt token there; default none (no callback).
     */
    callback_url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// address' }).optional(),
    /**
     * Where the callback listener binds, HOST:PORT (default 127.0.0.1:7778). Not loopback-only: it
     * takes nothing but attempt tokens, so it may face the instances (or a tunnel's local end).
     */
    callback_listen: z
      .string()
      .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be HOST:PORT')
      .refine((hp) => port(hp.slice(hp.lastIndexOf(':') + 1)), 'the port must be 0 to 65535'),
  }),
  ssh: z
    .strictObject({
      /**
       * The private key berth logs in to its instances with (docs/ssh.md): not encrypted, readable by
       * its owner only; `~/` is the user's home. Default none: berth's own ed25519 pair in
       * BERTH_HOME/ssh/id_ed25519, made on first need.
       */
      private_key_path: z.string().min(1, 'must be the path of a private key file').nullish(),
    })
    .prefault({}),
  /** A task's files (issue #40, docs/files.md): its workdir uploaded before it starts, its outputs downloaded when it ends. */
  files: z
    .strictObject({
      /** Largest workdir `berth submit` packs, MiB (2^20 bytes, as outputs_max_mb; its files after the ignore rules) (default 100, at most 10240). */
      workdir_max_mb: z.number().positive().max(10_240).default(100),
      /** Seconds a task's wrapper waits for its workdir before its attempt fails over (default 600, at most 1 day). */
      upload_timeout_s: positiveSeconds(DAY).default(600),
      /** Where the outputs of runs are kept, one folder per run and attempt (default none: BERTH_HOME/outputs). */
      outputs_dir: z.string().min(1, 'must be a directory path').nullish(),
      /** Most MiB (2^20 bytes, as workdir_max_mb) of outputs downloaded per attempt; past it the download stops and what came is kept, marked partial (default 1024). */
      outputs_max_mb: z.number().positive().max(1_048_576).default(1024),
      /** Most seconds an instance is held after its task ended to take its outputs (GPU time, billed), then it is destroyed (default 600, at most 1 day). */
      outputs_timeout_s: positiveSeconds(DAY).default(600),
      // An instance its task stopped before its outputs were taken, that cannot be started again: kept stopped this long (issue #48).
      stopped_keep_s: positiveSeconds(DAY).default(1800),
    })
    .prefault({}),
  budget: z
    .strictObject({
      /** Daemon-wide cap on the billed $/h of every live instance plus the creates in flight; a create that would pass it waits (default none). */
      max_usd_per_hour: z.number().positive().nullish(),
      /** Daemon-wide cap on what the instances of berth's runs cost in the last 24 h, $; a create waits while it is reached (default none). */
      max_usd_per_day: z.number().positive().nullish(),
    })
    .prefault({}),
  account: z
    .strictObject({
      /** No create starts while the account's credit is below this, $ (default 1; 0 pauses only on a negative credit). */
      min_credit_usd: z.number().min(0).default(1),
      /** Seconds between reads of the account's credit (users/current) (default 300, at most 1 day; the calls are paced by rate_limits.other). */
      check_interval_s: positiveSeconds(DAY).default(300),
      /** Seconds between reads of the credit while a create waits for it, so a top-up resumes runs soon (default 30, at most 1 day; never slower than check_interval_s). */
      held_check_interval_s: positiveSeconds(DAY).default(30),
    })
    .prefault({}),
  price_increases: z
    .strictObject({
      /** How a host's price increase on a run's instance is answered: "reject" (default) every one, or "accept_within_cap" those that keep the instance within the run's max_price_per_hour and the daemon within budget.max_usd_per_hour (the rest rejected). */
      policy: z.enum(['reject', 'accept_within_cap']).default('reject'),
      /** Seconds between reads of the pending price increases while runs hold instances (default 300, at most 1 day; rate group other). */
      check_interval_s: positiveSeconds(DAY).default(300),
    })
    .prefault({}),
  webhooks: z
    .strictObject({
      /**
       * HOST:PORT of the listener for the service's signed webhooks (default none: off). The service
       * delivers only to public HTTPS, so this sits behind a TLS-terminating proxy or tunnel.
       */
      listen: z
        .string()
        .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'must be HOST:PORT')
        .refine((hp) => port(hp.slice(hp.lastIndexOf(':') + 1)), 'the port must be 0 to 65535')
        .nullish(),
      /** File holding the webhook's signing secret (used when BERTH_WEBHOOK_SECRET is not set). */
      secret_file: z.string().optional(),
      /** A delivery whose X-Vast-Timestamp is further than this from now is refused, seconds (default 300, as the service's own example). */
      tolerance_s: z.number().positive().max(DAY).default(300),
    })
    .prefault({}),
  store: z.strictObject({
    /**
     * Where the store lives (default none: berth.db in BERTH_HOME; BERTH_STORE_URL overrides): a
     * path is a SQLite file, postgres://USER:PASSWORD@HOST:PORT/DATABASE a Postgres database. Its
     * password is never shown.
     */
    url: z
      .string()
      .min(1, 'must be a path or a postgres:// URL')
      .superRefine((url, ctx) => {
        // The message never repeats the URL: it may hold a password.
        const problem = isPgUrl(url) ? pgUrlProblem(url) : null;
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .nullish(),
    /** Days an ended run, and any event, is kept before it is deleted (default 30, at least 1). */
    retention_days: z.number().min(1).max(36500),
    /**
     * Store ids (8 hex digits) of earlier stores whose instances this daemon destroys as orphans:
     * for a BERTH_HOME that was lost with its store.json (default none).
     */
    sweep_store_ids: z.array(z.string().regex(/^[0-9a-f]{8}$/, 'a store id is 8 hex digits')).default([]),
  }),
  /**
   * Several daemons on one Postgres store (docs/several-daemons.md). Unused with a SQLite store,
   * which one daemon holds alone.
   */
  cluster: z.strictObject({
    /**
     * How long a daemon's hold on its runs (its leases) lasts unless renewed, seconds (default 15,
     * 3 to 600). Renewed every third of it; a daemon that cannot renew stops acting for its runs
     * before it ends, and the other daemons take them over once it has: the longest a dead
     * daemon's runs go unwatched is this plus one poll interval.
     */
    lease_s: z.number().min(3).max(600),
  }),
  /** Receivers of run notifications (default none). */
  // One target per URL: the outbox keeps each notification under its target's URL.
  notify: z
    .array(notifyTargetSchema)
    .default([])
    .superRefine((targets, ctx) => {
      const seen = new Set<string>();
      targets.forEach((t, i) => {
        const href = new URL(t.url).href;
        if (seen.has(href))
          ctx.addIssue({ code: 'custom', path: [i, 'url'], message: 'names the same receiver as an earlier target: one target per URL' });
        seen.add(href);
      });
    }),
  notifications: z.strictObject({
    /** Time one POST may take before it counts as failed, seconds (default 10, at most 300). */
    timeout_s: positiveSeconds(5 * MINUTE),
    /** How long a notification is retried, with backoff, before it is dead, seconds (default 86400: 24 h; at most 30 days). */
    retry_for_s: positiveSeconds(30 * DAY),
    /** Longest wait between two tries, seconds (default 3600, at most 86400). */
    max_delay_s: positiveSeconds(DAY),
    /** POSTs in flight at once per target (default 4). */
    max_concurrent: z.number().int().positive().max(64),
  }),
});

export type Config = z.infer<typeof configSchema>;
