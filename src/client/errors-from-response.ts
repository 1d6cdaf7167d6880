// Turns an answer of the service that is a failure (a non-2xx, or a 2xx saying `success: false`)
// into one of berth's typed errors. Bodies come in three forms (generic `{success, error, msg}`,
// rate-limit `{detail}`, and plain text), so everything here reads them defensively.
//
// This is the one place where service text becomes part of a message (and so of run errors,
// attempts, events, status output, the log and berth.db). Nothing the service wrote is quoted
// unless it went through `safeServiceText` (every form of every secret scrubbed, then shortened),
// and the `error` field is kept only when it looks like an error code.
import {
  AuthError,
  NotFoundError,
  OfferGoneError,
  OfferRefusedError,
  PermissionError,
  RateLimitedError,
  ServiceHttpError,
} from '../errors.js';
import { statusPolicy } from './retry-policy.js';
import { MAX_SCRUBBED_TEXT, scrubSecrets, type SecretScrubber } from './scrub.js';

export interface ResponseContext {
  method: string;
  /** Path without query (ids only, never secrets). */
  path: string;
  /** The offer a create was aimed at, to name it in OfferGoneError. */
  offerId?: number | undefined;
  /** Secrets to scrub from any service text copied into a message (the API key, env values). */
  secrets?: readonly string[] | SecretScrubber;
}

interface ServiceBodyFields {
  error: string | undefined;
  msg: string | undefined;
  detail: string | undefined;
  text: string | undefined;
}

const MAX_SERVICE_TEXT = 200;

/** The service's error codes are snake_case words (`no_such_ask`, `auth_error`); anything else is not one. */
const ERROR_CODE = /^[a-z][a-z0-9_]{0,63}$/i;

function readFields(body: unknown, secrets: readonly string[] | SecretScrubber = []): ServiceBodyFields {
  if (typeof body === 'string') return { error: undefined, msg: undefined, detail: undefined, text: body };
  if (body && typeof body === 'object') {
    const o = body as Record<string, unknown>;
    const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
    // An `error` that is not a code may be the service echoing input back: never carried anywhere.
    const error = str(o.error);
    const isCode = error !== undefined && ERROR_CODE.test(error) && scrubSecrets(error, secrets) === error;
    return { error: isCode ? error : undefined, msg: str(o.msg) ?? str(o.message), detail: str(o.detail), text: undefined };
  }
  return { error: undefined, msg: undefined, detail: undefined, text: undefined };
}

/** Service text made safe for a message: every form of every secret replaced, one line, length bounded. */
function safeServiceText(text: string | undefined, secrets: readonly string[] | SecretScrubber = []): string | undefined {
  if (!text) return undefined;
  const out = scrubSecrets(text.slice(0, MAX_SCRUBBED_TEXT), secrets).replace(/\s+/g, ' ').trim();
  return out.length > MAX_SERVICE_TEXT ? `${out.slice(0, MAX_SERVICE_TEXT)}…` : out;
}

/**
 * The threshold a 429 names, from any of its three forms: `{"detail": "... threshold=4.5"}`,
 * `{"msg": "... threshold=3.0"}` (destroy), or plain text without one (`API requests too frequent`).
 */
export function parseRateLimitThreshold(body: unknown): number | undefined {
  const f = readFields(body);
  for (const text of [f.detail, f.msg, f.text]) {
    const m = text ? /threshold\s*=\s*(\d+(?:\.\d+)?|\.\d+)/i.exec(text) : null;
    if (m) {
      const value = Number(m[1]);
      if (Number.isFinite(value) && value > 0) return value;
    }
  }
  return undefined;
}

/** The permission category a 403 names, e.g. "requires permission instance_write". */
export function parsePermissionCategory(body: unknown, secrets: readonly string[] | SecretScrubber = []): string | undefined {
  const f = readFields(body);
  for (const raw of [f.msg, f.detail, f.text]) {
    const text = safeServiceText(raw, secrets);
    if (!text) continue;
    const named = /permission[s]?\s*[:=]?\s*["'`]?([a-z][a-z0-9_]*_(?:read|write)|misc)\b/i.exec(text);
    if (named) return named[1]!.toLowerCase();
    const bare = /\b([a-z][a-z0-9]*_(?:read|write))\b/i.exec(text);
    if (bare) return bare[1]!.toLowerCase();
  }
  return undefined;
}

function mentionsNoSuchAsk(f: ServiceBodyFields): boolean {
  return [f.error, f.msg, f.text].some((t) => t?.includes('no_such_ask'));
}

function askIdOf(body: unknown): number | undefined {
  const askId = body && typeof body === 'object' ? (body as Record<string, unknown>).ask_id : undefined;
  return typeof askId === 'number' && Number.isInteger(askId) ? askId : undefined;
}

function offerIdOf(body: unknown, ctx: ResponseContext): number {
  return ctx.offerId ?? askIdOf(body) ?? Number.NaN;
}

/**
 * A 403 about one offer rather than the key: create_instance.yaml documents
 * `{"error": "invalid_args", "msg": "error 403/3586: Offer N is not your own...", "ask_id"}`.
 * A permission 403 names no offer and uses no `invalid_args`.
 */
function isOfferRefusal(f: ServiceBodyFields, body: unknown, ctx: ResponseContext): boolean {
  if (ctx.offerId === undefined && askIdOf(body) === undefined) return false;
  return askIdOf(body) !== undefined || f.error === 'invalid_args' || /\b403\/3586\b/.test(f.msg ?? '');
}

/**
 * A bad key without an `auth_error` code: search_offers.yaml documents its 404 as
 * `{"msg": "Invalid user key"}` alone, and other endpoints are reported to answer alike. The
 * service gives no code to branch on there, so this one documented sentence is read (issue #30,
 * case 4): a bad key must fail the run `auth` at once, not be searched again until its deadline.
 */
function isBadKeyText(f: ServiceBodyFields): boolean {
  return [f.msg, f.detail, f.text].some((t) => t !== undefined && /^\s*invalid user key\b/i.test(t));
}

/**
 * A 403 about the resource rather than the key: logs.yaml documents `{"error": "not_authorized",
 * "msg": "Not authorized to view logs for this instance"}` (issue #30, case 6). A key that lacks a
 * permission is named by its category; this one names none.
 */
function isResourceRefusal(f: ServiceBodyFields, body: unknown, secrets: ResponseContext['secrets']): boolean {
  return f.error === 'not_authorized' && parsePermissionCategory(body, secrets) === undefined;
}

/** A 2xx answer whose JSON body says `success: false`. */
export function isUnsuccessful(body: unknown): boolean {
  return body !== null && typeof body === 'object' && !Array.isArray(body) && (body as Record<string, unknown>).success === false;
}

/** A RateLimitedError for a 429; `waitMs` is the pause the limiter chose for the group. */
export function rateLimitedError(body: unknown, waitMs: number, ctx: ResponseContext): RateLimitedError {
  const threshold = parseRateLimitThreshold(body);
  const named = threshold === undefined ? '' : ` (threshold ${threshold})`;
  return new RateLimitedError(
    threshold,
    waitMs,
    `The marketplace rate-limited ${ctx.method} ${ctx.path}${named}; pausing that endpoint group for ${Math.round(waitMs)} ms.`,
  );
}

/** The typed error for a non-2xx answer (a 429 gets `waitMs` 0 here; the client passes the real pause). */
export function errorFromResponse(status: number, body: unknown, ctx: ResponseContext): ServiceHttpError {
  const f = readFields(body, ctx.secrets);
  const serviceText = safeServiceText(f.msg ?? f.detail ?? f.text, ctx.secrets);
  const what = `${ctx.method} ${ctx.path}`;
  const policy = statusPolicy(status);
  const detail = serviceText ? `: ${serviceText}` : '';

  // A revoked key on search is documented as 404 auth_error; users see it on other endpoints too.
  if (status === 401 || f.error === 'auth_error') return new AuthError(undefined, f.error, status);
  if ((status === 403 || status === 404) && f.error === undefined && isBadKeyText(f)) return new AuthError(undefined, undefined, status);
  if (status === 403 && isOfferRefusal(f, body, ctx)) {
    const offerId = offerIdOf(body, ctx);
    return new OfferRefusedError(
      offerId,
      f.error,
      `The marketplace refused offer ${offerId} (403${f.error ? ` ${f.error}` : ''})${detail}`,
    );
  }
  if (status === 403 && isResourceRefusal(f, body, ctx.secrets)) {
    return new ServiceHttpError(
      'bad_request',
      403,
      f.error,
      `The marketplace refused ${what} for this resource (403 ${f.error}, not a permission of the key)${detail}`,
    );
  }
  if (status === 403) return new PermissionError(parsePermissionCategory(body, ctx.secrets), undefined, f.error);
  if (status === 429) return rateLimitedError(body, 0, ctx);
  if ((status === 404 || status === 410) && mentionsNoSuchAsk(f)) {
    const offerId = offerIdOf(body, ctx);
    return new OfferGoneError(offerId, status, `Offer ${offerId} is no longer available (${status} no_such_ask).`);
  }
  if (status === 410 && f.error === 'deprecated_endpoint') {
    return new ServiceHttpError('deprecated_endpoint', 410, f.error, `${what} is deprecated by the marketplace (410).`);
  }
  if (status === 404 || status === 410) {
    return new NotFoundError(`${what}: not found (${status}${f.error ? ` ${f.error}` : ''}).`, status, f.error);
  }
  if (policy.code === 'server_error') {
    return new ServiceHttpError('server_error', status, f.error, `The marketplace failed on ${what} (${status})${detail}`, {
      retryable: policy.outcome === 'retry',
    });
  }
  return new ServiceHttpError(
    policy.code,
    status,
    f.error,
    `The marketplace rejected ${what} (${status}${f.error ? ` ${f.error}` : ''})${detail}`,
    {
      retryable: policy.outcome === 'retry',
    },
  );
}

/**
 * The error for a 2xx answer that says `success: false` (the official CLI treats it as a failure):
 * whether it is tried again is `unsuccessfulPolicy`'s call (retry-policy.ts).
 */
export function unsuccessfulError(status: number, body: unknown, ctx: ResponseContext, retryable: boolean): ServiceHttpError {
  const f = readFields(body, ctx.secrets);
  if (f.error === 'auth_error' || (f.error === undefined && isBadKeyText(f))) return new AuthError(undefined, f.error, status);
  const serviceText = safeServiceText(f.msg ?? f.detail, ctx.secrets);
  return new ServiceHttpError(
    'unsuccessful',
    status,
    f.error,
    `The marketplace did not carry out ${ctx.method} ${ctx.path} (${status} success: false${f.error ? `, ${f.error}` : ''})${serviceText ? `: ${serviceText}` : ''}`,
    { retryable },
  );
}
