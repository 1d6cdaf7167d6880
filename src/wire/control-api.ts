// The control API's wire contract (docs/control-api.md), the one definition the daemon answers with and
// the CLI reads: the run object, the event object, the error envelope, /healthz and the proof.
// zod schemas, from which the types are inferred, so that an OpenAPI document can be generated from
// the same source (issue #13), and tests can check every answer against them.
//
// The CLI imports only types from here (erased at build), and the run states from ./run-states.ts:
// loading zod would cost it a third of its start-up.
import { z } from 'zod';
import { RUN_ERROR_KINDS } from '../errors.js';
import { DELIVERY_STATES, NOTIFY_EVENTS } from './notify-events.js';
import { RUN_STATES } from './run-states.js';

const isoTime = z.iso.datetime();

const RunStateSchema = z.enum(RUN_STATES);

/** Why a run failed: an error code of berth's or one of the run's own limits (src/errors.ts). */
const RunErrorSchema = z.object({
  kind: z.enum(RUN_ERROR_KINDS),
  message: z.string(),
  /** `task_failed`: the task's exit code. */
  exit_code: z.number().int().optional(),
});

/** The instance a live run holds now. */
/** An SSH endpoint: `proxy` is the service's proxy (ssh_host:ssh_port), `direct` the host's own address and mapped port. */
const SshEndpointSchema = z.object({ kind: z.enum(['proxy', 'direct']), host: z.string(), port: z.number().int() });

/** How and when the instance was found ready; `after_running_s`: from the list first showing it running (the SSH wait). */
const ReadySchema = z.object({ via: z.enum(['ssh', 'status', 'callback']), at: isoTime, after_running_s: z.number().nullable() });

const RunInstanceSchema = z.object({
  id: z.number().int(),
  offer_id: z.number().int(),
  machine_id: z.number().int().nullable(),
  ssh_host: z.string().nullable(),
  ssh_port: z.number().int().nullable(),
  actual_status: z.string().nullable(),
  /** Billed $/h, disk included: the offer's until the instance is listed, then the list's own. */
  dph_total: z.number().nullable(),
  /** Where to connect: the SSH endpoints that answered (both when both did); empty until ready. */
  ssh: z.array(SshEndpointSchema),
  ready: ReadySchema.nullable(),
  /**
   * Until it is ready: when berth gives this instance up if it is not ready by then (its create +
   * the run's boot_timeout_s), and rents the next offer; null once ready, or before the create.
   */
  boot_deadline: isoTime.nullable(),
  /** A failed task's instance kept for SSH (`keeping`, keep_on_failure_s): when it is destroyed; null otherwise. */
  keep_until: isoTime.nullable(),
});

/**
 * The instance an ended run's task left warm for the next run of its spec (issue #51), while it
 * bills: `warm` until a run takes it or its idle_s passes, `released` until its destroy is confirmed.
 */
const RunWarmSchema = z.object({
  instance_id: z.number().int(),
  state: z.enum(['warm', 'released']),
  /** When it is released, and destroyed, unless a run takes it first. */
  until: isoTime,
  usd_per_hour: z.number(),
});

/** One offer tried. `outcome` is null while the attempt goes on. */
const RunAttemptSchema = z.object({
  n: z.number().int().min(1),
  offer_id: z.number().int(),
  machine_id: z.number().int().nullable(),
  instance_id: z.number().int().nullable(),
  outcome: z.string().nullable(),
  started_at: isoTime,
  ended_at: isoTime.nullable(),
  detail: z.string().nullable(),
  /** Billed $/h, disk included: the offer's until the instance was listed, then the list's own; null when never known. */
  dph_total: z.number().nullable(),
  /** The GPU model its offer rents (the offer's gpu_name); null for attempts journaled before berth kept it. */
  gpu_name: z.string().nullable(),
  /** How many of them the offer rents; null when gpu_name is. */
  num_gpus: z.number().int().nullable(),
  /** A failed attempt's last container log lines (≤ 4 KB, secrets removed); null when none were fetched. */
  logs: z.string().nullable(),
});

/** One file of a task's outputs, as kept (docs/files.md). */
const OutputFileSchema = z.object({
  /** The container path it came from. */
  path: z.string(),
  /** Where `berth outputs` puts it, relative to DEST. */
  name: z.string(),
  size: z.number().int().min(0),
  sha256: z.string(),
  /** Only its first `size` bytes came (the size cap, or the transfer was stopped). */
  partial: z.literal(true).optional(),
});

/** What one attempt's task left (issue #40): kept by the daemon on `host`, or copied to the cloud. */
const RunOutputsSchema = z.object({
  attempt: z.number().int().min(1),
  /** collecting/copying while it goes on; kept (all came), partial (some), failed (none), copied (the cloud copy finished). */
  state: z.enum(['collecting', 'kept', 'partial', 'failed', 'copying', 'copied']),
  /** The host of the daemon that keeps the files (`berth outputs` reads them through a daemon there). */
  host: z.string(),
  files: z.array(OutputFileSchema),
  bytes: z.number().int().min(0),
  /** Why partial or failed; a cloud copy's destination. */
  detail: z.string().nullable(),
  started_at: isoTime,
  ended_at: isoTime.nullable(),
});

/**
 * An ended task's outputs not all taken (issue #48): those of its last attempt that had an
 * instance. `not_taken`: no transfer was made (cancelled without them, ended before berth could);
 * `failed`: none came; `partial`: some came; `unfinished`: the transfer never ended. `cause` and
 * `fix` in words.
 */
const RunOutputsMissingSchema = z.object({
  attempt: z.number().int().min(1),
  state: z.enum(['not_taken', 'failed', 'partial', 'unfinished']),
  cause: z.string(),
  fix: z.string(),
});
export type RunOutputsMissing = z.infer<typeof RunOutputsMissingSchema>;

/** The run object: never an API key, an instance key or an env value. */
export const RunSchema = z.object({
  id: z.string(),
  name: z.string(),
  state: RunStateSchema,
  /**
   * The GPUs the run rents (those of its latest attempt whose create was sent: `RTX 4090`, or
   * `2× RTX 4090`); until it rents one, the models the spec asks for (its search.filters.gpu_name:
   * eq or in, joined by " | "); null when neither is known.
   */
  gpu: z.string().nullable(),
  /** True when `gpu` is what the run rents, false when it is what the spec asks for. */
  gpu_rented: z.boolean(),
  /** True when the spec has a task (`run`): the run ends when its task does, `running` is the task under way. */
  task: z.boolean(),
  created_at: isoTime,
  updated_at: isoTime,
  attempt: z.number().int().min(0),
  relax_level: z.number().int().min(0),
  instance: RunInstanceSchema.nullable(),
  attempts: z.array(RunAttemptSchema),
  error: RunErrorSchema.nullable(),
  /** True while the run is held after a restored backup: nothing is rented until `berth resume` (or a cancel). */
  held: z.boolean(),
  /**
   * Set while the run is live and this daemon's berth cannot read it (stored by a later berth, or
   * refused by a stricter parse): kept as it is, never failed or driven here; null otherwise.
   */
  unreadable: z
    .object({
      /** What cannot be read. */
      reason: z.string(),
      /** The stored spec version a daemon must read to drive it (stored by a later berth); null when not the cause. */
      needs_spec_version: z.number().int().nullable(),
      /** The run machine version a daemon must run to drive it; null when not the cause. */
      needs_machine_version: z.number().int().nullable(),
    })
    .nullable(),
  /** What the run cost so far, every attempt included (USD), and what it is billed now (USD/h). */
  cost: z.object({ usd: z.number(), usd_per_hour: z.number() }),
  /** A task's outputs, per attempt that took them (its spec's `outputs`); empty otherwise. */
  outputs: z.array(RunOutputsSchema),
  /** Set once a run whose spec names outputs has ended without all of them taken; null otherwise. */
  outputs_missing: RunOutputsMissingSchema.nullable(),
  /** Its instance kept warm after its task ended (warm.idle_s), while that bills; null otherwise. */
  warm: RunWarmSchema.nullable().optional(),
});

/** Spend of one instance (`berth costs`), beside the service's charges for the same days when compared. */
const InstanceCostsSchema = z.object({
  attempt: z.number().int(),
  instance_id: z.number().int().nullable(),
  usd: z.number(),
  /** The service's charges for this instance over the same days; null when not compared. */
  service_usd: z.number().nullable(),
  /** berth's figure minus the service's. */
  difference_usd: z.number().nullable(),
  /** Kept warm after the attempt's task ended (issue #51): this is the warm hold's spend, billed to the run that handed it over. */
  warm: z.boolean().optional(),
});

/** `GET /v1/costs` (`berth costs`): spend per run and per instance since 00:00 UTC of a day. */
export const CostsReportSchema = z.object({
  /** 00:00 UTC of the first day counted. */
  since: isoTime,
  until: isoTime,
  runs: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      state: z.string(),
      usd: z.number(),
      usd_per_hour: z.number(),
      instances: z.array(InstanceCostsSchema),
    }),
  ),
  /** Spend per UTC day from `since` to today, oldest first; the days add up to total_usd. */
  days: z.array(z.object({ day: z.string(), usd: z.number() })),
  total_usd: z.number(),
  total_usd_per_hour: z.number(),
  service: z.object({
    /** True when the service's charges were read and are shown beside berth's figures. */
    compared: z.boolean(),
    /** Why they are not, or how they compare. */
    note: z.string(),
    total_usd: z.number().nullable(),
  }),
});
export type CostsReport = z.infer<typeof CostsReportSchema>;

/** One offer of `POST /v1/offers` (`berth offers`), in the order a run would try them. */
const OfferRowSchema = z.object({
  /** The relax level whose search first returned it usable (0: the spec as written). */
  level: z.number().int(),
  id: z.number().int(),
  machine_id: z.number().int(),
  gpu_name: z.string(),
  num_gpus: z.number(),
  /** Each GPU's memory as the card lists it, in MB (MiB: a 16 GB Tesla T4 lists 15360; docs/job-spec.md, "GPU memory"). */
  gpu_ram: z.number(),
  /** What the instance would be billed per hour, its disk (and bid) included: the price the cap is checked on. */
  billed_usd_per_hour: z.number(),
  /** The service's quote (dph_total), for the disk searched with. */
  dph_total: z.number(),
  reliability: z.number().nullable(),
  geolocation: z.string().nullable(),
});

/** `POST /v1/offers` (`berth offers FILE`): what the run's searches would return now, relax steps included. */
export const OffersReportSchema = z.object({
  max_price_per_hour: z.number(),
  disk_gb: z.number(),
  search_type: z.string(),
  /** Every level of the relax ladder: 0 is the spec as written, level n has steps 1..n applied. */
  levels: z.array(
    z.object({
      level: z.number().int(),
      /** The relax step this level adds, in words; null at level 0. */
      step: z.string().nullable(),
      /** False for the levels past the bound on searches per request (each level is one search). */
      searched: z.boolean(),
      /** Offers the service returned. */
      returned: z.number().int(),
      /** Of them, dropped because their billed price is above max_price_per_hour (or unknown). */
      over_cap: z.number().int(),
      /** Usable offers this level adds to the levels before it. */
      added: z.number().int(),
    }),
  ),
  /** Why some levels were not searched, or null. */
  note: z.string().nullable(),
  offers: z.array(OfferRowSchema),
});
export type OffersReport = z.infer<typeof OffersReportSchema>;

/** One line of a run's event log; `count` > 1 is an event that repeated (`at` the last time, `first_at` the first). */
export const RunEventSchema = z.object({
  id: z.number().int(),
  at: isoTime,
  type: z.string(),
  message: z.string(),
  data: z.unknown(),
  count: z.number().int().min(1),
  first_at: isoTime.nullable(),
});

/** A stored event as GET /v1/events/stream sends it (the `data` of each SSE message): the event and its run. */
export const StreamEventSchema = RunEventSchema.extend({ run_id: z.string() });

/** A blob kept by POST /v1/blobs/{sha256} (a task's packed workdir). */
export const BlobSchema = z.object({ sha256: z.string(), size: z.number().int().min(0) });
export type Blob = z.infer<typeof BlobSchema>;

/**
 * A followed task's output as GET /v1/events/stream?run=ID&output=1 sends it (an `output` message,
 * without an `id:`: it is not stored as an event): the complete lines the daemon kept between byte
 * `from` and byte `to` of attempt `n`'s out-file, every secret scrubbed, each cut at 4096
 * characters; `left_out` lines before these were not sent (the run printed faster than its stream's
 * rate, or the client read slower), and are only in what GET /v1/runs/{id}/logs keeps.
 */
export const StreamOutputSchema = z.object({
  run_id: z.string(),
  n: z.number().int(),
  from: z.number().int(),
  to: z.number().int(),
  lines: z.array(z.string()),
  left_out: z.number().int(),
});
export type StreamOutput = z.infer<typeof StreamOutputSchema>;

const ERROR_KINDS = [
  'bad_request', // 400: a target, query or nonce that cannot be read
  'spec', // 400: the job spec is invalid (with `issues`)
  'unauthorized', // 401: no or wrong control token
  'forbidden', // 403: not the daemon's own Host, or a web page's Origin
  'not_found', // 404: no such route or run
  'method_not_allowed', // 405: the path exists, not with this method (with an `Allow` header)
  'idempotency_conflict', // 409: the Idempotency-Key belongs to a run of another spec (with `run_id`)
  'not_held', // 409: resume of a run that is not held
  'ambiguous_name', // 409: a run named by a name that several live runs share (with `run_ids`)
  'outputs_elsewhere', // 409: a run's outputs are kept by a daemon on another host (with `host`)
  'too_large', // 413: a body over 1 MiB (a blob: over files.workdir_max_mb)
  'unsupported_media_type', // 415: a body that is not application/json (a blob's: application/octet-stream)
  'service_error', // 502: the marketplace's answer failed a request the daemon made for it (POST /v1/offers)
  'daemon_stopping', // 503: the daemon is shutting down
  'store_unavailable', // 503: berth.db refuses writes now; retry later
  'internal', // 500: a bug; see the daemon log
] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

const SpecIssueSchema = z.object({ path: z.string(), message: z.string() });

/** Every error answer: `{"error": {"kind", "message", ...}}`. */
export const ErrorEnvelopeSchema = z.object({
  error: z.object({
    kind: z.enum(ERROR_KINDS),
    message: z.string(),
    issues: z.array(SpecIssueSchema).optional(),
    run_id: z.string().optional(),
  }),
});

export const HealthSchema = z.object({
  ok: z.literal(true),
  store_id: z.string(),
  uptime_s: z.number().int().min(0),
  live_runs: z.number().int().min(0),
  active_runs: z.number().int().min(0),
  /** False until the runs have resumed after a start. */
  ready: z.boolean(),
  held_runs: z.number().int().min(0),
  /** With a Postgres store shared by several daemons: this daemon's part. */
  cluster: z
    .object({
      daemon_id: z.string(),
      /** This daemon does the account-wide duties now. */
      leader: z.boolean(),
      /** Live runs whose lease this daemon holds. */
      owned_runs: z.number().int().min(0),
      /** Daemons sharing the store, this one included. */
      daemons: z.number().int().min(0),
    })
    .optional(),
});

export const ProofSchema = z.object({ proof: z.string() });

/** GET /v1/account: the account and the daemon's money as they stand (the dashboard's Account and Money pages). */
export const AccountViewSchema = z.object({
  credit: z.object({
    /** The last credit read (users/current), $; null until one was read. */
    usd: z.number().nullable(),
    /** account.min_credit_usd: below it no create starts. */
    min_usd: z.number(),
    low: z.boolean(),
  }),
  money: z.object({
    /** What the live instances of berth's runs bill now, $/h. */
    usd_per_hour: z.number(),
    /** What those instances cost in the last 24 h, $. */
    usd_last_24h: z.number(),
    max_usd_per_hour: z.number().nullable(),
    max_usd_per_day: z.number().nullable(),
  }),
  /** Per endpoint group of the service's API: the configured rate, and the 429 answers and pauses since the daemon started. */
  rate_limits: z.array(
    z.object({
      group: z.string(),
      per_s: z.number(),
      rate_limited: z.number().int(),
      pauses: z.number().int(),
      paused: z.boolean(),
      paused_ms: z.number(),
    }),
  ),
});
export type AccountView = z.infer<typeof AccountViewSchema>;

/** GET /v1/account/checks: `berth doctor`'s checks, made by the daemon with its own key. */
export const AccountChecksSchema = z.object({
  ok: z.boolean(),
  checks: z.array(z.object({ name: z.string(), ok: z.boolean(), message: z.string() })),
  /** Permission categories the key lacks. */
  missing: z.array(z.string()),
});
export type AccountChecks = z.infer<typeof AccountChecksSchema>;

/** POST /v1/ui/codes (`berth ui`): a one-time sign-in code of the dashboard and the URL that uses it. */
export const SignInCodeSchema = z.object({ url: z.string(), expires_at: isoTime });
export type SignInCode = z.infer<typeof SignInCodeSchema>;

/** GET /v1/ui/session: what the dashboard page needs of its session (never the control token). */
export const UiSessionSchema = z.object({
  /** Sent back in X-CSRF-Token with every state-changing request. */
  csrf_token: z.string(),
  expires_at: isoTime,
});
export type UiSession = z.infer<typeof UiSessionSchema>;
export const RotatedSchema = z.object({ rotated: z.literal(true) });

/**
 * One delivery of a notification to one target (`berth notifications`). The target is shown as its
 * origin and its place in the config's `notify` list: a webhook URL's path is often its secret.
 */
export const NotificationSchema = z.object({
  /** The outbox row. */
  seq: z.number().int(),
  /** The notification's id, the same in every delivery of it: receivers dedupe by it. */
  id: z.string(),
  type: z.enum(NOTIFY_EVENTS),
  run_id: z.string(),
  /** Index in the config's `notify` list, and the URL's origin. */
  target: z.number().int().min(0),
  target_origin: z.string(),
  state: z.enum(DELIVERY_STATES),
  /** POSTs made so far. */
  attempts: z.number().int().min(0),
  created_at: isoTime,
  /** When the next POST goes (pending), or null. */
  next_at: isoTime.nullable(),
  delivered_at: isoTime.nullable(),
  /** Why the last POST failed (an HTTP status or a network error), or null. */
  last_error: z.string().nullable(),
});

/**
 * The JSON body POSTed to a notify target (format "json"). `id` is the same in every delivery of one
 * notification (retries, and other targets): receivers dedupe by it. `log_id` is the run's event-log
 * row it tells of (GET /v1/runs/{id}/events).
 */
export const NotificationBodySchema = z.object({
  id: z.string(),
  type: z.enum(NOTIFY_EVENTS),
  at: isoTime,
  run: z.object({ id: z.string(), name: z.string(), state: RunStateSchema }),
  message: z.string(),
  data: z.unknown(),
  log_id: z.number().int().nullable(),
});

/**
 * The optional JSON body of POST /v1/runs/{id}/cancel. `no_outputs`: destroy at once, without taking
 * a task's outputs first (issue #48); a second cancel of the same run does the same.
 */
export const CancelBodySchema = z.object({ no_outputs: z.boolean().optional() }).strict();
export type CancelBody = z.infer<typeof CancelBodySchema>;

export const RunListSchema = z.array(RunSchema);
export const RunEventListSchema = z.array(RunEventSchema);

/** A run's container log (`GET /v1/runs/{id}/logs`): live from its instance, or the lines kept with its last attempt. */
export const RunLogsSchema = z.object({
  run_id: z.string(),
  instance_id: z.number().int().nullable(),
  source: z.enum(['live', 'kept']),
  /** The log's last lines, every secret scrubbed; terminal escapes are the printer's to neutralise. */
  text: z.string(),
  /** Earlier lines were left out: the log was longer than what was read (1 MiB live, 4 KB kept) or than `tail`. */
  cut: z.boolean(),
  /**
   * Set while this daemon streams the task over SSH: the attempt and the byte of its out-file after
   * `text`; the run's event stream with `output=1` sends what follows it. Null otherwise (read again to follow).
   */
  stream: z.object({ n: z.number().int(), offset: z.number().int() }).nullable(),
});
export type RunLogs = z.infer<typeof RunLogsSchema>;
export const NotificationListSchema = z.array(NotificationSchema);

export type Run = z.infer<typeof RunSchema>;
export type RunInstance = z.infer<typeof RunInstanceSchema>;
export type RunAttempt = z.infer<typeof RunAttemptSchema>;
export type RunOutputs = z.infer<typeof RunOutputsSchema>;
export type RunEvent = z.infer<typeof RunEventSchema>;
export type Health = z.infer<typeof HealthSchema>;
export type StreamEvent = z.infer<typeof StreamEventSchema>;
export type Notification = z.infer<typeof NotificationSchema>;
export type NotificationBody = z.infer<typeof NotificationBodySchema>;

/** Runs per page of GET /v1/runs (default and most). */
export const RUNS_PAGE = { default: 1000, max: 10_000 } as const;
/** Events per page of GET /v1/runs/{id}/events; `berth events` pages with `after`. */
export const EVENTS_PAGE_MAX = 10_000;
/** Deliveries per page of GET /v1/notifications (default and most). */
export const NOTIFICATIONS_PAGE = { default: 1000, max: 10_000 } as const;
