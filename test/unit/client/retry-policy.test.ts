import { describe, expect, it } from 'vitest';
import { AuthError, BerthError, RateLimitedError, ServiceHttpError } from '../../../src/errors.js';
import {
  failsRun,
  isAmbiguousForNonIdempotent,
  outcomeOf,
  RUN_POLICY,
  runPolicyOf,
  statusPolicy,
  transportErrorCode,
  transportPolicy,
} from '../../../src/client/retry-policy.js';

describe('retry policy: HTTP statuses', () => {
  it.each([400, 401, 403, 404, 410])('%i is final', (status) => {
    expect(statusPolicy(status).outcome).toBe('final');
  });
  it('503 is retried as a server error (the service did not take the request)', () => {
    expect(statusPolicy(503)).toEqual({ outcome: 'retry', code: 'server_error' });
  });
  it.each([500, 502, 504, 599])('%i is retried, and marked as an answer after which a create may have happened', (status) => {
    expect(statusPolicy(status)).toEqual({ outcome: 'retry', code: 'server_error', mayHaveActed: true });
  });
  it('429 pauses the group and retries', () => {
    expect(statusPolicy(429)).toEqual({ outcome: 'rate_limited', code: 'rate_limited' });
  });
  it('unlisted statuses fall back by class', () => {
    expect(statusPolicy(418).outcome).toBe('final');
    expect(statusPolicy(599).outcome).toBe('retry');
  });
  it('names the error code for auth and permission', () => {
    expect(statusPolicy(401).code).toBe('auth');
    expect(statusPolicy(403).code).toBe('permission');
  });
});

describe('retry policy: transport errors', () => {
  it.each(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT'])('%s is retried and never reached the service', (code) => {
    const p = transportPolicy(code);
    expect(p.outcome).toBe('retry');
    expect(p.reached).toBe('no');
    expect(isAmbiguousForNonIdempotent(p)).toBe(false);
  });
  it.each(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])(
    '%s is retried but may have reached the service (ambiguous for a create)',
    (code) => {
      const p = transportPolicy(code);
      expect(p.outcome).toBe('retry');
      expect(isAmbiguousForNonIdempotent(p)).toBe(true);
    },
  );
  it('timeouts are typed as timeout, resets as network', () => {
    expect(transportPolicy('UND_ERR_HEADERS_TIMEOUT').code).toBe('timeout');
    expect(transportPolicy('ECONNRESET').code).toBe('network');
  });
  it('an unknown failure is retried but treated as possibly sent', () => {
    expect(transportPolicy(undefined)).toEqual({ outcome: 'retry', code: 'network', reached: 'maybe' });
    expect(transportPolicy('EWHATEVER').reached).toBe('maybe');
  });
  it('our own closed agent is final', () => {
    expect(transportPolicy('UND_ERR_CLOSED').outcome).toBe('final');
  });
  it('finds the code down the cause chain and inside an AggregateError', () => {
    const inner = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(transportErrorCode(new Error('fetch failed', { cause: inner }))).toBe('ECONNREFUSED');
    expect(transportErrorCode(new AggregateError([new Error('x'), inner]))).toBe('ECONNREFUSED');
    expect(transportErrorCode(new Error('plain'))).toBeUndefined();
  });
});

describe('retry policy: outcome of a thrown error', () => {
  it('follows the typed error', () => {
    expect(outcomeOf(new AuthError())).toBe('final');
    expect(outcomeOf(new RateLimitedError(4.5, 100, 'x'))).toBe('rate_limited');
    expect(outcomeOf(new ServiceHttpError('server_error', 503, undefined, 'x', { retryable: true }))).toBe('retry');
    expect(outcomeOf(new BerthError('bad_response', 'x'))).toBe('final');
    expect(outcomeOf(new TypeError('bug'))).toBe('final');
  });
});

describe('run policy: what an error means for the run', () => {
  it('only a rejected key, a missing permission and a refused search fail a run; only a create can skip an offer or reconcile', () => {
    const failing = Object.entries(RUN_POLICY)
      .filter(([, p]) => p.search === 'fail_run' || p.create === 'fail_run')
      .map(([code]) => code);
    expect(failing.sort()).toEqual(['auth', 'bad_request', 'permission']);
    expect(Object.values(RUN_POLICY).every((p) => (p.search as string) !== 'skip_offer' && (p.search as string) !== 'reconcile')).toBe(
      true,
    );
  });

  it('a rejected key or a missing permission fails the run, whichever step met it', () => {
    for (const err of [new AuthError(), new BerthError('permission', 'no')]) {
      expect(runPolicyOf(err)).toEqual({ search: 'fail_run', create: 'fail_run' });
      expect(failsRun(err)).toBe(true);
    }
  });
  it('a refused search fails the run; a refused create fails only its attempt', () => {
    expect(runPolicyOf(new BerthError('bad_request', 'no'))).toEqual({ search: 'fail_run', create: 'end_attempt' });
  });
  it('a gone or refused offer is skipped, an unknown create outcome is reconciled, a stop is a stop', () => {
    expect(runPolicyOf(new BerthError('offer_gone', 'x')).create).toBe('skip_offer');
    expect(runPolicyOf(new BerthError('offer_refused', 'x')).create).toBe('skip_offer');
    expect(runPolicyOf(new BerthError('ambiguous', 'x')).create).toBe('reconcile');
    expect(runPolicyOf(new BerthError('aborted', 'x'))).toEqual({ search: 'stop', create: 'stop' });
  });
  it('transient faults are searched again later and end a create attempt; so is anything untyped (a bug)', () => {
    for (const err of [new BerthError('network', 'x'), new RateLimitedError(1, 10, 'x'), new Error('bug'), 'text', { code: 'EWHATEVER' }]) {
      expect(runPolicyOf(err)).toEqual({ search: 'retry_later', create: 'end_attempt' });
      expect(failsRun(err)).toBe(false);
    }
  });
});
