// The marketplace client: every endpoint berth uses, each call going through one retry loop.
//
//   pRetry( limiter.schedule(group, http.send) → typed error or response )
//
// p-retry is outside the limiter so that every attempt takes a fresh rate token; a 429 pauses only
// its endpoint group and the retry waits for the group to resume (never p-retry's zero-delay
// "retry not consumed" path). Whether a failure is retried comes from retry-policy.ts only. Final
// errors (AuthError, PermissionError, OfferGoneError...) leave as they are. A create is never
// repeated once it may have reached the service: it fails with AmbiguousCreateError at once.
//
// The client does not log; it reports retries and pauses through `onEvent`.
import pRetry from 'p-retry';
import { AmbiguousCreateError, BerthError, ServiceHttpError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Config, RateGroup } from '../config/schema.js';
import { abortedError, isAbortError } from './abort.js';
import type { ClientEvent, ClientOperation, ClientStats } from './events.js';
import {
  errorFromResponse,
  isUnsuccessful,
  parseRateLimitThreshold,
  rateLimitedError,
  unsuccessfulError,
  type ResponseContext,
} from './errors-from-response.js';
import { createHttp, type Http, type HttpResponse } from './http.js';
import { createLimiter } from './limiter.js';
import { SecretScrubber } from './scrub.js';
import { normalizeOffer } from './normalize.js';
import { ItemReport, keepInstances, keepValid, oneInstance } from './record-items.js';
import {
  apiKeyResponseSchema,
  chargeSchema,
  offerSchema,
  sshKeySchema,
  createResponseSchema,
  currentUserSchema,
  listV1ResponseSchema,
  pendingPriceIncreaseSchema,
  pendingPriceIncreasesResponseSchema,
  parseBody,
  chargesResponseSchema,
  requestLogsResponseSchema,
  rotateSecretResponseSchema,
  searchResponseSchema,
  sshKeysResponseSchema,
  secretsResponseSchema,
  showResponseSchema,
} from './records.js';
import {
  isAmbiguousForNonIdempotent,
  outcomeOf,
  statusPolicy,
  transportErrorCode,
  transportPolicy,
  unsuccessfulOutcome,
} from './retry-policy.js';
import type {
  CallOptions,
  CreateInstanceRequest,
  CreatedInstance,
  CurrentUser,
  Instance,
  InstanceFilters,
  InstancePage,
  InstancePageQuery,
  MarketClient,
  Offer,
  PendingPriceIncrease,
  PendingPriceIncreases,
  SearchQuery,
} from './types.js';

export interface MarketClientOptions {
  baseUrl: string;
  apiKey: string;
  config: Pick<Config, 'service' | 'rate_limits' | 'retry'>;
  onEvent?: (event: ClientEvent) => void;
  /** Retries per call at most (the time budget `retry.max_retry_time_s` usually ends it first); default 10. */
  maxRetries?: number;
  /** Time for the rate limiter; default the wall clock. */
  clock?: Clock;
  /**
   * Called once this client's limiter lets a call go, before it is sent: resolves when the call may
   * go as far as the other daemons sharing the key are concerned (src/daemon/cluster/shared-pace.ts).
   */
  pace?: (group: RateGroup, signal?: AbortSignal) => Promise<void>;
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
  /**
   * Per-contract charges over whole UTC days (`GET /api/v0/charges/`, billing_read): every page of
   * the days whose 00:00 UTC lies within [fromS, toS], unix seconds.
   */
  charges(range: { fromS: number; toS: number }, options?: CallOptions): Promise<Charge[]>;
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

interface CallSpec {
  op: ClientOperation;
  group: RateGroup;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  /** What to throw instead of retrying when a non-idempotent request may have reached the service. */
  onUnknownOutcome?: (cause: unknown) => BerthError;
  offerId?: number | undefined;
  /**
   * A 2xx saying `success: false` that nonetheless did the call's job (a create naming its
   * `new_contract`): returned as an answer, not thrown as a failure.
   */
  acceptUnsuccessful?: (body: unknown) => boolean;
  /** Values sent in this call that must not appear in an error message (env values). */
  secrets?: readonly string[];
  signal?: AbortSignal | undefined;
}

/** The v1 list's largest page (show_instances.yaml: default 25, max 25). */
const V1_PAGE_SIZE = 25;
const MAX_V1_PAGES = 10_000;

/**
 * The columns berth reads of an instance, asked for with `select_cols` so a list of 1,000 instances
 * is a few dozen KB instead of ~1 MB: the status fields the run machine decides on (`actual_status`,
 * `intended_status`, `cur_state`, and `status_msg` for the "OCI runtime create failed" case), the
 * label (ownership and the look-up of creates with an unknown outcome), the SSH endpoints shown to
 * the user and probed for readiness (the proxy `ssh_host`/`ssh_port`, the direct `public_ipaddr` +
 * `ports`), the billed `dph_total` shown in status, `machine_id`, and `gpu_util` (idle autostop). Never `extra_env` or `onstart`:
 * env values (secrets) do not even travel.
 */
export const INSTANCE_COLUMNS = [
  'id',
  'label',
  'machine_id',
  'actual_status',
  'intended_status',
  'cur_state',
  'status_msg',
  'ssh_host',
  'ssh_port',
  'public_ipaddr',
  'ports',
  'dph_total',
  'gpu_util',
] as const;

/** Keyset order of every list: by id, so a walk over the pages is stable and new instances come last. */
const ORDER_BY = JSON.stringify([{ col: 'id', dir: 'asc' }]);
const SELECT_COLS = JSON.stringify(INSTANCE_COLUMNS);

function listPath(query: InstancePageQuery): string {
  const params = new URLSearchParams({ limit: String(V1_PAGE_SIZE), order_by: ORDER_BY, select_cols: SELECT_COLS });
  if (query.filters && Object.keys(query.filters).length > 0) params.set('select_filters', JSON.stringify(query.filters));
  if (query.afterToken) params.set('after_token', query.afterToken);
  return `/api/v1/instances/?${params.toString()}`;
}

/** A create's answer that names the instance it made, whatever its `success` says. */
function namesNewContract(body: unknown): boolean {
  const id = body !== null && typeof body === 'object' ? (body as Record<string, unknown>)['new_contract'] : undefined;
  return typeof id === 'number' && Number.isInteger(id) && id > 0;
}

export function createMarketClient(options: MarketClientOptions): MarketplaceClient {
  const { config, apiKey } = options;
  const emit = (e: ClientEvent) => {
    try {
      options.onEvent?.(e);
    } catch {
      // A listener's fault must not change the outcome of a service call.
    }
  };
  const http: Http = createHttp({
    baseUrl: options.baseUrl,
    apiKey,
    connectTimeoutMs: config.service.connect_timeout_s * 1000,
    timeoutMs: config.service.timeout_s * 1000,
  });
  const limiter = createLimiter(config.rate_limits, {
    ...(options.clock ? { clock: options.clock } : {}),
    maxPauseMs: config.retry.max_delay_s * 1000,
    onResume: (group) => emit({ type: 'resumed', group }),
  });
  const counters = { calls: 0, retries: 0, rateLimited: 0, ambiguousCreates: 0 };
  /** Reports what an answer held that could not be read (nothing when all was well). */
  const reportItems = (op: ClientOperation, group: RateGroup, report: ItemReport) => {
    if (!report.any) return;
    emit({ type: 'malformed_records', op, group, dropped: report.dropped, repaired: report.repaired, issues: report.issues });
  };
  // Every secret this client was handed (the key, and the env values of every create it sent),
  // scrubbed from any service text of any call: the service may echo an env value anywhere.
  const secrets = new SecretScrubber([apiKey]);

  /** One attempt: a rate token, one HTTP exchange, a typed error for anything but 2xx. */
  async function attempt(spec: CallSpec): Promise<HttpResponse> {
    for (const secret of spec.secrets ?? []) secrets.add(secret);
    const ctx: ResponseContext = { method: spec.method, path: spec.path.split('?')[0]!, offerId: spec.offerId, secrets };
    let inFlight = false;
    let res: HttpResponse;
    try {
      res = await limiter.schedule(
        spec.group,
        async () => {
          await options.pace?.(spec.group, spec.signal);
          inFlight = true;
          // Time on the wire only (the wait for a token is the limiter's), for /metrics.
          const t0 = performance.now();
          const answer = (status: number | null) =>
            emit({ type: 'response', op: spec.op, group: spec.group, status, ms: performance.now() - t0 });
          try {
            const got = await http.send(spec.method, spec.path, spec.body, spec.signal);
            answer(got.status);
            return got;
          } catch (err) {
            answer(null);
            throw err;
          }
        },
        spec.signal,
      );
    } catch (err) {
      throw transportFailure(err, spec, ctx, inFlight);
    }
    if (res.status >= 200 && res.status < 300) {
      limiter.succeeded(spec.group);
      if (!isUnsuccessful(res.body) || spec.acceptUnsuccessful?.(res.body) === true) return res;
      const failure = unsuccessfulError(res.status, res.body, ctx, unsuccessfulOutcome(spec.op) === 'retry');
      // A create answered `success: false` may still have made an instance: look for it by label.
      if (spec.onUnknownOutcome) throw spec.onUnknownOutcome(failure);
      throw failure;
    }
    if (res.status === 429) {
      const threshold = parseRateLimitThreshold(res.body);
      const { pauseMs, consecutive } = limiter.pause(spec.group, threshold);
      counters.rateLimited++;
      emit({
        type: 'rate_limited',
        op: spec.op,
        group: spec.group,
        pauseMs,
        ...(threshold === undefined ? {} : { threshold }),
        consecutive,
      });
      throw rateLimitedError(res.body, pauseMs, ctx);
    }
    const failure = errorFromResponse(res.status, res.body, ctx);
    if (spec.onUnknownOutcome && statusPolicy(res.status).mayHaveActed) throw spec.onUnknownOutcome(failure);
    throw failure;
  }

  /** Maps a failure without an answer to a typed error, using the policy table. */
  function transportFailure(err: unknown, spec: CallSpec, ctx: ResponseContext, inFlight: boolean): BerthError {
    const aborted = isAbortError(err) || spec.signal?.aborted === true;
    if (aborted) {
      // Cancelled while the request was on the wire: for a create the outcome is unknown.
      if (inFlight && spec.onUnknownOutcome) return spec.onUnknownOutcome(abortedError(spec.signal?.reason));
      return err instanceof BerthError ? err : abortedError(err);
    }
    if (err instanceof BerthError) return err;
    const code = transportErrorCode(err);
    const policy = transportPolicy(code);
    const typed = new BerthError(policy.code, `${ctx.method} ${ctx.path} failed without an answer (${code ?? 'unknown error'}).`, {
      cause: err,
      retryable: inFlight ? policy.outcome === 'retry' : false,
    });
    if (inFlight && spec.onUnknownOutcome && isAmbiguousForNonIdempotent(policy)) return spec.onUnknownOutcome(typed);
    return typed;
  }

  /** The one retry loop of a call. */
  async function call(spec: CallSpec): Promise<HttpResponse> {
    counters.calls++;
    try {
      return await pRetry(() => attempt(spec), {
        retries: options.maxRetries ?? 10,
        factor: config.retry.factor,
        minTimeout: config.retry.min_delay_s * 1000,
        maxTimeout: config.retry.max_delay_s * 1000,
        maxRetryTime: config.retry.max_retry_time_s * 1000,
        randomize: true,
        signal: spec.signal,
        // A 429 does not use up the retry budget (the time budget still bounds it)...
        shouldConsumeRetry: ({ error }) => outcomeOf(error) !== 'rate_limited',
        shouldRetry: async ({ error, attemptNumber }) => {
          const outcome = outcomeOf(error);
          if (outcome === 'final') return false;
          counters.retries++;
          if (outcome === 'rate_limited') {
            // ...so p-retry would retry at once: wait for the group's pause to end here instead.
            await limiter.waitUntilResumed(spec.group, spec.signal);
            return true;
          }
          const e = error as BerthError;
          emit({
            type: 'retry',
            op: spec.op,
            group: spec.group,
            attempt: attemptNumber,
            code: e.code,
            ...(e instanceof ServiceHttpError ? { status: e.status } : {}),
            message: e.message,
          });
          return true;
        },
      });
    } catch (err) {
      // p-retry rejects with the signal's reason on abort; everything else is already typed.
      if (!(err instanceof BerthError) && isAbortError(err)) throw abortedError(err);
      if (!(err instanceof BerthError) && spec.signal?.aborted) throw abortedError(spec.signal.reason);
      throw err;
    }
  }

  const isGone = (err: unknown, serviceCode: string): boolean =>
    err instanceof ServiceHttpError && (err.code === 'not_found' || err.serviceCode === serviceCode);

  async function listPage(query: InstancePageQuery, signal: AbortSignal | undefined): Promise<InstancePage> {
    const res = await call({ op: 'list', group: 'list', method: 'GET', path: listPath(query), signal });
    const body = parseBody(listV1ResponseSchema, res.body, 'GET /api/v1/instances/');
    const report = new ItemReport();
    const instances = keepInstances(body.instances, 'instances', report);
    reportItems('list', 'list', report);
    const next = body.next_token ?? null;
    return {
      instances,
      nextToken: next === null || next === '' ? null : String(next),
      total: body.total_instances ?? null,
    };
  }

  async function listAll(filters: InstanceFilters | undefined, signal: AbortSignal | undefined): Promise<Instance[]> {
    const byId = new Map<number, Instance>();
    const seenTokens = new Set<string>();
    let afterToken: string | null = null;
    for (let page = 0; page < MAX_V1_PAGES; page++) {
      const got: InstancePage = await listPage({ ...(filters ? { filters } : {}), afterToken }, signal);
      // An instance may move between pages while we walk them: keep the latest record per id.
      for (const inst of got.instances) byId.set(inst.id, inst);
      if (got.nextToken === null) return [...byId.values()];
      if (seenTokens.has(got.nextToken)) throw new BerthError('bad_response', 'The v1 instance list repeated a page token.');
      seenTokens.add(got.nextToken);
      afterToken = got.nextToken;
    }
    throw new BerthError('bad_response', `The v1 instance list did not end after ${MAX_V1_PAGES} pages.`);
  }

  return {
    async searchOffers(query: SearchQuery, opts?: CallOptions): Promise<Offer[]> {
      const res = await call({
        op: 'search',
        group: 'search',
        method: 'POST',
        path: '/api/v0/bundles/',
        body: query,
        signal: opts?.signal,
      });
      const { offers } = parseBody(searchResponseSchema, res.body, 'POST /api/v0/bundles/');
      const report = new ItemReport();
      const usable = keepValid(offerSchema, offers.map(normalizeOffer), 'offers', report);
      reportItems('search', 'search', report);
      return usable;
    },

    async createInstance(offerId: number, request: CreateInstanceRequest, opts?: CallOptions): Promise<CreatedInstance> {
      const ambiguous = (cause: unknown): AmbiguousCreateError => {
        counters.ambiguousCreates++;
        const code = cause instanceof BerthError ? cause.code : 'ambiguous';
        emit({ type: 'ambiguous_create', offerId, label: request.label, code });
        return new AmbiguousCreateError(offerId, request.label, cause);
      };
      const body = {
        client_id: 'me',
        image: request.image,
        disk: request.disk,
        label: request.label,
        env: request.env ?? {},
        onstart: request.onstart,
        price: request.price ?? null,
        runtype: request.runtype ?? 'ssh',
      };
      const res = await call({
        op: 'create',
        group: 'create',
        method: 'PUT',
        path: `/api/v0/asks/${offerId}/`,
        body,
        offerId,
        secrets: [...Object.values(request.env ?? {}), ...(request.secrets ?? [])],
        onUnknownOutcome: ambiguous,
        // A bid the service holds pending answers 200 `{"success": false, "new_contract": N,
        // "instance_api_key"}` (seen live by another tool's author, 2026-07): the instance exists
        // and bills, and the answer names it. Taken as the create's answer (issue #30, case 3);
        // the run machine then follows the instance like any other.
        acceptUnsuccessful: namesNewContract,
        signal: opts?.signal,
      });
      let created;
      try {
        created = parseBody(createResponseSchema, res.body, `PUT /api/v0/asks/${offerId}/`);
      } catch (err) {
        // A 2xx we cannot read may still have created an instance: same as a lost answer.
        throw ambiguous(err);
      }
      return {
        instanceId: created.new_contract,
        ...(created.instance_api_key === undefined ? {} : { instanceApiKey: created.instance_api_key }),
      };
    },

    listInstancePage(query: InstancePageQuery, opts?: CallOptions): Promise<InstancePage> {
      return listPage(query, opts?.signal);
    },

    listInstances(filters?: InstanceFilters, opts?: CallOptions): Promise<Instance[]> {
      return listAll(filters, opts?.signal);
    },

    async showInstance(instanceId: number, opts?: CallOptions): Promise<Instance | null> {
      const path = `/api/v0/instances/${instanceId}/`;
      try {
        const res = await call({ op: 'show', group: 'show', method: 'GET', path, signal: opts?.signal });
        const { instances } = parseBody(showResponseSchema, res.body, `GET ${path}`);
        const report = new ItemReport();
        try {
          return oneInstance(instances, `GET ${path}`, report);
        } finally {
          reportItems('show', 'show', report);
        }
      } catch (err) {
        if (isGone(err, 'no_such_instance')) return null;
        throw err;
      }
    },

    async destroyInstance(instanceId: number, opts?: CallOptions): Promise<'destroyed' | 'gone'> {
      // Idempotent: retried on transient faults, and "already gone" is success.
      try {
        await call({ op: 'destroy', group: 'destroy', method: 'DELETE', path: `/api/v0/instances/${instanceId}/`, signal: opts?.signal });
        return 'destroyed';
      } catch (err) {
        if (isGone(err, 'no_such_instance')) return 'gone';
        throw err;
      }
    },

    async setInstanceState(instanceId: number, state: 'stopped' | 'running', opts?: CallOptions): Promise<void> {
      await call({
        op: 'change',
        group: 'change',
        method: 'PUT',
        path: `/api/v0/instances/${instanceId}/`,
        body: { state },
        signal: opts?.signal,
      });
    },

    async setInstanceLabel(instanceId: number, label: string, opts?: CallOptions): Promise<void> {
      await call({
        op: 'change',
        group: 'change',
        method: 'PUT',
        path: `/api/v0/instances/${instanceId}/`,
        body: { label },
        signal: opts?.signal,
      });
    },

    async changeBid(instanceId: number, price: number, opts?: CallOptions): Promise<void> {
      // change_bid.yaml: {client_id: "me", price} in $/h, 0.001-32 per GPU, its own endpoint and
      // limit (5.5/s). Idempotent: retried on faults.
      await call({
        op: 'change_bid',
        group: 'bid',
        method: 'PUT',
        path: `/api/v0/instances/bid_price/${instanceId}/`,
        body: { client_id: 'me', price },
        signal: opts?.signal,
      });
    },

    async requestLogs(instanceId: number, request: { tail?: number }, opts?: CallOptions): Promise<{ resultUrl: string }> {
      // logs.yaml: `tail` is a string of digits; the answer names where the log will be uploaded.
      const body = request.tail === undefined ? {} : { tail: String(request.tail) };
      const path = `/api/v0/instances/request_logs/${instanceId}`;
      const res = await call({ op: 'request_logs', group: 'other', method: 'PUT', path, body, signal: opts?.signal });
      return { resultUrl: parseBody(requestLogsResponseSchema, res.body, `PUT ${path}`).result_url };
    },

    async currentUser(opts?: CallOptions): Promise<CurrentUser> {
      const res = await call({ op: 'current_user', group: 'other', method: 'GET', path: '/api/v0/users/current/', signal: opts?.signal });
      return parseBody(currentUserSchema, res.body, 'GET /api/v0/users/current/');
    },

    async pendingPriceIncreases(opts?: CallOptions): Promise<PendingPriceIncreases> {
      const path = '/api/v0/instances/pending-price-increases/';
      const res = await call({ op: 'price_increases', group: 'other', method: 'GET', path, signal: opts?.signal });
      const body = parseBody(pendingPriceIncreasesResponseSchema, res.body, `GET ${path}`);
      const rows: PendingPriceIncrease[] = [];
      let malformed = 0;
      for (const item of body.pending_price_increases ?? []) {
        const row = pendingPriceIncreaseSchema.safeParse(item);
        if (row.success) rows.push(row.data);
        else malformed++;
      }
      return { rows, truncated: body.truncated === true, malformed };
    },

    async answerPriceIncrease(pendingId: number, answer: 'accept' | 'reject', opts?: CallOptions): Promise<'done' | 'stale'> {
      // The body is exactly {pending_price_increase_id} (the service forbids extra keys). Answering
      // twice is harmless: a row already answered is stale (404 no_pending_price_increase; 409 on
      // older backends), so a retry after a lost answer ends as 'stale'.
      const path = `/api/v0/instances/${answer}-price-increase/`;
      try {
        await call({
          op: `price_increase_${answer}`,
          group: 'change',
          method: 'PUT',
          path,
          body: { pending_price_increase_id: pendingId },
          signal: opts?.signal,
        });
        return 'done';
      } catch (err) {
        if (err instanceof ServiceHttpError && (err.status === 404 || err.status === 409)) return 'stale';
        throw err;
      }
    },

    async listSecrets(opts?: CallOptions): Promise<Record<string, string>> {
      const res = await call({ op: 'secrets', group: 'other', method: 'GET', path: '/api/v0/secrets/', signal: opts?.signal });
      const { secrets: all } = parseBody(secretsResponseSchema, res.body, 'GET /api/v0/secrets/');
      const kept: Record<string, string> = {};
      let dropped = 0;
      for (const [name, value] of Object.entries(all)) {
        if (typeof value === 'string') kept[name] = value;
        else dropped++;
      }
      if (dropped > 0) {
        emit({
          type: 'malformed_records',
          op: 'secrets',
          group: 'other',
          dropped,
          repaired: 0,
          issues: [`secrets: ${dropped} value(s) not a string`],
        });
      }
      return kept;
    },

    async deleteTemplate(templateId: number, opts?: CallOptions): Promise<'deleted' | 'gone'> {
      try {
        await call({
          op: 'template_delete',
          group: 'other',
          method: 'DELETE',
          path: '/api/v0/template/',
          body: { template_id: templateId },
          signal: opts?.signal,
        });
        return 'deleted';
      } catch (err) {
        if (isGone(err, 'no_such_template')) return 'gone';
        throw err;
      }
    },

    async rotateWebhookSecret(webhookId: number, opts?: CallOptions): Promise<Webhook> {
      // Retrying a rotation is safe: whichever rotation answered last holds the valid secret.
      const path = `/api/v0/webhooks/${webhookId}/rotate-secret`;
      const res = await call({ op: 'webhook_rotate_secret', group: 'other', method: 'POST', path, signal: opts?.signal });
      return parseBody(rotateSecretResponseSchema, res.body, `POST ${path}`).webhook;
    },

    async createApiKey(request, opts?: CallOptions): Promise<ApiKeyCreated> {
      // Not idempotent: a lost answer could leave a live key behind, so it is never repeated blindly.
      const res = await call({
        op: 'api_key_create',
        group: 'other',
        method: 'POST',
        path: '/api/v0/auth/apikeys/',
        body: request,
        onUnknownOutcome: (cause) =>
          new BerthError('ambiguous', 'The API key creation may or may not have succeeded; check the key list before retrying.', { cause }),
        signal: opts?.signal,
      });
      return parseBody(apiKeyResponseSchema, res.body, 'POST /api/v0/auth/apikeys/');
    },

    async deleteApiKey(keyId: number, opts?: CallOptions): Promise<'deleted' | 'gone'> {
      try {
        await call({
          op: 'api_key_delete',
          group: 'other',
          method: 'DELETE',
          path: `/api/v0/auth/apikeys/${keyId}/`,
          signal: opts?.signal,
        });
        return 'deleted';
      } catch (err) {
        if (isGone(err, 'no_such_key')) return 'gone';
        throw err;
      }
    },

    async countSshKeys(opts?: CallOptions): Promise<number> {
      const res = await call({ op: 'ssh_keys', group: 'other', method: 'GET', path: '/api/v0/ssh/', signal: opts?.signal });
      const report = new ItemReport();
      const keys = keepValid(sshKeySchema, parseBody(sshKeysResponseSchema, res.body, 'GET /api/v0/ssh/'), 'keys', report);
      reportItems('ssh_keys', 'other', report);
      return keys.length;
    },

    async charges(range, opts?: CallOptions): Promise<Charge[]> {
      const all: Charge[] = [];
      const seen = new Set<string>();
      let token: string | null = null;
      for (let page = 0; page < MAX_V1_PAGES; page++) {
        const params = new URLSearchParams({
          select_filters: JSON.stringify({ day: { gte: Math.floor(range.fromS), lte: Math.floor(range.toS) }, type: { in: ['instance'] } }),
          limit: '500',
        });
        if (token) params.set('after_token', token);
        const res = await call({
          op: 'charges',
          group: 'other',
          method: 'GET',
          path: `/api/v0/charges/?${params.toString()}`,
          signal: opts?.signal,
        });
        const body = parseBody(chargesResponseSchema, res.body, 'GET /api/v0/charges/');
        const report = new ItemReport();
        all.push(...keepValid(chargeSchema, body.results, 'results', report));
        reportItems('charges', 'other', report);
        token = body.next_token ?? null;
        if (!token) return all;
        if (seen.has(token)) throw new BerthError('bad_response', 'The charges report repeated a page token.');
        seen.add(token);
      }
      throw new BerthError('bad_response', `The charges report did not end after ${MAX_V1_PAGES} pages.`);
    },

    stats(): ClientStats {
      return { groups: limiter.stats(), ...counters, rateShare: limiter.share() };
    },
    setRateShare(fraction: number, overrides?: Partial<Record<RateGroup, number>>): void {
      limiter.setShare(fraction, overrides);
    },

    async close(): Promise<void> {
      await limiter.close();
      await http.close();
    },
  };
}
