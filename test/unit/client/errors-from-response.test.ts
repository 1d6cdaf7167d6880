import { describe, expect, it } from 'vitest';
import { AuthError, NotFoundError, OfferGoneError, PermissionError, RateLimitedError, ServiceHttpError } from '../../../src/errors.js';
import {
  errorFromResponse,
  parsePermissionCategory,
  parseRateLimitThreshold,
  rateLimitedError,
} from '../../../src/client/errors-from-response.js';

const ctx = { method: 'PUT', path: '/api/v0/asks/1234567/', offerId: 1234567, secrets: ['sk-SECRET-KEY'] };

describe('429 threshold parsing', () => {
  it('reads the threshold from `detail`', () => {
    expect(parseRateLimitThreshold({ detail: 'API requests too frequent endpoint threshold=4.5' })).toBe(4.5);
  });
  it('reads the threshold from `msg` (the destroy variant)', () => {
    expect(
      parseRateLimitThreshold({ success: false, error: 'rate_limit_exceeded', msg: 'API requests too frequent endpoint threshold=3.0' }),
    ).toBe(3);
  });
  it('has none for the plain-text body', () => {
    expect(parseRateLimitThreshold('API requests too frequent')).toBeUndefined();
  });
  it('builds a RateLimitedError carrying the threshold and the pause', () => {
    const err = rateLimitedError({ detail: 'threshold=2.0' }, 750, ctx);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect(err.threshold).toBe(2);
    expect(err.waitMs).toBe(750);
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/750 ms/);
  });
});

describe('response to typed error', () => {
  it('401 is an AuthError that tells to check BERTH_API_KEY', () => {
    const err = errorFromResponse(401, { success: false, error: 'auth_error', msg: 'Invalid user key' }, ctx);
    expect(err).toBeInstanceOf(AuthError);
    expect(err.code).toBe('auth');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('BERTH_API_KEY');
  });

  it('403 names the missing permission category', () => {
    const err = errorFromResponse(403, { success: false, error: 'forbidden', msg: 'This action requires permission instance_write' }, ctx);
    expect(err).toBeInstanceOf(PermissionError);
    expect((err as PermissionError).category).toBe('instance_write');
    expect(err.message).toContain('instance_write');
  });

  it('403 without a named category still says what to do', () => {
    const err = errorFromResponse(403, { success: false, error: 'forbidden', msg: 'Forbidden' }, ctx) as PermissionError;
    expect(err.category).toBeUndefined();
    expect(err.message).toMatch(/permission/);
  });

  it('parses categories in several phrasings', () => {
    expect(parsePermissionCategory({ msg: 'missing permission: user_read' })).toBe('user_read');
    expect(parsePermissionCategory({ msg: 'key lacks instance_read' })).toBe('instance_read');
    expect(parsePermissionCategory({ msg: 'requires permission misc' })).toBe('misc');
  });

  it('404 invalid_args with no_such_ask in msg is OfferGoneError', () => {
    const err = errorFromResponse(
      404,
      {
        success: false,
        error: 'invalid_args',
        msg: 'error 404/3603: no_such_ask Instance type by id 1234567 is not available.',
        ask_id: 1234567,
      },
      ctx,
    );
    expect(err).toBeInstanceOf(OfferGoneError);
    expect((err as OfferGoneError).offerId).toBe(1234567);
    expect(err.status).toBe(404);
  });

  it('410 no_such_ask is OfferGoneError', () => {
    const err = errorFromResponse(
      410,
      { success: false, error: 'no_such_ask', msg: 'error 410/3907: no longer available' },
      { ...ctx, offerId: undefined },
    );
    expect(err).toBeInstanceOf(OfferGoneError);
    expect(err.status).toBe(410);
  });

  it('410 deprecated_endpoint has its own code', () => {
    const err = errorFromResponse(
      410,
      { success: false, error: 'deprecated_endpoint', msg: 'use v1' },
      { method: 'GET', path: '/api/v0/instances/' },
    );
    expect(err).toBeInstanceOf(ServiceHttpError);
    expect(err.code).toBe('deprecated_endpoint');
  });

  it('404 otherwise is NotFoundError', () => {
    const err = errorFromResponse(
      404,
      { success: false, error: 'no_such_instance', msg: 'gone' },
      { method: 'GET', path: '/api/v0/instances/5/' },
    );
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err.serviceCode).toBe('no_such_instance');
  });

  it('5xx is a retryable server_error, also with a text body', () => {
    const err = errorFromResponse(502, '<html>Bad Gateway</html>', ctx);
    expect(err.code).toBe('server_error');
    expect(err.retryable).toBe(true);
  });

  it('400 is final and quotes the service text without the API key', () => {
    const err = errorFromResponse(400, { success: false, error: 'invalid_args', msg: 'bad key sk-SECRET-KEY in body' }, ctx);
    expect(err.code).toBe('bad_request');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('invalid_args');
    expect(err.message).not.toContain('sk-SECRET-KEY');
  });
});
