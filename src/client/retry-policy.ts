// The ONE place that decides what a failed call means: retry it, stop, pause for a rate limit, or
// (for a call that must not run twice, like a create) report an unknown outcome.
//
// Two tables: HTTP statuses the service answered with, and system/undici error codes raised when no
// answer came. A status means the service answered, so the request's outcome is known; a transport
// error may or may not have reached the service, which is what `reached` records. Everything else in
// the client asks these tables (through the functions below) and never branches on statuses itself.
import { BerthError, type ErrorCode } from '../errors.js';
import type { ClientOperation } from './events.js';

/** What to do after one attempt failed. */
export type Outcome =
  | 'retry' // transient: try again after a backoff
  | 'rate_limited' // 429: pause the endpoint group, then try again
  | 'final'; // the caller must act (bad key, missing permission, gone, bad request)

/** Whether a request that failed without an answer may have been processed by the service. */
export type Reached =
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
export const STATUS_POLICY: Readonly<Record<number, StatusPolicy>> = {
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
export const TRANSPORT_POLICY: Readonly<Record<string, TransportPolicy>> = {
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
export const UNSUCCESSFUL_POLICY: Readonly<Partial<Record<ClientOperation, Outcome>>> = {
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
