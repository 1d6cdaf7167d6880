// Typed errors for all of berth. Code branches on `code`, never on message text.
// Whether a service fault is retried is decided by `retryable`, set from the one policy table in
// src/client/retry-policy.ts; everything else here is final unless marked otherwise.
//
// Messages never contain secrets: API keys, instance keys, webhook secrets and env values are not
// interpolated anywhere an error is built.

const ERROR_CODES = [
  'auth', // 401: missing, invalid, deleted or reset API key
  'permission', // 403: the key lacks a permission category
  'offer_gone', // 404/410 no_such_ask: the offer was rented or never existed
  'offer_refused', // 403 about one offer (error 403/3586 "not your own"): that offer, not the key
  'not_found', // an instance or other resource that does not exist
  'rate_limited', // 429
  'server_error', // 5xx
  'network', // connection refused/reset, DNS
  'timeout', // connect, headers or body timeout
  'deprecated_endpoint', // 410 deprecated_endpoint
  'bad_request', // 400 and other 4xx the caller must fix
  'bad_response', // a body berth cannot use (wrong shape, not JSON)
  'unsuccessful', // a 2xx whose body says `success: false`: the call did not do its job
  'ambiguous', // a create whose outcome is unknown: reconcile by label before anything else
  'aborted', // the caller's signal fired
  'config', // invalid configuration
  'spec', // invalid job spec
  'store', // database problem (locked by another daemon, corrupt, ...)
  'daemon_stopping', // the daemon is shutting down and takes no new work (the control API answers 503)
  'control_rejected', // the control API refused a request: bad token, unknown run, idempotency conflict, ...
  'daemon_unreachable', // CLI could not reach the daemon
  'over_cap', // a payment the caps refuse (a raised bid past budget.max_usd_per_hour/_per_day or the run's budget)
  'ssh_key', // berth's SSH key cannot be used (file readable by others, encrypted, not a private key)
  'ssh_unreachable', // no SSH endpoint of the instance answered (refused, timed out, closed before the login)
  'ssh_auth_refused', // the instance's sshd refused berth's key
  'ssh_host_key_changed', // the instance offered a host key other than the one pinned at the first login
  'ssh_dropped', // an SSH session that was logged in ended without berth closing it
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export interface BerthErrorOptions {
  cause?: unknown;
  retryable?: boolean;
}

export class BerthError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: BerthErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
  }

  /** The `{kind, message}` shape used in run errors and control API responses. */
  toJSON(): { kind: ErrorCode; message: string } {
    return { kind: this.code, message: this.message };
  }
}

/** Any non-2xx answer from the service; subclasses narrow the meaning. */
export class ServiceHttpError extends BerthError {
  readonly status: number;
  /** The service's `error` field (e.g. `no_such_ask`), when the body had one. */
  readonly serviceCode: string | undefined;

  constructor(code: ErrorCode, status: number, serviceCode: string | undefined, message: string, options: BerthErrorOptions = {}) {
    super(code, message, options);
    this.status = status;
    this.serviceCode = serviceCode;
  }
}

/** A rejected key: a 401, or `error: auth_error` under any status (search answers a bad key with 404). */
export class AuthError extends ServiceHttpError {
  constructor(message?: string, serviceCode?: string, status = 401) {
    super(
      'auth',
      status,
      serviceCode,
      message ??
        `The marketplace rejected the API key (${status}${serviceCode ? ` ${serviceCode}` : ''}): check BERTH_API_KEY (a typo, or a deleted, reset or expired key).`,
    );
  }
}

export class PermissionError extends ServiceHttpError {
  /** The permission category the key lacks, when the service named it. */
  readonly category: string | undefined;

  constructor(category: string | undefined, message?: string, serviceCode?: string) {
    super(
      'permission',
      403,
      serviceCode,
      message ??
        (category
          ? `The API key lacks the "${category}" permission (403): use a key whose permissions include it.`
          : 'The API key lacks a permission this call needs (403): use a key with misc, user_read, instance_read and instance_write.'),
    );
    this.category = category;
  }
}

export class OfferGoneError extends ServiceHttpError {
  readonly offerId: number;
  constructor(offerId: number, status: number, message?: string) {
    super('offer_gone', status, 'no_such_ask', message ?? `Offer ${offerId} is no longer available.`);
    this.offerId = offerId;
  }
}

/** A 403 about one offer, not about the key (create: "error 403/3586: Offer N is not your own"). */
export class OfferRefusedError extends ServiceHttpError {
  readonly offerId: number;
  constructor(offerId: number, serviceCode: string | undefined, message?: string) {
    super('offer_refused', 403, serviceCode, message ?? `The marketplace refused offer ${offerId} (403).`);
    this.offerId = offerId;
  }
}

export class NotFoundError extends ServiceHttpError {
  constructor(message: string, status = 404, serviceCode?: string) {
    super('not_found', status, serviceCode, message);
  }
}

export class RateLimitedError extends ServiceHttpError {
  /** Threshold parsed from the 429 `detail` (requests per second as the service counts them), if any. */
  readonly threshold: number | undefined;
  /** How long the endpoint group pauses before calls resume. */
  readonly waitMs: number;
  constructor(threshold: number | undefined, waitMs: number, message: string) {
    super('rate_limited', 429, 'rate_limit_exceeded', message, { retryable: true });
    this.threshold = threshold;
    this.waitMs = waitMs;
  }
}

/** A create whose outcome is unknown: the request may have been accepted. Never retried blindly. */
export class AmbiguousCreateError extends BerthError {
  readonly offerId: number;
  readonly label: string;
  constructor(offerId: number, label: string, cause: unknown) {
    super('ambiguous', `The create on offer ${offerId} may or may not have succeeded; look for label ${label} before retrying.`, {
      cause,
    });
    this.offerId = offerId;
    this.label = label;
  }
}

export class ConfigError extends BerthError {
  readonly field: string | undefined;
  constructor(message: string, field?: string, cause?: unknown) {
    super('config', message, { cause });
    this.field = field;
  }
}

export interface SpecIssue {
  /** JSON path of the problem, e.g. `$.search.filters.num_gpus.eq`. */
  path: string;
  message: string;
}

export class SpecError extends BerthError {
  readonly issues: SpecIssue[];
  constructor(issues: SpecIssue[]) {
    super('spec', `Invalid job spec: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
    this.issues = issues;
  }
}

export class StoreError extends BerthError {
  constructor(message: string, cause?: unknown, retryable = false) {
    super('store', message, { cause, retryable });
  }
}

/**
 * A write the store refused (disk full, the database locked by another program, a Postgres server
 * gone or cut off): retried later.
 */
export class StoreWriteError extends StoreError {
  /** The database's code: SQLite's (SQLITE_FULL, SQLITE_BUSY) or, on Postgres, its SQLSTATE or the connection's (ECONNREFUSED). */
  readonly sqliteCode: string;
  constructor(sqliteCode: string, cause?: unknown) {
    super(
      sqliteCode.startsWith('SQLITE_')
        ? `The store cannot be written now (${sqliteCode}): the disk may be full or another program holds berth.db; try again soon.`
        : `The store cannot be written now (${sqliteCode}): the Postgres server may be down, restarting or out of reach; try again soon.`,
      cause,
      true,
    );
    this.sqliteCode = sqliteCode;
  }
}

/**
 * A fenced write (src/store/leases.ts) found that this daemon no longer holds the run's lease: it
 * expired or another daemon took the run over. Nothing was written; the run is no longer this
 * daemon's to act for. Not retryable: retrying cannot make the lease this daemon's again.
 */
export class LeaseLostError extends StoreError {
  readonly runId: string;
  constructor(runId: string) {
    super(`This daemon no longer holds the lease of run ${runId}: another daemon owns it now; nothing was written.`);
    this.runId = runId;
  }
}

/**
 * JSON has no Infinity: `1e309` parses to it, and a schema then sees "a number that is not a
 * number". Both the spec and the config word that case with this sentence.
 */
export const NOT_FINITE_MESSAGE = 'is too large to be a number (JSON numbers beyond ±1.8e308, such as 1e309, become Infinity)';

export function isNonFiniteNumber(v: unknown): boolean {
  return typeof v === 'number' && !Number.isFinite(v);
}

/**
 * What a run's `error` (and an event's, and a log line's `err`) may say it was: an error code, a
 * bug (`internal`), a destroy the list did not confirm, or one of the run's own limits.
 */
export const RUN_ERROR_KINDS = [
  ...ERROR_CODES,
  'internal', // not a typed error: a bug in berth
  'not_confirmed', // a destroy was accepted but the instance is still listed
  'deadline', // deadline_s passed before an instance was running
  'attempts_exhausted', // max_attempts offers failed
  'no_offers', // nothing usable matched, the relax ladder spent
  'upgrade', // the run was saved by a berth whose snapshot this one cannot read
  'max_runtime', // expired: max_runtime_s of running was reached
  'budget', // expired: budget_usd was spent, or cannot pay for any matching offer to boot
  'task_failed', // the task (`run`) exited non-zero, max_restarts spent: `exit_code` says how
  'exit_unknown', // the task stopped its own instance, but its log could not be read: how it ended is unknown
  'idle', // expired: the GPU stayed idle for idle_timeout_s
  'image_unavailable', // the image cannot be pulled on any host (name, tag or registry login)
] as const;
export type RunErrorKind = (typeof RUN_ERROR_KINDS)[number];
const RUN_ERROR_KIND_SET: ReadonlySet<string> = new Set(RUN_ERROR_KINDS);

export function isRunErrorKind(v: unknown): v is RunErrorKind {
  return typeof v === 'string' && RUN_ERROR_KIND_SET.has(v);
}

export interface RunError {
  kind: RunErrorKind;
  message: string;
  /** `task_failed`: the task's exit code. */
  exit_code?: number;
}

/**
 * The one conversion of any thrown value into `{kind, message}`: for run errors, events, control
 * API answers and logs. Secret-free, since typed errors never interpolate secrets. Anything else
 * whose `code` is a run error kind keeps it (the machine's own `{code: 'not_confirmed'}`); a system
 * error (ENOENT, SQLITE_BUSY...) is not one and reads as `internal`.
 */
export function toRunError(err: unknown): RunError {
  if (err instanceof BerthError) return err.toJSON();
  const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  if (isRunErrorKind(code) && 'message' in (err as object)) {
    return { kind: code, message: String((err as { message: unknown }).message) };
  }
  if (err instanceof Error) return { kind: 'internal', message: err.message };
  return { kind: 'internal', message: String(err) };
}
