// One call to the service, and the one retry loop every call goes through:
//
//   pRetry( limiter.schedule(group, http.send) → typed error or response )
//
// p-retry is outside the limiter so that every attempt takes a fresh rate token; a 429 pauses only
// its endpoint group and the retry waits for the group to resume (never p-retry's zero-delay
// "retry not consumed" path). Whether a failure is retried comes from retry-policy.ts only. Final
// errors (AuthError, PermissionError, OfferGoneError...) leave as they are. A call that must not run
// twice (a create) is never repeated once it may have reached the service: its `onUnknownOutcome`
// error is thrown at once.
import pRetry from 'p-retry';
import { BerthError, ServiceHttpError } from '../errors.js';
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
import type { Http, HttpResponse } from './http.js';
import type { Limiter } from './limiter.js';
import type { ItemReport } from './record-items.js';
import { SecretScrubber } from './scrub.js';
import {
  isAmbiguousForNonIdempotent,
  outcomeOf,
  statusPolicy,
  transportErrorCode,
  transportPolicy,
  unsuccessfulOutcome,
} from './retry-policy.js';

interface CallSpec {
  op: ClientOperation;
  group: RateGroup;
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  /**
   * The body fixed when the call is let go (its rate token taken, just before it is sent), instead
   * of `body`: called once, on the first attempt, and kept for the retries (a bulk destroy takes
   * the ids that joined while it waited for its token).
   */
  bodyAtSend?: () => unknown;
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
  /** Queued behind every other call of its group (../client/limiter.ts). */
  background?: boolean | undefined;
}

/** A 2xx answer; `unsuccessful`: it said `success: false` and `acceptUnsuccessful` took it, in the service's words (scrubbed). */
type CallAnswer = HttpResponse & { unsuccessful?: string };

type CallCounters = Omit<ClientStats, 'groups' | 'rateShare'>;

/** What every endpoint is built on: the call, and the ways the client reports instead of logging. */
export interface ServiceCaller {
  /** Resolves with a 2xx answer, or throws a typed error once retries are spent or pointless. */
  call(spec: CallSpec): Promise<CallAnswer>;
  emit(event: ClientEvent): void;
  /** Reports what an answer held that could not be read (nothing when all was well). */
  reportItems(op: ClientOperation, group: RateGroup, report: ItemReport): void;
  /** Whether a call of `group` made now would wait for its rate limiter (see Limiter.wouldWait). */
  wouldWait(group: RateGroup): boolean;
  /** Counted for `stats()`. */
  readonly counters: CallCounters;
}

export interface ServiceCallerDeps {
  http: Http;
  limiter: Limiter;
  apiKey: string;
  retry: Config['retry'];
  /** Retries per call at most; default 10. */
  maxRetries?: number | undefined;
  emit(event: ClientEvent): void;
  /** Resolves when the other daemons sharing the key let a call of `group` go (see MarketClientOptions.pace). */
  pace?: ((group: RateGroup, signal?: AbortSignal) => Promise<void>) | undefined;
}

/** A service answer saying the thing asked about does not exist (any more). */
export const isGone = (err: unknown, serviceCode: string): boolean =>
  err instanceof ServiceHttpError && (err.code === 'not_found' || err.serviceCode === serviceCode);

export function createServiceCaller({ http, limiter, apiKey, retry, maxRetries, emit, pace }: ServiceCallerDeps): ServiceCaller {
  const counters: CallCounters = { calls: 0, retries: 0, rateLimited: 0, ambiguousCreates: 0 };
  // Every secret this client was handed (the key, and the env values of every create it sent),
  // scrubbed from any service text of any call: the service may echo an env value anywhere.
  const secrets = new SecretScrubber([apiKey]);

  /** One attempt: a rate token, one HTTP exchange, a typed error for anything but 2xx. */
  async function attempt(spec: CallSpec, bodyOf: () => unknown): Promise<CallAnswer> {
    for (const secret of spec.secrets ?? []) secrets.add(secret);
    const ctx: ResponseContext = { method: spec.method, path: spec.path.split('?')[0]!, offerId: spec.offerId, secrets };
    let inFlight = false;
    let res: HttpResponse;
    try {
      res = await limiter.schedule(
        spec.group,
        async () => {
          await pace?.(spec.group, spec.signal);
          const body = bodyOf();
          inFlight = true;
          // Time on the wire only (the wait for a token is the limiter's), for /metrics.
          const t0 = performance.now();
          const answer = (status: number | null) =>
            emit({ type: 'response', op: spec.op, group: spec.group, status, ms: performance.now() - t0 });
          try {
            const got = await http.send(spec.method, spec.path, body, spec.signal);
            answer(got.status);
            return got;
          } catch (err) {
            answer(null);
            throw err;
          }
        },
        spec.signal,
        { background: spec.background === true },
      );
    } catch (err) {
      throw transportFailure(err, spec, ctx, inFlight);
    }
    if (res.status >= 200 && res.status < 300) {
      limiter.succeeded(spec.group);
      if (!isUnsuccessful(res.body)) return res;
      // Taken as the call's answer: what the service said goes with it, scrubbed like an error's text.
      if (spec.acceptUnsuccessful?.(res.body) === true)
        return { ...res, unsuccessful: unsuccessfulError(res.status, res.body, ctx, false).message };
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
  async function call(spec: CallSpec): Promise<CallAnswer> {
    counters.calls++;
    let late: { body: unknown } | undefined;
    const bodyOf = () => {
      if (!spec.bodyAtSend) return spec.body;
      late ??= { body: spec.bodyAtSend() };
      return late.body;
    };
    try {
      return await pRetry(() => attempt(spec, bodyOf), {
        retries: maxRetries ?? 10,
        factor: retry.factor,
        minTimeout: retry.min_delay_s * 1000,
        maxTimeout: retry.max_delay_s * 1000,
        maxRetryTime: retry.max_retry_time_s * 1000,
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

  return {
    call,
    emit,
    reportItems(op, group, report) {
      if (!report.any) return;
      emit({ type: 'malformed_records', op, group, dropped: report.dropped, repaired: report.repaired, issues: report.issues });
    },
    wouldWait: (group) => limiter.wouldWait(group),
    counters,
  };
}
