// The limiter on a fake clock: every schedule below is exact, whatever the machine's load.
import { afterEach, describe, expect, it } from 'vitest';
import { createLimiter, type Limiter } from '../../../src/client/limiter.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { testConfig } from './fake-server.js';

let limiter: Limiter | undefined;
let clock: FakeClock;
afterEach(async () => {
  await limiter?.close();
  limiter = undefined;
});

const noJitter = () => 0;

function make(rate: NonNullable<Parameters<typeof testConfig>[0]>['rate'], opts: { maxPauseMs?: number; random?: () => number } = {}) {
  clock = new FakeClock(0, { timeoutTurns: 20 });
  const resumed: string[] = [];
  limiter = createLimiter(testConfig({ rate }).rate_limits, {
    clock,
    random: opts.random ?? noJitter,
    maxPauseMs: opts.maxPauseMs,
    onResume: (g) => resumed.push(g),
  });
  return { limiter, resumed };
}

/** Schedules `n` calls of `group` at once and records the fake time each one ran at. */
function burstOf(
  l: Limiter,
  group: 'search' | 'list' | 'show' | 'create' | 'destroy',
  n: number,
  work?: () => Promise<void>,
): { times: number[]; done: Promise<unknown> } {
  const times: number[] = [];
  const done = Promise.all(
    Array.from({ length: n }, () =>
      l.schedule(group, async () => {
        times.push(clock.now());
        await work?.();
      }),
    ),
  );
  return { times, done };
}

describe('limiter', () => {
  it("spaces calls exactly 1/per_s apart with burst 1 (the service's minimum interval)", async () => {
    const { limiter: l } = make({ list: { per_s: 2, burst: 1 } });
    const { times, done } = burstOf(l, 'list', 5);
    await clock.advance(2000);
    await done;
    expect(times).toEqual([0, 500, 1000, 1500, 2000]);
    expect(l.stats().list).toMatchObject({ scheduled: 5, sent: 5, mode: 'flowing' });
    await clock.advance(500);
    expect(l.stats().list).toMatchObject({ mode: 'full', refilling: false });
  });

  it('lets a burst through at once, then the steady rate', async () => {
    const { limiter: l } = make({ show: { per_s: 4, burst: 3 } });
    const { times, done } = burstOf(l, 'show', 6);
    await clock.advance(1000);
    await done;
    expect(times).toEqual([0, 0, 0, 250, 500, 750]);
  });

  it('accrues nothing while full and arms no timer: after a quiet spell the next two calls are still a whole interval apart', async () => {
    const { limiter: l } = make({ list: { per_s: 1, burst: 1 } });
    await burstOf(l, 'list', 1).done;
    await clock.advance(1000);
    expect(l.stats().list).toMatchObject({ mode: 'full', refilling: false });
    expect(clock.pending).toBe(0);
    await clock.advance(60_000);
    const { times, done } = burstOf(l, 'list', 2);
    await clock.advance(1000);
    await done;
    expect(times).toEqual([61_000, 62_000]);
  });

  it('counts the interval from the call, not from a bucket that filled while a slow call held the only slot', async () => {
    const { limiter: l } = make({ list: { per_s: 1, burst: 1, max_concurrent: 1 } });
    const slow = burstOf(l, 'list', 1, () => clock.sleep(1600));
    const next = burstOf(l, 'list', 2);
    await clock.advance(3000);
    await Promise.all([slow.done, next.done]);
    // The bucket is full at 1000 but the slot is free only at 1600; the third call is 1 s after that.
    expect([...slow.times, ...next.times]).toEqual([0, 1600, 2600]);
  });

  it('a call that has a token runs at once, without waiting for a timer turn (#20 item 4)', async () => {
    // No setTimeout turns: a call that needed bottleneck's queue would not run before the next one.
    clock = new FakeClock(0);
    limiter = createLimiter(testConfig({ rate: { show: { per_s: 4, burst: 2 } } }).rate_limits, { clock, random: noJitter });
    let ran = 0;
    const call = limiter.schedule('show', async () => ++ran);
    await Promise.resolve();
    expect(ran).toBe(1);
    await expect(call).resolves.toBe(1);
    expect(limiter.stats().show).toMatchObject({ scheduled: 1, sent: 1, queued: 0 });
  });

  it('calls that went at once leave queued calls no stale tokens: the rate holds across both paths', async () => {
    const { limiter: l } = make({ show: { per_s: 4, burst: 3 } });
    const times: number[] = [];
    for (let i = 0; i < 3; i++) await l.schedule('show', async () => void times.push(clock.now()));
    const { times: queued, done } = burstOf(l, 'show', 2);
    await clock.advance(1000);
    await done;
    expect([...times, ...queued]).toEqual([0, 0, 0, 250, 500]);
    // Idle again, full again: the next call goes at once.
    await clock.advance(1000);
    expect(l.stats().show).toMatchObject({ mode: 'full', refilling: false });
    await l.schedule('show', async () => void times.push(clock.now()));
    expect(times.at(-1)).toBe(2000);
  });

  it('a queued call keeps its place: a later call with a token does not overtake it', async () => {
    const { limiter: l } = make({ list: { per_s: 1, burst: 1 } });
    const order: string[] = [];
    const first = l.schedule('list', async () => void order.push('a'));
    const second = l.schedule('list', async () => void order.push('b'));
    await clock.advance(1000);
    const third = l.schedule('list', async () => void order.push('c'));
    await clock.advance(2000);
    await Promise.all([first, second, third]);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  it('a background call (the task probe) queues behind every other call of its group, even one queued after it (#37)', async () => {
    const { limiter: l } = make({ list: { per_s: 1, burst: 1 } });
    const order: string[] = [];
    const call = (name: string, background: boolean) =>
      l.schedule(
        'list',
        async () => {
          order.push(`${name}@${clock.now()}`);
        },
        undefined,
        { background },
      );
    const first = call('probe-1', true); // takes the only token at once
    const queued = [call('probe-2', true), call('probe-3', true)];
    const failureLog = call('failure-log', false); // joins the queue after the probe's reads
    await clock.advance(3000);
    await Promise.all([first, ...queued, failureLog]);
    expect(order).toEqual(['probe-1@0', 'failure-log@1000', 'probe-2@2000', 'probe-3@3000']);
  });

  it('caps calls in flight with max_concurrent', async () => {
    const { limiter: l } = make({ list: { per_s: 1000, burst: 100, max_concurrent: 2 } });
    let inFlight = 0;
    let peak = 0;
    const { done } = burstOf(l, 'list', 8, async () => {
      peak = Math.max(peak, ++inFlight);
      await clock.sleep(20);
      inFlight--;
    });
    await clock.advance(200);
    await done;
    expect(peak).toBe(2);
  });

  it('a 429 pauses only its group for ~1/threshold, then resumes it with one probe', async () => {
    const { limiter: l, resumed } = make({ show: { per_s: 10, burst: 1 }, search: { per_s: 10, burst: 1 } });
    const info = l.pause('show', 2);
    expect(info.pauseMs).toBe(500);
    expect(l.stats().show).toMatchObject({ paused: true, mode: 'paused' });
    await clock.settle();
    const show = burstOf(l, 'show', 2);
    const search = burstOf(l, 'search', 1);
    await clock.advance(700);
    await Promise.all([show.done, search.done]);
    expect(search.times).toEqual([0]);
    expect(show.times).toEqual([500, 600]);
    expect(resumed).toEqual(['show']);
    expect(l.stats().show).toMatchObject({ paused: false, rateLimited: 1, pauses: 1, pausedMs: 500 });
    expect(l.stats().search).toMatchObject({ paused: false, rateLimited: 0 });
  });

  it('grows the pause with consecutive 429s and starts over after a success', async () => {
    const { limiter: l } = make({}, { maxPauseMs: 10_000 });
    const first = l.pause('create', 10).pauseMs; // 100 ms
    // A second 429 from the same burst shares the running pause instead of doubling it.
    expect(l.pause('create', 10)).toMatchObject({ consecutive: 1, pauseMs: 100 });
    await clock.advance(100);
    const second = l.pause('create', 10).pauseMs;
    await clock.advance(200);
    l.succeeded('create');
    const third = l.pause('create', 10).pauseMs;
    expect([first, second, third]).toEqual([100, 200, 100]);
    expect(l.stats().create.rateLimited).toBe(4);
  });

  it('pauses create for at least its penalty_s, and never past the cap with jitter (#14 item 26) unless the interval itself is longer', async () => {
    clock = new FakeClock(0, { timeoutTurns: 20 });
    const cfg = testConfig({ rate: { create: { per_s: 3, burst: 1, penalty_s: 12 } } });
    limiter = createLimiter(cfg.rate_limits, { clock, random: () => 0.999, maxPauseMs: 15_000 });
    expect(limiter.pause('create', 4.5).pauseMs).toBe(12_000);
    expect(limiter.pause('list', 0.1).pauseMs).toBe(14_995); // 10 s with +49.95% jitter
    expect(limiter.pause('show', 0.08).pauseMs).toBe(15_000); // 12.5 s, 18.7 s jittered: held at the cap
    // The service's own interval (20 s) wins over the cap: a retry sooner is refused and counted.
    expect(limiter.pause('bid', 0.05).pauseMs).toBe(20_000);
  });

  it('waits until a resume and wakes every waiter once', async () => {
    const { limiter: l } = make({});
    l.pause('list', 1);
    let woke = 0;
    void l.waitUntilResumed('list').then(() => woke++);
    void l.waitUntilResumed('list').then(() => woke++);
    await clock.advance(999);
    expect(woke).toBe(0);
    await clock.advance(1);
    expect(woke).toBe(2);
    await expect(l.waitUntilResumed('list')).resolves.toBeUndefined();
  });

  it('a cancelled wait rejects at once with code aborted, and the call never runs', async () => {
    const { limiter: l } = make({});
    l.pause('list', 0.5); // 2 s
    const ac = new AbortController();
    let ran = false;
    const call = l.schedule('list', async () => (ran = true), ac.signal);
    await clock.advance(30);
    ac.abort();
    await expect(call).rejects.toMatchObject({ code: 'aborted' });
    await clock.advance(3000);
    expect(ran).toBe(false);
  });

  describe('wouldWait: a read-only peek at whether a call scheduled now would wait (bulk destroys, #39)', () => {
    it('is false while a token is there and true once it is taken, until the next one accrues', async () => {
      const { limiter: l } = make({ destroy: { per_s: 2, burst: 1 } });
      expect(l.wouldWait('destroy')).toBe(false);
      const call = l.schedule('destroy', async () => {});
      expect(l.wouldWait('destroy')).toBe(true);
      await call;
      await clock.advance(499);
      expect(l.wouldWait('destroy')).toBe(true);
      await clock.advance(1);
      expect(l.wouldWait('destroy')).toBe(false);
      // Other groups are their own.
      expect(l.wouldWait('show')).toBe(false);
    });

    it('takes nothing: peeking any number of times leaves the token to the next call', async () => {
      const { limiter: l } = make({ destroy: { per_s: 1, burst: 1 } });
      for (let i = 0; i < 5; i++) expect(l.wouldWait('destroy')).toBe(false);
      const { times, done } = burstOf(l, 'destroy', 2);
      await clock.advance(1000);
      await done;
      expect(times).toEqual([0, 1000]);
      expect(l.stats().destroy).toMatchObject({ scheduled: 2, sent: 2 });
    });

    it('is true while a call is queued, while the group is paused, and while every slot is held', async () => {
      const { limiter: l } = make({ destroy: { per_s: 1, burst: 1 }, list: { per_s: 1000, burst: 100, max_concurrent: 1 } });
      const { done } = burstOf(l, 'destroy', 2);
      await clock.advance(999);
      // The second call waits in the queue; a token arriving now is its, not a newcomer's.
      expect(l.wouldWait('destroy')).toBe(true);
      await clock.advance(1);
      await done;
      await clock.advance(1000);
      expect(l.wouldWait('destroy')).toBe(false);
      l.pause('destroy', 1);
      expect(l.wouldWait('destroy')).toBe(true);
      await clock.advance(1000);
      expect(l.wouldWait('destroy')).toBe(false);

      let release!: () => void;
      const held = l.schedule('list', () => new Promise<void>((r) => (release = r)));
      expect(l.wouldWait('list')).toBe(true);
      release();
      await held;
      expect(l.wouldWait('list')).toBe(false);
    });
  });

  describe('rate share (daemons sharing one API key, #21)', () => {
    it('lets through its fraction of the configured rate: with share 1/3 a group allowing 3/s lets through 1/s', async () => {
      const { limiter: l } = make({ list: { per_s: 3, burst: 1 } });
      l.setShare(1 / 3);
      expect(l.stats().list).toMatchObject({ perS: 1, burst: 1 });
      expect(l.share()).toBeCloseTo(1 / 3);
      const { times, done } = burstOf(l, 'list', 4);
      await clock.advance(3000);
      await done;
      expect(times).toEqual([0, 1000, 2000, 3000]);
    });

    it('slows queued calls without dropping any, and 1 restores the configured rate', async () => {
      const { limiter: l } = make({ list: { per_s: 2, burst: 1 } });
      const { times, done } = burstOf(l, 'list', 6);
      await clock.advance(500);
      expect(times).toEqual([0, 500]);
      // Two daemons now: the next token comes a whole 1 s after the last call, not 500 ms.
      l.setShare(1 / 2);
      await clock.advance(2000);
      expect(times).toEqual([0, 500, 1500, 2500]);
      l.setShare(1);
      await clock.advance(1000);
      await done;
      expect(times).toEqual([0, 500, 1500, 2500, 3000, 3500]);
      expect(l.stats().list).toMatchObject({ perS: 2, burst: 1, scheduled: 6, sent: 6, queued: 0 });
    });

    it('scales the burst too, keeping at least one token', async () => {
      const { limiter: l } = make({ show: { per_s: 4, burst: 3 }, list: { per_s: 1, burst: 1 } });
      l.setShare(1 / 2);
      expect(l.stats().show).toMatchObject({ perS: 2, burst: 1 });
      expect(l.stats().list).toMatchObject({ perS: 0.5, burst: 1 });
      const { times, done } = burstOf(l, 'show', 3);
      await clock.advance(1000);
      await done;
      expect(times).toEqual([0, 500, 1000]);
    });

    it('takes tokens back from a full burst when the share shrinks', async () => {
      const { limiter: l } = make({ show: { per_s: 4, burst: 4 } });
      l.setShare(1 / 4);
      const { times, done } = burstOf(l, 'show', 3);
      await clock.advance(2000);
      await done;
      // One token left of four, then one a second.
      expect(times).toEqual([0, 1000, 2000]);
    });

    it('gives a group its own share when told (the leader takes the larger part of the list budget)', () => {
      const { limiter: l } = make({ list: { per_s: 1, burst: 2 }, show: { per_s: 2, burst: 2 } });
      l.setShare(1 / 3, { list: 1 / 2 });
      expect(l.stats().list).toMatchObject({ perS: 0.5, burst: 1 });
      expect(l.stats().show.perS).toBeCloseTo(2 / 3);
      expect(() => l.setShare(1 / 3, { list: 2 })).toThrow(RangeError);
    });

    it('refuses a share outside (0, 1]', () => {
      const { limiter: l } = make({});
      expect(() => l.setShare(0)).toThrow(RangeError);
      expect(() => l.setShare(1.5)).toThrow(RangeError);
      expect(() => l.setShare(Number.NaN)).toThrow(RangeError);
      expect(l.share()).toBe(1);
    });
  });
});
