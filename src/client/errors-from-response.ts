// Turns a non-2xx answer of the service into one of berth's typed errors. Bodies come in three
// forms (generic `{success, error, msg}`, rate-limit `{detail}`, and plain text), so everything
// here reads them defensively. Service text is copied into messages only after secrets are
// scrubbed and the text is shortened: a message must never carry the API key.
import {
  AuthError,
  NotFoundError,
  OfferGoneError,
  PermissionError,
  RateLimitedError,
  ServiceHttpError,
} from '../errors.js';
import { statusPolicy } from './retry-policy.js';

export interface ResponseContext {
  method: string;
  /** Path without query (ids only, never secrets). */
  path: string;
  /** The offer a create was aimed at, to name it in OfferGoneError. */
  offerId?: number;
  /** Strings to scrub from any service text copied into a message (the API key, ...). */
  secrets?: readonly string[];
}

interface ServiceBodyFields {
  error: string | undefined;
  msg: string | undefined;
  detail: string | undefined;
  text: string | undefined;
}

const MAX_SERVICE_TEXT = 200;

function readFields(body: unknown): ServiceBodyFields {
  if (typeof body === 'string') return { error: undefined, msg: undefined, detail: undefined, text: body };
  if (body && typeof body === 'object') {
    const o = body as Record<string, unknown>;
    const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
    return { error: str(o.error), msg: str(o.msg) ?? str(o.message), detail: str(o.detail), text: undefined };
  }
  return { error: undefined, msg: undefined, detail: undefined, text: undefined };
}

/** Service text made safe for a message: secrets replaced, length bounded, one line. */
export function safeServiceText(text: string | undefined, secrets: readonly string[] = []): string | undefined {
  if (!text) return undefined;
  let out = text;
  for (const secret of secrets) if (secret) out = out.split(secret).join('[redacted]');
  out = out.replace(/\s+/g, ' ').trim();
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
export function parsePermissionCategory(body: unknown): string | undefined {
  const f = readFields(body);
  for (const text of [f.msg, f.detail, f.text]) {
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

function offerIdOf(body: unknown, ctx: ResponseContext): number {
  if (ctx.offerId !== undefined) return ctx.offerId;
  const askId = body && typeof body === 'object' ? (body as Record<string, unknown>).ask_id : undefined;
  return typeof askId === 'number' ? askId : Number.NaN;
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
  const f = readFields(body);
  const serviceText = safeServiceText(f.msg ?? f.detail ?? f.text, ctx.secrets);
  const what = `${ctx.method} ${ctx.path}`;
  const policy = statusPolicy(status);

  if (status === 401) return new AuthError(undefined, f.error);
  if (status === 403) return new PermissionError(parsePermissionCategory(body), undefined, f.error);
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
  const detail = serviceText ? `: ${serviceText}` : '';
  if (policy.code === 'server_error') {
    return new ServiceHttpError('server_error', status, f.error, `The marketplace failed on ${what} (${status})${detail}`, {
      retryable: policy.outcome === 'retry',
    });
  }
  return new ServiceHttpError(policy.code, status, f.error, `The marketplace rejected ${what} (${status}${f.error ? ` ${f.error}` : ''})${detail}`, {
    retryable: policy.outcome === 'retry',
  });
}
