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
  // Healthy life, but SSH (with ssh_listeners on) misbehaves: nothing listens (connections refused),
  // connections are closed without a banner, held without a byte, or the banner comes only
  // `ssh_listeners.late_s` sim seconds after running. Appended last so that seeds keep their draws.
  'ssh_refused',
  'ssh_no_banner',
  'ssh_hang',
  'ssh_late',
  // Healthy life, but the host reports no gpu_util (null in its record): idle autostop must read
  // that as unknown, never as idle. Appended last so that seeds keep their draws.
  'no_gpu_util',
  // Healthy life, but its sshd answers (banner, key exchange) before the container's keys are in
  // place: every key refused until `ssh_listeners.late_s` sim seconds after running. Appended last
  // so that seeds keep their draws.
  'ssh_keys_late',
] as const;
export type FaultProfile = (typeof FAULT_PROFILES)[number];
export const faultProfileSchema = z.enum(FAULT_PROFILES);

/**
 * Profiles that act when a create reaches the offer, before any instance exists:
 * `not_your_own` answers the documented 403 (error 403/3586), `unavailable` is an offer whose GPUs
 * cannot start now (410 with cancel_unavail, else an instance created stopped).
 */
const OFFER_FAULTS = ['not_your_own', 'unavailable'] as const;
export type OfferFault = (typeof OFFER_FAULTS)[number];
export const offerFaultSchema = z.enum(OFFER_FAULTS);

/**
 * Rate-limit groups: one threshold each, from the `x-rate-limit` of the endpoint's yaml (see
 * docs/simulator.md). Every endpoint (method and path template) keeps its own limiter per identity,
 * so two endpoints of one group never share a budget.
 */
export type RateGroup =
  | 'search'
  | 'create'
  | 'list_v0'
  | 'list_v1'
  | 'show'
  | 'change'
  | 'reboot'
  | 'recycle'
  | 'update_template'
  | 'change_bid'
  | 'destroy'
  | 'destroy_bulk'
  | 'secrets'
  | 'secrets_write'
  | 'ssh_keys'
  | 'instance_ssh'
  | 'instance_ssh_detach'
  | 'api_keys'
  | 'api_keys_write'
  | 'templates'
  | 'templates_write'
  | 'user'
  | 'webhooks'
  | 'gpu_names'
  | 'charges'
  | 'logs'
  | 'cloud_connections'
  | 'cloud_copy';

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
  /** Share of stop/start/label/reboot/destroy calls answered 200 `{success: false, ...}`, doing nothing. */
  unsuccessful_200_rate: rate.default(0),
  /**
   * A start of a stopped instance (manage_instance `{"state": "running"}`) is answered 200
   * `{success: true, msg: "... queued ..."}` and the instance stays stopped (its machine has no free
   * GPU now): the strictest reading of a start that cannot happen yet (issue #48).
   */
  start_stays_queued: z.boolean().default(false),
  /** Share of instance lists (v0, and each v1 page) answered with `instances: null`. */
  null_instances_rate: rate.default(0),
  /** A bad key gets 404 `auth_error` on every endpoint, as users report, instead of 401 (search always does). */
  bad_key_404_everywhere: z.boolean().default(false),
  /**
   * The first record of every search, instance list (v0, each v1 page) and show answer is malformed,
   * as a careless server might send it: `number_as_string` sends a number as a string (`dph_total`
   * "0.5" of an offer or an instance), `missing_field` leaves required fields out (an offer's
   * `dph_total` and `gpu_ram`, an instance's `id`). The other records are as usual.
   */
  malformed_record: z.enum(['none', 'number_as_string', 'missing_field']).default('none'),
  /**
   * Sim seconds of running (counted from each transition to running) after which the service stops
   * the instance as it does when the account's credit runs out (guides/reference/billing.mdx: "Your
   * instances are stopped automatically"): intended and actual `stopped`, its container killed,
   * only its disk billed. null (default): never.
   */
  service_stop_after_s: z.number().min(0).nullable().default(null),
  /**
   * Every instance's sshd (ssh_listeners on) refuses every key, as if its authorized_keys were lost:
   * logins fail with "Permission denied (publickey)" while the banner still answers.
   */
  ssh_refuse_keys: z.boolean().default(false),
  /** Wall milliseconds after its login that every SSH connection is cut (a dropped session); null: never. */
  ssh_drop_after_ms: z.number().int().positive().nullable().default(null),
  /**
   * Share of cloud copies (cloud-copies.ts) that fail halfway: the first half of the bytes is
   * written (a file cut where the half falls), then the status bar says the copy failed.
   */
  cloud_copy_fail_rate: rate.default(0),
  /**
   * Statuses a new instance shows after provisioning and before it loads, in order, each for `s` sim
   * seconds: the service's answers berth's lists may meet early in a healthy boot (issue #49).
   * `stopped` (intended still `running`) is the early blip a third party reports (inference-plane's
   * vast notes); `frozen`, `restarting`, `recycling` or a value nobody knew are what SkyPilot's vast
   * provisioner meets (service-facts "Added 2026-12-01"); `null` is the contract being made. Never
   * `running`. Default none.
   */
  boot_detour: z
    .array(
      z.object({
        status: z
          .string()
          .regex(/^[a-z_]{1,32}$/, 'a status word')
          .refine((v) => v !== 'running', 'not running: the detour comes before the instance runs')
          .nullable(),
        s: z.number().positive(),
      }),
    )
    .default([]),
  /** Share of creates whose instance takes `boot_detour` (1: every one while it is set). */
  boot_detour_rate: rate.default(1),
  /**
   * Share of creates on whose offer another account's create lands at the same moment: both are
   * accepted (SkyPilot PR #9117, 2026-03: "it accepts both and attempts to launch both") and this
   * one loses: it never fully starts and its create is answered as usual. The offer stays rented by
   * the other account.
   */
  double_buy_rate: rate.default(0),
  /**
   * What the loser shows: `port_error`, loading then `created` with docker's port-bind error in
   * `status_msg` (#9117: the Docker daemon "attempts to bind the same port multiple times");
   * `silent`, loading for ever (#9117: "fail to fully start").
   */
  double_buy_sign: z.enum(['port_error', 'silent']).default('port_error'),
});
export type FaultConfig = z.output<typeof faultConfigSchema>;

export const limitSchema = z.object({
  /**
   * The documented threshold: requests per wall second, enforced as a minimum interval of 1/per_s
   * between two requests of one endpoint and identity. Absent: no interval.
   */
  per_s: z.number().positive().optional(),
  /** Requests allowed back to back before the interval bites; 1 (no bursts) as documented. A test knob. */
  burst: z.number().min(1).default(1),
  /** At most `requests` in any window of `window_s` wall seconds (search's "10 per minute"). */
  max_calls: z.object({ requests: z.number().int().positive(), window_s: z.number().positive() }).optional(),
  /** After a 429, every request of the endpoint and identity is refused for this many wall seconds. */
  penalty_s: z.number().min(0).default(0),
});
export type LimitConfig = z.output<typeof limitSchema>;

const group = (def: z.input<typeof limitSchema> | null) => limitSchema.nullable().default(def === null ? null : limitSchema.parse(def));

export const rateLimitSchema = z.object({
  /** false turns every limit off. */
  enabled: z.boolean().default(true),
  /** Every 429 is the plain text `API requests too frequent`, whatever the endpoint documents. */
  plain_text: z.boolean().default(false),
  /**
   * A refused request counts as a request: it restarts the interval and fills the window. The
   * stricter reading of "a minimum interval between requests"; false counts accepted ones only.
   */
  count_refused: z.boolean().default(true),
  /** One limit per group (null turns it off); thresholds from each endpoint's `x-rate-limit`. */
  groups: z
    .object({
      search: group({ max_calls: { requests: 10, window_s: 60 } }), // search_offers.yaml: 10 per minute
      create: group({ per_s: 4.5, penalty_s: 12 }), // create_instance.yaml: 4.5, penalty 12
      list_v0: group({ per_s: 1 }), // undocumented endpoint: v1's 1.0
      list_v1: group({ per_s: 1 }), // show_instances.yaml
      show: group({ per_s: 2 }), // show_instance.yaml
      change: group({ per_s: 1 }), // manage/stop/label_instance.yaml
      reboot: group({ per_s: 1 }), // reboot_instance.yaml
      recycle: group({ per_s: 1 }), // recycle_instance.yaml: 1.0 (the preview spec: 1 s between calls)
      // No yaml; the preview spec (vast-ai/docs auto_put_api_v0_instances_update_template_id_5f7bad.yaml)
      // gives x-rateLimit 2, read as seconds between calls (service-facts.md "Limits (preview..."), the
      // stricter reading: one call in 2 s.
      update_template: group({ per_s: 0.5 }),
      change_bid: group({ per_s: 5.5 }), // change_bid.yaml
      destroy: group({ per_s: 3 }), // destroy_instance.yaml
      destroy_bulk: group({ per_s: 1 }), // DELETE /instances/ (vast-cli): undocumented, the strictest documented 1.0
      secrets: group({ per_s: 5 }), // show_env_vars.yaml
      secrets_write: group({ per_s: 3 }), // create/update/delete_env_var.yaml
      ssh_keys: group({ per_s: 1 }), // create/update_ssh_key.yaml (list and delete undocumented)
      instance_ssh: group({ per_s: 1 }), // attach_ssh.yaml, show_instance_ssh_keys.yaml: none documented, 1.0
      instance_ssh_detach: group({ per_s: 2 }), // detach_ssh.yaml: 2.0
      api_keys: group({ per_s: 1 }), // show_api_keys.yaml
      api_keys_write: group({ per_s: 2 }), // create/delete_api_key.yaml
      templates: group({ per_s: 3 }), // search_templates.yaml
      templates_write: group({ per_s: 1 }), // undocumented: the strictest documented 1.0
      user: group({ per_s: 1 }), // show_user.yaml has none: 1.0
      webhooks: group({ per_s: 1 }), // notifications.yaml has none: 1.0
      gpu_names: group({ per_s: 1 }), // undocumented: 1.0
      charges: group({ per_s: 1 }), // show_charges.yaml
      logs: group({ per_s: 1 }), // logs.yaml has none: 1.0
      cloud_connections: group({ per_s: 2.9 }), // show_connections.yaml: 2.9
      cloud_copy: group({ per_s: 1 }), // cloud_copy.yaml, cancel_sync.yaml have none: 1.0
    })
    .prefault({}),
});
export type RateLimitConfig = z.output<typeof rateLimitSchema>;

const range = (min: number, max: number) =>
  z
    .object({ min: z.number().min(0), max: z.number().min(0) })
    .refine((r) => r.max >= r.min, 'max must be >= min')
    .default({ min, max });

/** A machine's market: its minimum bid changes by `raise_pct` at `at_s`, and every `every_s` after if given. */
const marketSchema = z.object({
  /** Sim seconds after start of the first change. */
  at_s: z.number().min(0).default(0),
  /** Percent each change moves the minimum bid by; negative lowers it (paused bids then resume). */
  raise_pct: z.number().gt(-100),
  /** Sim seconds between changes (at least 1); absent: one change at at_s. */
  every_s: z.number().min(1).optional(),
});

/** Instance logs' uploads (log-uploads.ts); changeable at run time (`PUT /_sim/logs`). */
export const logsConfigSchema = z.object({
  /** Sim seconds after a logs request before its URL serves the text (403 AccessDenied until then, as measured). */
  upload_delay_s: z.number().min(0).default(2),
  /** Sim seconds after a logs request before its URL expires (403). */
  url_ttl_s: z.number().positive().default(3600),
});
export type LogsConfig = z.output<typeof logsConfigSchema>;

const permissionsSchema = z.object({ api: z.record(z.string(), z.object({}).loose()) });
export type Permissions = z.output<typeof permissionsSchema>;

const keySchema = z.object({
  key: z.string().min(8),
  name: z.string().optional(),
  /** Absent: full access. */
  permissions: permissionsSchema.optional(),
});

/** A cloud connection of the account (show_connections.yaml: `id`, `name`, `cloud_type`). */
const cloudConnectionSchema = z.object({
  /** Default: 1001, 1002, ... in the order given (vast.py's `cloud copy` example shows ids like 1001). */
  id: z.number().int().positive().optional(),
  name: z.string().min(1),
  /** e.g. `s3`, `drive`, `b2`, `dropbox`, `hf` (vast-cli `vastai/api/storage.py` `cloud_copy`'s docstring). */
  cloud_type: z.string().min(1).default('s3'),
  /** The local folder that stands for the bucket: copies land in it (it must exist). */
  dir: z.string().min(1),
});

const webhookSeedSchema = z.object({
  name: z.string().default(''),
  webhook_url: z.url(),
  event_types: z.array(z.string()).min(1),
  webhook_secret: z.string().min(8).optional(),
});

/**
 * Ways of the real service that berth must survive, each seen in real answers (issue #30). The
 * record quirks (padded strings, -1 for unknown figures) are on by default, as the evidence shows the
 * service (issue #37, item 7); `padded_strings: false, unknown_as_minus_one: false` is the opt-in
 * for idealized records. Wire only: the world is untouched.
 */
const quirksSchema = z.object({
  /**
   * Every string of every instance record (list, v1 list, show) is sent padded, `"127.0.0.1\n"`,
   * `"running "` (show_instance.yaml's own `local_ipaddrs: "10.2.202.31 172.17.0.1 \n"`; the
   * official CLI strips them all).
   */
  padded_strings: z.boolean().default(true),
  /**
   * Unknown figures of instance records are sent as -1 instead of null (`gpu_util`, `disk_util`,
   * `disk_usage`; `direct_port_start/end` are -1 without direct ports whatever this says), as the
   * docs do (show_instances.yaml) and as the official CLI reads `gpu_util` (shown only when >= 0).
   */
  unknown_as_minus_one: z.boolean().default(true),
  /**
   * A create with a bid (`price` set) answers 200 `{"success": false, "new_contract": N,
   * "instance_api_key"}`, as the service answers while a bid is pending; the instance exists and bills.
   */
  pending_bid_create: z.boolean().default(false),
  /** A bad key's 404 is `{"msg": "Invalid user key"}` alone, as search_offers.yaml documents it (no `error`). */
  bad_key_msg_only: z.boolean().default(false),
  /**
   * `env` of an update_template takes effect at the next recycle. Unverified: the preview spec lists
   * no `env` (only the official client sends it, vast-cli `update_instance`), so by default the
   * simulator accepts and checks it but the container keeps its env: a client must not rely on it.
   */
  update_env_applies: z.boolean().default(false),
  /**
   * The status of a recycle refused (the instance or its container missing, or stopped): 200
   * `{success: false, error: "invalid_id"}` as the preview spec (from the server's code) says, or 400
   * as recycle_instance.yaml documents. The 200 is the default: a client reading the status alone
   * takes it for a recycle.
   */
  recycle_refused_status: z.union([z.literal(200), z.literal(400)]).default(200),
  /**
   * A recycled container keeps its sshd host key. false (default): it gets a new one, as a new
   * container's sshd makes its keys (the strict reading: nothing of the old container stays).
   */
  recycle_keeps_host_key: z.boolean().default(false),
});
export type QuirksConfig = z.output<typeof quirksSchema>;

const simConfigSchema = z.object({
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
      /**
       * OpenSSH public keys registered on the account at start (`users/current`'s `ssh_key` is the
       * newest, '' with none). Default none: a client must notice that VMs cannot be reached.
       */
      ssh_keys: z.array(z.string().regex(/^(ssh-|ecdsa-|sk-)\S+ \S+/, 'an OpenSSH public key')).default([]),
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
      /** Sim seconds in `rebooting` before a rebooted instance starts loading again. */
      reboot_s: z.number().min(0).default(10),
      /**
       * Sim seconds in `recycling` (recycle_instance.yaml: docker stop and remove on the host) before
       * the recreated container starts loading (its image pulled as for a create).
       */
      recycle_s: z.number().min(0).default(10),
      /**
       * Extra sim seconds of `loading` when a machine pulls an image for the first time (no instance
       * on that machine reached running with that image before): users see a first launch of a big
       * image take minutes (service-facts.md, "Startup time"). 0 (default): no extra.
       */
      first_pull_s: z.number().min(0).default(0),
      /**
       * Sim seconds of `loading` when the machine already pulled the image (a create or a recycle
       * after an instance of that image ran there). null (default): no cache, every container
       * creation loads for the instance's drawn boot_s, as before the cache existed.
       */
      cached_boot_s: z.number().min(0).nullable().default(null),
      /**
       * Regular expressions matched against an instance's image: a match is an image its registry
       * does not have, whose pull fails on every host (`created`, docker's "manifest ... not found").
       * The default matches a tag or a name that says so, for trying it: `:no-such-tag`, `no-such-image`.
       */
      missing_images: z.array(z.string().refine(isPattern, 'a regular expression')).default([':no-such-tag$', '(^|/)no-such-image(:|$)']),
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
      ssh_refused: rate.default(0),
      ssh_no_banner: rate.default(0),
      ssh_hang: rate.default(0),
      ssh_late: rate.default(0),
      no_gpu_util: rate.default(0),
      ssh_keys_late: rate.default(0),
    })
    .prefault({})
    .refine((r) => Object.values(r).reduce((s, x) => s + x, 0) <= 1, 'the rates must sum to at most 1'),
  /** Forced profiles by machine id and by offer id (offer wins). */
  machine_profiles: z.record(z.string().regex(/^\d+$/), faultProfileSchema).default({}),
  offer_profiles: z.record(z.string().regex(/^\d+$/), faultProfileSchema).default({}),
  /** Create-time faults by offer id (see OFFER_FAULTS). */
  offer_faults: z.record(z.string().regex(/^\d+$/), offerFaultSchema).default({}),
  faults: faultConfigSchema.prefault({}),
  quirks: quirksSchema.prefault({}),
  rate_limits: rateLimitSchema.prefault({}),
  /** Extra API keys besides the full-access key of the options. */
  keys: z.array(keySchema).default([]),
  /** Enables the /_sim/ admin endpoints (404 otherwise). */
  admin: z.boolean().default(false),
  /**
   * `GET /api/v0/instances/` (undocumented; both official CLIs call it deprecated): `answers` the
   * old list, `410` deprecated_endpoint as rolled out to accounts, or a plain `404`.
   */
  v0_list: z.enum(['answers', '410', '404']).default('410'),
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
      /**
       * Run each instance's onstart with `sh -c` on this machine each time its container starts
       * (every transition to running), as an unprivileged user in the instance's directory, kept
       * across its starts until it is destroyed (onstart-runner.ts).
       */
      enabled: z.boolean().default(false),
      /** Wall seconds before a run of the script is killed. */
      timeout_s: z.number().positive().default(30),
      /** Bytes of stdout and of stderr kept per run on the history record (the first ones). */
      max_output_bytes: z.number().int().positive().default(65_536),
      /** Bytes of the combined output kept per instance for its container log: the last ones, as docker logs (8 MiB). */
      log_bytes: z
        .number()
        .int()
        .positive()
        .default(8 * 1024 * 1024),
      /** PATH inside the "container"; the default is a stock image's, not the host's. */
      path: z.string().default('/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'),
      /**
       * Regular expressions matched against an instance's image: a match runs its script with a PATH
       * without `curl` and `wget` (as nvidia/cuda:*-base-* or python:*-slim ship). Default none.
       */
      no_http_client_images: z.array(z.string().refine(isPattern, 'a regular expression')).default([]),
    })
    .prefault({}),
  ssh_listeners: z
    .object({
      /**
       * Each running instance gets real loopback TCP listeners (its SSH proxy port and, with direct
       * ports, its direct port) that send an SSH banner; records then show 127.0.0.1.
       */
      enabled: z.boolean().default(false),
      /** The identification line sent (RFC 4253), without its CR LF. */
      banner: z
        .string()
        .regex(/^SSH-2\.0-\S+/, 'an SSH-2.0- identification line')
        .default('SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10'),
      /** Sim seconds of running before an `ssh_late` instance sends its banner (an `ssh_keys_late` one takes keys). */
      late_s: z.number().min(0).default(60),
      /** Wall milliseconds a connection is held open (after the banner, or silently) before it is closed. */
      hold_ms: z.number().int().positive().default(10_000),
    })
    .prefault({}),
  bids: z
    .object({
      /** Markets by machine id: competing bidders who move its minimum bid over time. */
      markets: z.record(z.string().regex(/^\d+$/), marketSchema).default({}),
      /** A market for every other machine (each shifted by a seeded part of every_s); null: none. */
      default_market: marketSchema.nullable().default(null),
    })
    .prefault({}),
  logs: logsConfigSchema.prefault({}),
  /** Cloud connections and the service's cloud copy (cloud-copies.ts). */
  cloud: z
    .object({
      connections: z
        .array(cloudConnectionSchema)
        .default([])
        .refine(
          (cs) => new Set(cs.map((c) => c.id).filter((id) => id !== undefined)).size === cs.filter((c) => c.id !== undefined).length,
          'ids must differ',
        ),
      /**
       * Sim seconds between what a copy does and its line in the instance's status bar: vast.py's
       * `cloud copy` says "check instance status bar for progress updates (~30 seconds delayed)".
       */
      status_delay_s: z.number().min(0).default(30),
      /** Sim megabytes (10^6 bytes) per sim second a copy moves; its bytes land in one go when that time is up. */
      copy_mb_per_s: z.number().positive().default(50),
    })
    .prefault({}),
  webhooks: z
    .object({
      /** Webhooks that exist at start (owned by the account). */
      initial: z.array(webhookSeedSchema).default([]),
      /** Wall milliseconds before a delivery attempt is abandoned (documented: 10 s). */
      delivery_timeout_ms: z.number().int().positive().default(10_000),
      /** Sim seconds before each retry of a retryable failure; its length is the number of retries. */
      retry_delays_s: z.array(z.number().min(0)).default([10, 60, 300, 1800, 7200]),
      /** Webhooks per user (documented: 4). */
      max_per_user: z.number().int().positive().default(4),
    })
    .prefault({}),
  /** Wall milliseconds between ticks that advance instances, run onstart and send events. */
  tick_ms: z.number().int().min(5).default(50),
});

export type SimConfigInput = z.input<typeof simConfigSchema>;
export type SimConfig = z.output<typeof simConfigSchema>;

function isPattern(p: string): boolean {
  try {
    new RegExp(p);
    return true;
  } catch {
    return false;
  }
}

/** Validates a partial config; throws a ConfigError naming every bad field by its path. */
export function parseSimConfig(input: unknown): SimConfig {
  const result = simConfigSchema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }));
  throw new ConfigError(`Invalid simulator config: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues[0]!.path);
}
