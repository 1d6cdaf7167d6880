// The ONE place that decides what a failed call means: retry it, stop, pause for a rate limit, or
// (for a call that must not run twice, like a create) report an unknown outcome; and, once the
// client has given up, what the error means for the run that made the call.
//
// Three tables: HTTP statuses the service answered with, and system/undici error codes raised when
// no answer came (both for the client's own retries); and RUN_POLICY, by error code, for the run
// (fail it, skip the offer, search again later...). A status means the service answered, so the
// request's outcome is known; a transport error may or may not have reached the service, which is
// what `reached` records. The client, the run actors (`failsRun`, whose verdict they hand to the
// run machine) and the create actor ask these tables through the functions below and never branch on codes themselves.
import { BerthError, isRunErrorKind, type ErrorCode, type RunErrorKind } from '../errors.js';
import type { ClientOperation } from './events.js';

/** What to do after one attempt failed. */
export type Outcome =
  | 'retry' // transient: try again after a backoff
  | 'rate_limited' // 429: pause the endpoint group, then try again
  | 'final'; // the caller must act (bad key, missing permission, gone, bad request)

/** Whether a request that failed without an answer may have been processed by the service. */
type Reached =
  | 'no' // failed before the request left (connect refused/timed out, DNS)
  | 'maybe'; // the request was (or may have been) sent: its effect is unknown

export interface StatusPolicy {
  outcome: Outcome;
  code: ErrorCode;
  /**
   * The service may have acted before this answer: a 500 is an error inside it, possibly after the
   * side effect; a 502 or 504 comes from a gateway that gave up on it. For a create the outcome is
   * unknown. A 503 says the service did not take the request, so it is plainly retried (the
   * official client's newer version also retries 503 but not 500).
   */
  mayHaveActed?: true;
}

export interface TransportPolicy {
  outcome: Outcome;
  code: ErrorCode;
  reached: Reached;
}

/** HTTP statuses. Anything not listed falls back by class (see `statusPolicy`). */
const STATUS_POLICY: Readonly<Record<number, StatusPolicy>> = {
  400: { outcome: 'final', code: 'bad_request' },
  401: { outcome: 'final', code: 'auth' },
  403: { outcome: 'final', code: 'permission' },
  404: { outcome: 'final', code: 'not_found' },
  410: { outcome: 'final', code: 'not_found' }, // no_such_ask or deprecated_endpoint: refined by body
  429: { outcome: 'rate_limited', code: 'rate_limited' },
  500: { outcome: 'retry', code: 'server_error', mayHaveActed: true },
  502: { outcome: 'retry', code: 'server_error', mayHaveActed: true },
  503: { outcome: 'retry', code: 'server_error' },
  504: { outcome: 'retry', code: 'server_error', mayHaveActed: true },
};

/**
 * System and undici error codes. `reached: 'no'` only where the failure provably happened before
 * any byte of the request was written (the socket never connected, or the name never resolved).
 */
const TRANSPORT_POLICY: Readonly<Record<string, TransportPolicy>> = {
  // Never connected: safe to retry even a create.
  ECONNREFUSED: { outcome: 'retry', code: 'network', reached: 'no' },
  ENOTFOUND: { outcome: 'retry', code: 'network', reached: 'no' },
  EAI_AGAIN: { outcome: 'retry', code: 'network', reached: 'no' },
  ENETUNREACH: { outcome: 'retry', code: 'network', reached: 'no' },
  EHOSTUNREACH: { outcome: 'retry', code: 'network', reached: 'no' },
  UND_ERR_CONNECT_TIMEOUT: { outcome: 'retry', code: 'timeout', reached: 'no' },
  // Connected, then the connection broke or went silent: the service may have acted.
  ECONNRESET: { outcome: 'retry', code: 'network', reached: 'maybe' },
  EPIPE: { outcome: 'retry', code: 'network', reached: 'maybe' },
  ECONNABORTED: { outcome: 'retry', code: 'network', reached: 'maybe' },
  ETIMEDOUT: { outcome: 'retry', code: 'timeout', reached: 'maybe' },
  UND_ERR_SOCKET: { outcome: 'retry', code: 'network', reached: 'maybe' },
  UND_ERR_HEADERS_TIMEOUT: { outcome: 'retry', code: 'timeout', reached: 'maybe' },
  UND_ERR_BODY_TIMEOUT: { outcome: 'retry', code: 'timeout', reached: 'maybe' },
  // Our own agent was closed or destroyed (client.close()): nothing to retry against.
  UND_ERR_CLOSED: { outcome: 'final', code: 'network', reached: 'maybe' },
  UND_ERR_DESTROYED: { outcome: 'final', code: 'network', reached: 'maybe' },
};

/**
 * A 2xx whose body says `success: false` (the official CLI reads it as a failure): the service
 * answered and did not do it. A destroy is "not destroyed" and is tried again, like the reads; any
 * other call fails (a change is reported failed). A create never gets here as a plain failure:
 * without `new_contract` its outcome is unknown (see `mayHaveActed` above).
 */
const UNSUCCESSFUL_POLICY: Readonly<Partial<Record<ClientOperation, Outcome>>> = {
  destroy: 'retry',
  list: 'retry',
  show: 'retry',
  search: 'retry',
};

export function unsuccessfulOutcome(op: ClientOperation): Outcome {
  return UNSUCCESSFUL_POLICY[op] ?? 'final';
}

/** Unknown transport failures are retried but treated as possibly sent: the cautious reading. */
const UNKNOWN_TRANSPORT: TransportPolicy = { outcome: 'retry', code: 'network', reached: 'maybe' };

export function statusPolicy(status: number): StatusPolicy {
  const listed = STATUS_POLICY[status];
  if (listed) return listed;
  // An unknown 5xx is read the cautious way, like a 500.
  if (status >= 500) return { outcome: 'retry', code: 'server_error', mayHaveActed: true };
  return { outcome: 'final', code: 'bad_request' };
}

/** The first `code` found on the error or down its `cause` chain (undici sometimes nests them). */
export function transportErrorCode(err: unknown): string | undefined {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  // Node's happy-eyeballs connect raises an AggregateError whose members carry the codes.
  if (err instanceof AggregateError) {
    for (const inner of err.errors) {
      const code = transportErrorCode(inner);
      if (code) return code;
    }
  }
  return undefined;
}

export function transportPolicy(code: string | undefined): TransportPolicy {
  return (code && TRANSPORT_POLICY[code]) || UNKNOWN_TRANSPORT;
}

/**
 * For a call that must not run twice (create): does this transport failure leave the outcome
 * unknown? True when the request may have reached the service. An answered status never does:
 * the service said what it did.
 */
export function isAmbiguousForNonIdempotent(policy: TransportPolicy): boolean {
  return policy.reached !== 'no';
}

/**
 * The decision for any error an attempt threw. Typed errors carry `retryable`, set from the tables
 * above when they were built; anything untyped is a bug or a bad response, and is final.
 */
export function outcomeOf(err: unknown): Outcome {
  if (err instanceof BerthError) {
    if (err.code === 'rate_limited') return 'rate_limited';
    return err.retryable ? 'retry' : 'final';
  }
  return 'final';
}

/** What a search that failed (after the client's retries) means for its run. */
type SearchEffect =
  | 'fail_run' // no retry can mend it: the run fails at once with this reason
  | 'retry_later' // the service may work again: the run waits runs.outage_backoff_s and searches again
  | 'stop'; // the daemon is stopping: nothing is recorded, the next start carries on

/** What a create that failed (after the client's retries) means for its attempt and run. */
type CreateEffect =
  | 'fail_run' // no retry can mend it: the attempt ends (create_failed) and the run fails
  | 'skip_offer' // about this one offer (rented by someone else, refused): it is blocked; not counted against max_attempts
  | 'reconcile' // the create may have happened: its label is looked for before anything else
  | 'end_attempt' // this attempt failed (create_failed, counted): the next offer is tried
  | 'stop'; // the daemon is stopping: the journal stays `intent` and the next start looks for the label

export interface RunPolicy {
  search: SearchEffect;
  create: CreateEffect;
}

const TRANSIENT: RunPolicy = { search: 'retry_later', create: 'end_attempt' };

/**
 * By error code (a Record over every kind, so a new code cannot be left out). Destroys are not
 * here: a run's destroy is retried whatever failed, forever (the machine's `destroying` state).
 */
export const RUN_POLICY: Readonly<Record<RunErrorKind, RunPolicy>> = {
  auth: { search: 'fail_run', create: 'fail_run' },
  permission: { search: 'fail_run', create: 'fail_run' },
  // A search the service refuses as invalid would be refused again; a refused create is one
  // attempt's failure (its reason is listed when the run fails), and the next offer is tried.
  bad_request: { search: 'fail_run', create: 'end_attempt' },
  offer_gone: { search: 'retry_later', create: 'skip_offer' },
  offer_refused: { search: 'retry_later', create: 'skip_offer' },
  ambiguous: { search: 'retry_later', create: 'reconcile' },
  aborted: { search: 'stop', create: 'stop' },
  not_found: TRANSIENT,
  rate_limited: TRANSIENT,
  server_error: TRANSIENT,
  network: TRANSIENT,
  timeout: TRANSIENT,
  deprecated_endpoint: TRANSIENT,
  bad_response: TRANSIENT,
  unsuccessful: TRANSIENT,
  config: TRANSIENT,
  spec: TRANSIENT,
  store: TRANSIENT,
  daemon_stopping: TRANSIENT,
  control_rejected: TRANSIENT,
  daemon_unreachable: TRANSIENT,
  over_cap: TRANSIENT,
  ssh_key: TRANSIENT,
  ssh_unreachable: TRANSIENT,
  ssh_auth_refused: TRANSIENT,
  ssh_host_key_changed: TRANSIENT,
  ssh_dropped: TRANSIENT,
  internal: TRANSIENT,
  not_confirmed: TRANSIENT,
  deadline: TRANSIENT,
  attempts_exhausted: TRANSIENT,
  no_offers: TRANSIENT,
  upgrade: TRANSIENT,
  max_runtime: TRANSIENT,
  budget: TRANSIENT,
  task_failed: TRANSIENT,
  exit_unknown: TRANSIENT,
  idle: TRANSIENT,
  image_unavailable: TRANSIENT,
};

/** The row for any thrown value: by its `code`; anything untyped is `internal` (a bug, not the service's fault). */
export function runPolicyOf(err: unknown): RunPolicy {
  const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return isRunErrorKind(code) ? RUN_POLICY[code] : RUN_POLICY.internal;
}

/**
 * Whether an error a search or create rejected with fails the run at once (a rejected key, a missing
 * permission, a query the service refuses as invalid). The run actors hand this verdict to the run
 * machine with the error (src/daemon/runs/actor-failure.ts), so the machine decides on it without
 * reading this table.
 */
export function failsRun(err: unknown): boolean {
  const policy = runPolicyOf(err);
  return policy.search === 'fail_run' || policy.create === 'fail_run';
}
