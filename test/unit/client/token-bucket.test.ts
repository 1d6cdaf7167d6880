import { describe, expect, it } from 'vitest';
import { pauseMs, TokenBucket } from '../../../src/client/token-bucket.js';

describe('token bucket', () => {
  it('times the next token from the last one at a new, slower rate', () => {
    const b = new TokenBucket(2, 3);
    for (let i = 0; i < 3; i++) b.take(0);
    expect(b.nextChangeAt()).toBe(500);
    b.setRate(1, 2, 100);
    expect(b.nextChangeAt()).toBe(1000);
    expect(b.accrue(999)).toBe(0);
    expect(b.accrue(1000)).toBe(1);
    expect(b.accrue(2000)).toBe(1);
    expect(b.mode).toBe('full');
    expect(b.tokens).toBe(2);
  });

  it('drops tokens above a smaller burst', () => {
    const b = new TokenBucket(2, 3);
    b.take(0);
    b.setRate(1, 1, 100);
    expect(b.tokens).toBe(1);
    expect(b.mode).toBe('full');
  });

  it('a full bucket given a larger burst earns the new tokens at the rate, from now', () => {
    const b = new TokenBucket(1, 1);
    b.setRate(2, 2, 10_000);
    expect(b.mode).toBe('flowing');
    expect(b.tokens).toBe(1);
    expect(b.nextChangeAt()).toBe(10_500);
    expect(b.accrue(10_500)).toBe(1);
    expect(b.mode).toBe('full');
  });

  it('starts full, flows from the first take and is full again after one interval (burst 1)', () => {
    const b = new TokenBucket(2, 1);
    expect(b.mode).toBe('full');
    expect(b.nextChangeAt()).toBeUndefined();
    b.take(1000);
    expect(b.mode).toBe('flowing');
    expect(b.tokens).toBe(0);
    expect(b.nextChangeAt()).toBe(1500);
    expect(b.accrue(1499)).toBe(0);
    expect(b.accrue(1500)).toBe(1);
    expect(b.mode).toBe('full');
  });

  it('accrues nothing while full: a long idle spell saves up no token', () => {
    const b = new TokenBucket(1, 1);
    b.take(0);
    b.accrue(60_000);
    b.take(60_000);
    // The next token is a whole interval after this take, not early because of the idle minute.
    expect(b.nextChangeAt()).toBe(61_000);
    expect(b.accrue(60_999)).toBe(0);
  });

  it('refills a burst one token per interval and keeps counting while taken from', () => {
    const b = new TokenBucket(10, 3);
    b.take(0);
    b.take(0);
    b.take(0);
    expect(b.tokens).toBe(0);
    expect(b.accrue(250)).toBe(2); // 100 and 200 ms
    b.take(250);
    expect(b.accrue(300)).toBe(1);
    expect(b.tokens).toBe(2);
    expect(b.nextChangeAt()).toBe(400);
  });

  it('a pause empties the bucket until it ends, then hands out one probe token', () => {
    const b = new TokenBucket(1, 3);
    b.pause(5000);
    expect(b.mode).toBe('paused');
    expect(b.tokens).toBe(0);
    expect(b.accrue(10_000)).toBe(0);
    b.pause(4000); // a shorter pause does not cut the running one short
    expect(b.nextChangeAt()).toBe(5000);
    b.resume();
    expect(b.tokens).toBe(1);
    expect(b.mode).toBe('flowing');
    expect(b.accrue(9000)).toBe(0); // nothing accrues until the probe is taken
    b.take(9000);
    expect(b.nextChangeAt()).toBe(10_000);
  });

  it('a call let through during a pause leaves it paused and empty', () => {
    const b = new TokenBucket(1, 1);
    b.pause(1000);
    b.take(10);
    expect(b.mode).toBe('paused');
    expect(b.tokens).toBe(0);
  });
});

describe('pause after a 429', () => {
  const policy = { maxPauseMs: 15_000 };
  it('is ~1/threshold, doubled per 429 in a row', () => {
    expect(pauseMs(2, 1, 0, policy)).toBe(500);
    expect(pauseMs(2, 3, 0, policy)).toBe(2000);
    expect(pauseMs(undefined, 1, 0, policy)).toBe(1000);
  });

  it('never goes past the cap, jitter included (#14 item 26)', () => {
    // 10 s grown, +50% jitter would be 15 s... and 12 s jittered to 18 s is held at the cap.
    expect(pauseMs(0.1, 1, 0.999, { maxPauseMs: 12_000 })).toBe(12_000);
    for (const r of [0, 0.3, 0.6, 0.999]) expect(pauseMs(1, 20, r, policy)).toBeLessThanOrEqual(15_000);
  });

  it("is never shorter than the service's interval (1/threshold), even with a lower cap: closer retries are all refused", () => {
    expect(pauseMs(1, 1, 0, { maxPauseMs: 500 })).toBe(1000);
    expect(pauseMs(1, 26, 0.999, { maxPauseMs: 500 })).toBe(1000);
    expect(pauseMs(undefined, 3, 0, { maxPauseMs: 200 })).toBe(1000);
    // A cap above the interval still caps the growth.
    expect(pauseMs(1, 26, 0.999, { maxPauseMs: 1500 })).toBe(1500);
  });

  it('is never shorter than the endpoint penalty, even below the cap', () => {
    expect(pauseMs(4.5, 1, 0, { maxPauseMs: 15_000, penaltyMs: 12_000 })).toBe(12_000);
    expect(pauseMs(4.5, 1, 0, { maxPauseMs: 5_000, penaltyMs: 12_000 })).toBe(12_000);
  });
});
