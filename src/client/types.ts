// The marketplace as berth sees it: the records it relies on and the client interface.
// The daemon, the run actors and the tests depend on this interface, not on the HTTP client, so a
// unit test can hand the run actors a stub.
import type { RateGroup } from '../config/schema.js';
import type { ClientStats } from './events.js';

/** A rentable offer from `POST /api/v0/bundles/`. Only the fields berth relies on are typed. */
export interface Offer {
  id: number;
  machine_id: number;
  gpu_name: string;
  num_gpus: number;
  gpu_ram: number;
  dph_total: number;
  verified?: boolean | undefined;
  direct_port_count?: number | undefined;
  [field: string]: unknown;
}

/** An instance record from the list or show endpoints. */
export interface Instance {
  id: number;
  label: string | null;
  machine_id: number | null;
  actual_status: string | null;
  intended_status?: string | null | undefined;
  cur_state?: string | null | undefined;
  status_msg?: string | null | undefined;
  ssh_host?: string | null | undefined;
  ssh_port?: number | null | undefined;
  dph_total?: number | null | undefined;
  /** The host's address: with `ports["22/tcp"]`, the direct SSH endpoint. */
  public_ipaddr?: string | null | undefined;
  /** Port mappings, present only while running: `{"22/tcp": [{"HostIp", "HostPort": "40022"}]}`. */
  ports?: Record<string, Array<{ HostIp?: string | undefined; HostPort?: string | undefined }> | null> | null | undefined;
  /**
   * GPU utilisation: "as a fraction" says show_instance.yaml, a percent says the official CLI
   * ("Util. %"); read both ways (src/daemon/task-end/idle-watch.ts). Absent or null where the host reports none.
   */
  gpu_util?: number | null | undefined;
  [field: string]: unknown;
}

/** `select_filters` of the v1 instance list: `{column: {op: value}}` on stored columns only (`id`, `label`, `actual_status`...). */
export type InstanceFilters = Record<string, Record<string, unknown>>;

export interface InstancePageQuery {
  filters?: InstanceFilters;
  /** `next_token` of the previous page; absent or null for the first. */
  afterToken?: string | null;
}

/** One page of the v1 instance list (at most 25 instances, in ascending id order). */
export interface InstancePage {
  instances: Instance[];
  /** null on the last page. */
  nextToken: string | null;
  /** Instances matching the filters in all pages, when the service said. */
  total: number | null;
}

/** Body of `POST /api/v0/bundles/`: filters `{field: {op: value}}` plus order/type/limit. */
export interface SearchQuery {
  order?: Array<[string, 'asc' | 'desc']>;
  type?: 'on-demand' | 'bid';
  limit?: number;
  [filter: string]: unknown;
}

export interface CreateInstanceRequest {
  image: string;
  /** GB */
  disk: number;
  /** `berth:<store id>:<run id>:<attempt>` */
  label: string;
  onstart?: string;
  env?: Record<string, string>;
  /** $/h bid for interruptible offers; null for on-demand. */
  price?: number | null;
  runtype?: string;
  /**
   * Other values this create carries that service text must never show (the readiness token in
   * onstart, the spec's secrets). Env values are scrubbed from service text too: an error quoting
   * them is rare, and the client cannot tell configuration from a secret.
   */
  secrets?: string[];
}

/**
 * What an update_template changes (the preview spec's fields, and the official client's `args` and
 * `env`, vast-cli `update_instance`). Whether `env` takes effect is unverified: do not rely on it.
 */
export interface UpdateInstanceRequest {
  image?: string;
  onstart?: string;
  env?: Record<string, string>;
  /** The container's arguments, one string as the official client's `--args` sends it. */
  args?: string;
  /** GB; the preview spec's minimum is 8. */
  disk?: number;
  /** Recycle in the same call (a fresh container from what the update set). */
  recycle?: boolean;
  /** Values this update carries that service text must never show (env values are scrubbed too). */
  secrets?: string[];
}

interface CreatedInstance {
  /** The instance id (the service names it `new_contract`). */
  instanceId: number;
  /** Restricted per-instance key; a secret: never logged or stored in status output. */
  instanceApiKey?: string;
  /**
   * The answer said `success: false` while naming the instance: a bid held pending (issue #30), or
   * an on-demand contract made stopped, which will not start by itself (dstack #4036). The
   * service's words (its `error` and `msg`), secrets scrubbed.
   */
  unsuccessful?: string;
}

export interface CurrentUser {
  /** Absent from some real answers (a credit-only account's `vastai show user` quoted without it); berth records it to bind a store to its account (src/daemon/service-binding.ts). */
  id?: number | undefined;
  email?: string | undefined;
  credit?: number | undefined;
  [field: string]: unknown;
}

interface CallOptions {
  /** Aborts the call and its retries (actor stopped, daemon shutting down). */
  signal?: AbortSignal | undefined;
  /** The call waits behind every other call of its group queued with it (the task probe's reads). */
  background?: boolean | undefined;
}

/**
 * What berth needs of the marketplace. Implementations throw the errors of src/errors.ts:
 * AuthError, PermissionError, OfferGoneError, NotFoundError, RateLimitedError (after retries are
 * spent), ServiceHttpError, AmbiguousCreateError (create only), BerthError('aborted').
 */
export interface MarketClient {
  searchOffers(query: SearchQuery, options?: CallOptions): Promise<Offer[]>;
  /** Never retried once the request may have reached the service: an unknown outcome throws AmbiguousCreateError. */
  createInstance(offerId: number, request: CreateInstanceRequest, options?: CallOptions): Promise<CreatedInstance>;
  /** One page of the v1 instance list (`GET /api/v1/instances/`, the only documented list): one call. */
  listInstancePage(query: InstancePageQuery, options?: CallOptions): Promise<InstancePage>;
  /** Every instance matching `filters`, following `next_token` page by page: one call per 25. */
  listInstances(filters?: InstanceFilters, options?: CallOptions): Promise<Instance[]>;
  /** null when the service does not know the id. */
  showInstance(instanceId: number, options?: CallOptions): Promise<Instance | null>;
  /** Resolves when the service accepted the destroy, or the instance was already gone ('gone'). */
  destroyInstance(instanceId: number, options?: CallOptions): Promise<'destroyed' | 'gone'>;
  setInstanceState(instanceId: number, state: 'stopped' | 'running', options?: CallOptions): Promise<void>;
  setInstanceLabel(instanceId: number, label: string, options?: CallOptions): Promise<void>;
  /** Sets the compute bid ($/h) of an interruptible instance (`PUT /api/v0/instances/bid_price/{id}/`). */
  changeBid(instanceId: number, price: number, options?: CallOptions): Promise<void>;
  /**
   * Destroys and makes again the instance's container in place, keeping the instance, its machine
   * and price (`PUT /api/v0/instances/recycle/{id}/`): it shows `recycling`, then loading and
   * running. NotFoundError when the service has no such instance (`invalid_id`); a 200 saying
   * `success: false` is a ServiceHttpError `unsuccessful`.
   */
  recycleInstance(instanceId: number, options?: CallOptions): Promise<void>;
  /**
   * Changes what the instance's container is made from (`PUT /api/v0/instances/update_template/{id}/`),
   * and with `recycle` recycles it in the same call. Errors as recycleInstance's.
   */
  updateInstance(instanceId: number, request: UpdateInstanceRequest, options?: CallOptions): Promise<void>;
  /**
   * Asks the service to upload the container's last `tail` log lines (`PUT
   * /api/v0/instances/request_logs/{id}`); resolves with the URL they will appear at. That URL is
   * fetched without the API key (it is another host's).
   */
  /**
   * Asks the host to upload the container's log (logs.yaml): its last `tail` lines, only those
   * `filter` (a grep pattern, applied on the host) matches when given.
   */
  requestLogs(instanceId: number, request: { tail?: number; filter?: string }, options?: CallOptions): Promise<{ resultUrl: string }>;
  currentUser(options?: CallOptions): Promise<CurrentUser>;
  /** Price increases hosts asked for on the account's contracts (`GET /api/v0/instances/pending-price-increases/`). */
  pendingPriceIncreases(options?: CallOptions): Promise<PendingPriceIncreases>;
  /** Accepts or rejects one pending increase; 'stale' when the service no longer holds it (404, or 409 on older backends). */
  answerPriceIncrease(pendingId: number, answer: 'accept' | 'reject', options?: CallOptions): Promise<'done' | 'stale'>;
}

/** One price increase a host asked for on a running contract; $/s figures, null where unchanged. */
export interface PendingPriceIncrease {
  pending_price_increase_id: number;
  /** The instance id. */
  contract_id: number;
  new_gpu_costpersec?: number | null | undefined;
  old_gpu_costpersec?: number | null | undefined;
  new_disk_ram_costpersec?: number | null | undefined;
  old_disk_ram_costpersec?: number | null | undefined;
  new_platform_fee?: number | null | undefined;
  old_platform_fee?: number | null | undefined;
  contract_end_date?: number | null | undefined;
  created_at?: number | null | undefined;
}

interface PendingPriceIncreases {
  rows: PendingPriceIncrease[];
  /** The service left rows out (the next read sees them once these are answered). */
  truncated: boolean;
  /** Rows dropped because they did not parse. */
  malformed: number;
}

interface Webhook {
  id: number;
  webhook_secret: string;
  [field: string]: unknown;
}

/** One contract's charges (show_charges.yaml): `source` is `instance-<id>`, `amount` in $ (rounded to 3 decimals). */
export interface Charge {
  source: string;
  amount: number;
  [field: string]: unknown;
}

interface ApiKeyCreated {
  id?: number | undefined;
  /** The key value, shown once: a secret. */
  key?: string | undefined;
  [field: string]: unknown;
}

export interface AccountSshKey {
  id: number;
  /** The public key line, `type base64 [comment]`. */
  key: string;
  createdAt: number | null;
}

/** One of the account's cloud connections (show_connections.yaml: `id`, `name`, `cloud_type`). */
export interface CloudConnection {
  id: number;
  /** The name the user gave it (trimmed). */
  name: string;
  /** `cloud_type`: `s3`, `drive`, `b2`, `dropbox`, `hf`...; '' when the answer had none. */
  type: string;
}

/** The two transfers of the service's cloud copy (cloud_copy.yaml `transfer`). */
export type CloudTransfer = 'Instance To Cloud' | 'Cloud To Instance';

export interface CloudCopyRequest {
  instanceId: number;
  /** A container path (Instance To Cloud) or a path in the bucket (Cloud To Instance). */
  src: string;
  dst: string;
  /** The id of one of `listCloudConnections()`. */
  connectionId: number;
  transfer: CloudTransfer;
}

/** MarketClient plus the seed's other endpoints, stats and shutdown. */
export interface MarketplaceClient extends MarketClient {
  /** Secret names with masked values (the service never returns real values). */
  listSecrets(options?: CallOptions): Promise<Record<string, string>>;
  /** Takes the template's numeric id, never its hash_id. */
  deleteTemplate(templateId: number, options?: CallOptions): Promise<'deleted' | 'gone'>;
  /** The returned record holds the new `webhook_secret`: store it at once. */
  rotateWebhookSecret(webhookId: number, options?: CallOptions): Promise<Webhook>;
  createApiKey(request: { name?: string; permissions: Record<string, unknown> }, options?: CallOptions): Promise<ApiKeyCreated>;
  deleteApiKey(keyId: number, options?: CallOptions): Promise<'deleted' | 'gone'>;
  /** The SSH public keys registered on the account (`GET /api/v0/ssh/`, user_read): how many. */
  countSshKeys(options?: CallOptions): Promise<number>;
  /** The account's SSH public keys (`GET /api/v0/ssh/`, user_read); `createdAt` ms, null when not stated. */
  listSshKeys(options?: CallOptions): Promise<AccountSshKey[]>;
  /** Adds a public key to the account (`POST /api/v0/ssh/`, user_write): instances created from then on take it. */
  addSshKey(publicKey: string, options?: CallOptions): Promise<void>;
  /** Attaches a public key to one instance (`POST /api/v0/instances/{id}/ssh/`, instance_write). */
  attachSshKey(instanceId: number, publicKey: string, options?: CallOptions): Promise<void>;
  /**
   * Per-contract charges over whole UTC days (`GET /api/v0/charges/`, billing_read): every page of
   * the days whose 00:00 UTC lies within [fromS, toS], unix seconds.
   */
  charges(range: { fromS: number; toS: number }, options?: CallOptions): Promise<Charge[]>;
  /** The account's cloud connections (`GET /api/v0/users/cloud_integrations/`, user_read). */
  listCloudConnections(options?: CallOptions): Promise<CloudConnection[]>;
  /**
   * Starts the service's cloud copy between an instance (running or stopped) and a cloud connection
   * (`POST /api/v0/commands/rclone/`, instance_write). It answers at once: the copy's end shows only
   * in the instance's `status_msg`, about 30 s late (./cloud-copy-status.ts).
   */
  startCloudCopy(request: CloudCopyRequest, options?: CallOptions): Promise<void>;
  stats(): ClientStats;
  /**
   * Daemons sharing this API key share its rate limits: with `fraction` = 1/N, every endpoint
   * group's rate and burst are that fraction of `rate_limits`, for calls not yet sent (queued ones
   * wait at the new rate, none is dropped). 1 restores the configured limits. `overrides` gives
   * some groups another share.
   */
  setRateShare(fraction: number, overrides?: Partial<Record<RateGroup, number>>): void;
  /** Stops the limiters (queued calls fail) and closes the connections. */
  close(): Promise<void>;
}
