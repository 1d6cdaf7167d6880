import { afterEach, describe, expect, it } from 'vitest';
import { createLimiter, type Limiter } from '../../../src/client/limiter.js';
import { testConfig } from './fake-server.js';

let limiter: Limiter | undefined;
afterEach(async () => {
  await limiter?.close();
  limiter = undefined;
});

const noJitter = () => 0;

describe('limiter', () => {
  it('holds a group to its steady rate after the burst', async () => {
    const cfg = testConfig({ rate: { search: { per_s: 20, burst: 1 } } });
    limiter = createLimiter(cfg.rate_limits);
    const start = performance.now();
    const times = await Promise.all(Array.from({ length: 21 }, () => limiter!.schedule('search', async () => performance.now() - start)));
    const last = Math.max(...times);
    // 1 token at once, then 20 more at 20/s: ~1 s.
    expect(last).toBeGreaterThan(900);
    expect(last).toBeLessThan(1400);
    expect(limiter.stats().search).toMatchObject({ scheduled: 21, sent: 21 });
  });

  it('stops refilling once the bucket is full and idle, and keeps its rate when work returns', async () => {
    const cfg = testConfig({ rate: { search: { per_s: 20, burst: 2 } } });
    limiter = createLimiter(cfg.rate_limits);
    expect(limiter.stats().search.refilling).toBe(false);
    await Promise.all(Array.from({ length: 4 }, () => limiter!.schedule('search', async () => 1)));
    expect(limiter.stats().search.refilling).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // two tokens at 20/s: full again after ~100 ms
    expect(limiter.stats().search.refilling).toBe(false);
    expect(limiter.stats().show.refilling).toBe(false);
    const start = performance.now();
    const times = await Promise.all(Array.from({ length: 12 }, () => limiter!.schedule('search', async () => performance.now() - start)));
    // The full bucket lets 2 through at once (never more), then 10 more at 20/s: ~0.5 s.
    expect(times.filter((t) => t < 40).length).toBeLessThanOrEqual(2);
    expect(Math.max(...times)).toBeGreaterThan(400);
    expect(Math.max(...times)).toBeLessThan(1500);
  });

  it('accrues nothing while the bucket is full, even with a call still in flight', async () => {
    const cfg = testConfig({ rate: { list: { per_s: 1, burst: 1 } } });
    limiter = createLimiter(cfg.rate_limits);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // A slow call keeps the group busy while its bucket refills to full at ~1 s.
    const slow = limiter.schedule('list', () => sleep(1600));
    await sleep(1500);
    const start = performance.now();
    const [b, c] = await Promise.all([0, 1].map(() => limiter!.schedule('list', async () => performance.now() - start)));
    // b takes the one token; c must wait a whole interval from then, as the service's own bucket
    // would, not only the rest of a second counted from when the bucket was already full.
    expect(b!).toBeLessThan(400);
    expect(c! - b!).toBeGreaterThan(900);
    await slow;
  });

  it('accrues nothing while the bucket is full and calls wait for a free slot', async () => {
    const cfg = testConfig({ rate: { list: { per_s: 1, burst: 1, max_concurrent: 1 } } });
    limiter = createLimiter(cfg.rate_limits);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const start = performance.now();
    const slow = limiter.schedule('list', () => sleep(1600));
    // b waits for the slot (not a token) while the bucket fills at ~1 s; c comes just after b starts.
    const b = limiter.schedule('list', async () => performance.now() - start);
    const bAt = await b;
    const cAt = await limiter.schedule('list', async () => performance.now() - start);
    expect(bAt).toBeGreaterThan(1500);
    expect(cAt - bAt).toBeGreaterThan(900);
    await slow;
  });

  it('lets a burst through at once', async () => {
    const cfg = testConfig({ rate: { show: { per_s: 1, burst: 5 } } });
    limiter = createLimiter(cfg.rate_limits);
    const start = performance.now();
    await Promise.all(Array.from({ length: 5 }, () => limiter!.schedule('show', async () => 1)));
    expect(performance.now() - start).toBeLessThan(200);
  });

  it('caps calls in flight with max_concurrent', async () => {
    const cfg = testConfig({ rate: { list: { per_s: 1000, burst: 100, max_concurrent: 2 } } });
    limiter = createLimiter(cfg.rate_limits);
    let inFlight = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 8 }, () =>
        limiter!.schedule('list', async () => {
          peak = Math.max(peak, ++inFlight);
          await new Promise((r) => setTimeout(r, 20));
          inFlight--;
        }),
      ),
    );
    expect(peak).toBe(2);
  });

  it('a 429 pauses only its group, then resumes it', async () => {
    const cfg = testConfig();
    const resumed: string[] = [];
    limiter = createLimiter(cfg.rate_limits, { random: noJitter, onResume: (g) => resumed.push(g) });
    const info = limiter.pause('show', 2); // ~1/threshold = 500 ms
    expect(info.pauseMs).toBe(500);
    expect(limiter.stats().show.paused).toBe(true);
    // Let the reservoir be emptied (bottleneck's calls are asynchronous).
    await new Promise((r) => setTimeout(r, 20));
    const start = performance.now();
    const [showAt, searchAt] = await Promise.all([
      limiter.schedule('show', async () => performance.now() - start),
      limiter.schedule('search', async () => performance.now() - start),
    ]);
    expect(searchAt).toBeLessThan(100);
    expect(showAt).toBeGreaterThan(400);
    expect(resumed).toEqual(['show']);
    expect(limiter.stats().show).toMatchObject({ paused: false, rateLimited: 1, pauses: 1 });
    expect(limiter.stats().search).toMatchObject({ paused: false, rateLimited: 0 });
  });

  it('grows the pause with consecutive 429s and starts over after a success', async () => {
    limiter = createLimiter(testConfig().rate_limits, { random: noJitter, maxPauseMs: 10_000 });
    const first = limiter.pause('create', 10).pauseMs; // 100 ms
    // A second 429 from the same burst shares the running pause instead of doubling it.
    expect(limiter.pause('create', 10).consecutive).toBe(1);
    await limiter.waitUntilResumed('create');
    const second = limiter.pause('create', 10).pauseMs;
    await limiter.waitUntilResumed('create');
    limiter.succeeded('create');
    const third = limiter.pause('create', 10).pauseMs;
    expect([first, second, third]).toEqual([100, 200, 100]);
    expect(limiter.stats().create.rateLimited).toBe(4);
  });

  it('waits 1 s when the 429 named no threshold, and never beyond the cap', () => {
    limiter = createLimiter(testConfig().rate_limits, { random: noJitter, maxPauseMs: 300 });
    expect(limiter.pause('other', undefined).pauseMs).toBe(300);
  });

  it('adds jitter to the pause', () => {
    limiter = createLimiter(testConfig().rate_limits, { random: () => 0.999, maxPauseMs: 10_000 });
    const { pauseMs } = limiter.pause('destroy', 1);
    expect(pauseMs).toBeGreaterThan(1400);
    expect(pauseMs).toBeLessThanOrEqual(1500);
  });

  it('a cancelled wait rejects at once with code aborted', async () => {
    limiter = createLimiter(testConfig().rate_limits, { random: noJitter });
    limiter.pause('list', 0.5); // 2 s
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 30);
    const start = performance.now();
    await expect(limiter.schedule('list', async () => 'ran', ac.signal)).rejects.toMatchObject({ code: 'aborted' });
    expect(performance.now() - start).toBeLessThan(500);
  });
});
