// The one periodic loop of the daemon, on fake time: exact schedules, never a sleep.
import { describe, expect, it } from 'vitest';
import { PeriodicLoop } from '../../src/periodic-loop.js';
import { FakeClock } from '../helpers/fake-clock.js';

/** A loop whose rounds are recorded (monotonic ms at their start) and may be held open or made to fail. */
function loop(
  options: {
    intervalMs?: number | (() => number | null);
    backoff?: ConstructorParameters<typeof PeriodicLoop>[0]['backoff'];
    /** Each round fails with this (a throw) while set. */
    fail?: () => Error | undefined;
    /** Rounds return a promise that the test ends (`release`). */
    async?: boolean;
  } = {},
) {
  const clock = new FakeClock();
  const starts: number[] = [];
  const errors: Array<{ message: string; failures: number }> = [];
  let release: (() => void) | undefined;
  let reject: ((err: Error) => void) | undefined;
  const l = new PeriodicLoop({
    clock,
    intervalMs: options.intervalMs ?? 1000,
    backoff: options.backoff,
    onError: (err, failures) => errors.push({ message: (err as Error).message, failures }),
    run: () => {
      starts.push(clock.monotonic());
      const err = options.fail?.();
      if (!options.async) {
        if (err) throw err;
        return;
      }
      return new Promise<void>((res, rej) => {
        release = res;
        reject = rej;
      });
    },
  });
  return {
    l,
    clock,
    starts,
    errors,
    release: () => release!(),
    reject: (err: Error) => reject!(err),
  };
}

describe('PeriodicLoop', () => {
  it('runs a round every interval, the first one interval after start', async () => {
    const t = loop();
    t.l.start();
    await t.clock.advance(999);
    expect(t.starts).toEqual([]);
    await t.clock.advance(3001);
    expect(t.starts).toEqual([1000, 2000, 3000, 4000]);
    expect(t.clock.pending).toBe(1);
  });

  it('starts the first round when told to, and times the next from the end of a slow round', async () => {
    const t = loop({ async: true });
    t.l.start(0);
    await t.clock.advance(0);
    expect(t.starts).toEqual([0]);
    // The round takes 2.5 s: no round overlaps it, and the next comes an interval after its end.
    await t.clock.advance(2500);
    expect(t.clock.pending).toBe(0);
    t.release();
    await t.clock.advance(999);
    expect(t.starts).toEqual([0]);
    await t.clock.advance(1);
    expect(t.starts).toEqual([0, 3500]);
  });

  it('asks the interval afresh for each round, and waits to be asked while it is null', async () => {
    let every: number | null = 1000;
    const t = loop({ intervalMs: () => every });
    t.l.start();
    await t.clock.advance(1000);
    // Asked as the round at 1000 ended: 1000. The round at 2000 asks again.
    every = 5000;
    await t.clock.advance(6000);
    expect(t.starts).toEqual([1000, 2000, 7000]);
    every = null;
    await t.clock.advance(100_000);
    expect(t.starts).toEqual([1000, 2000, 7000, 12_000]);
    expect(t.clock.pending).toBe(0);
    // Idle: a round runs when asked for.
    t.l.soon(10);
    await t.clock.advance(10);
    expect(t.starts).toEqual([1000, 2000, 7000, 12_000, 107_010]);
  });

  it('checks now while waiting: runs at once and times the next round from this one', async () => {
    const t = loop();
    t.l.start();
    await t.clock.advance(400);
    await t.l.checkNow();
    expect(t.starts).toEqual([400]);
    expect(t.clock.pending).toBe(1);
    await t.clock.advance(999);
    expect(t.starts).toEqual([400]);
    await t.clock.advance(1);
    expect(t.starts).toEqual([400, 1400]);
  });

  it('checks now while a round runs: joins it (one round in flight however often asked)', async () => {
    const t = loop({ async: true });
    t.l.start();
    await t.clock.advance(1000);
    let joined = 0;
    void t.l.checkNow().then(() => joined++);
    void t.l.checkNow().then(() => joined++);
    await t.clock.advance(300);
    expect([t.starts, joined]).toEqual([[1000], 0]);
    t.release();
    await t.clock.settle();
    expect(joined).toBe(2);
    await t.clock.advance(1000);
    expect(t.starts).toEqual([1000, 2300]);
  });

  it('stops while waiting: the armed round never runs', async () => {
    const t = loop();
    t.l.start();
    await t.clock.advance(500);
    t.l.stop();
    expect(t.clock.pending).toBe(0);
    await t.clock.advance(10_000);
    expect(t.starts).toEqual([]);
    expect(t.l.stopped).toBe(true);
    // Nothing starts it again.
    await t.l.checkNow();
    t.l.soon(0);
    t.l.start();
    await t.clock.advance(10_000);
    expect(t.starts).toEqual([]);
  });

  it('stops while a round runs: that round finishes, and none follows (even a failed one)', async () => {
    const t = loop({ async: true, backoff: { firstMs: 100, maxMs: 100 } });
    t.l.start();
    await t.clock.advance(1000);
    let done = false;
    void t.l.checkNow().then(() => (done = true));
    t.l.stop();
    t.reject(new Error('aborted by the stop'));
    await t.clock.settle();
    expect(done).toBe(true);
    // The failure is still reported (the owner knows it stopped: `stopped`).
    expect(t.errors).toEqual([{ message: 'aborted by the stop', failures: 1 }]);
    await t.clock.advance(10_000);
    expect(t.starts).toEqual([1000]);
    expect(t.clock.pending).toBe(0);
  });

  it('brings the next round to within a time: an earlier armed one stands, a later one moves', async () => {
    const t = loop({ intervalMs: 10_000 });
    t.l.start();
    t.l.soon(3000);
    t.l.soon(5000);
    expect(t.clock.pending).toBe(1);
    await t.clock.advance(3000);
    expect(t.starts).toEqual([3000]);
    await t.clock.advance(10_000);
    expect(t.starts).toEqual([3000, 13_000]);
  });

  it('asked for soon while a round runs: the next starts within that of its end, or sooner by its interval', async () => {
    const t = loop({ async: true, intervalMs: 10_000 });
    t.l.start();
    await t.clock.advance(10_000);
    t.l.soon(0);
    await t.clock.advance(200);
    t.release();
    await t.clock.advance(0);
    // Due at 10 000 (when asked), so at once after the round ended.
    expect(t.starts).toEqual([10_000, 10_200]);
    t.l.soon(50_000);
    t.release();
    await t.clock.advance(10_000);
    expect(t.starts).toEqual([10_000, 10_200, 20_200]);
    t.l.stop();
    t.release();
  });

  it('drops the armed round when told, and waits to be asked', async () => {
    const t = loop({ intervalMs: 1000 });
    t.l.start();
    t.l.cancelPending();
    await t.clock.advance(5000);
    expect(t.starts).toEqual([]);
    t.l.soon(1000);
    await t.clock.advance(1000);
    expect(t.starts).toEqual([6000]);
  });

  it('survives a failing round and reports it, with the failures in a row counted; a round that goes through resets the count', async () => {
    let failing = true;
    const t = loop({ fail: () => (failing ? new Error('store locked') : undefined) });
    t.l.start();
    await t.clock.advance(3000);
    expect(t.starts).toEqual([1000, 2000, 3000]);
    expect(t.errors).toEqual([
      { message: 'store locked', failures: 1 },
      { message: 'store locked', failures: 2 },
      { message: 'store locked', failures: 3 },
    ]);
    failing = false;
    await t.clock.advance(1000);
    failing = true;
    await t.clock.advance(1000);
    expect(t.errors.at(-1)).toEqual({ message: 'store locked', failures: 1 });
  });

  it('survives a rejected round and a report that throws', async () => {
    const clock = new FakeClock();
    const starts: number[] = [];
    const l = new PeriodicLoop({
      clock,
      intervalMs: 1000,
      run: () => {
        starts.push(clock.monotonic());
        return Promise.reject(new Error('down'));
      },
      onError: () => {
        throw new Error('the report fails too');
      },
    });
    l.start();
    await clock.advance(3000);
    expect(starts).toEqual([1000, 2000, 3000]);
    // checkNow resolves: a failure is reported, never thrown.
    await expect(l.checkNow()).resolves.toBeUndefined();
    l.stop();
  });

  it('backs off after failures: the first wait, doubled per failure in a row up to the cap, then the interval again', async () => {
    let failing = true;
    const t = loop({ intervalMs: 1000, backoff: { firstMs: 2000, maxMs: 30_000 }, fail: () => (failing ? new Error('x') : undefined) });
    t.l.start();
    await t.clock.advance(1000);
    // Waits 2, 4, 8, 16, 30, 30 s between the failing rounds.
    await t.clock.advance(2000 + 4000 + 8000 + 16_000 + 30_000 + 30_000);
    expect(t.starts).toEqual([1000, 3000, 7000, 15_000, 31_000, 61_000, 91_000]);
    failing = false;
    await t.clock.advance(30_000);
    expect(t.starts.at(-1)).toBe(121_000);
    await t.clock.advance(1000);
    expect(t.starts.at(-1)).toBe(122_000);
  });

  it('retries a failed round with back-off even when the loop has no interval, and goes idle once one goes through', async () => {
    let failing = true;
    const t = loop({ intervalMs: () => null, backoff: { firstMs: 1000, maxMs: 4000 }, fail: () => (failing ? new Error('x') : undefined) });
    t.l.soon(0);
    await t.clock.advance(0);
    await t.clock.advance(1000 + 2000);
    failing = false;
    await t.clock.advance(4000);
    expect(t.starts).toEqual([0, 1000, 3000, 7000]);
    expect(t.clock.pending).toBe(0);
  });

  it('takes up to `jitter` of each back-off wait off at random, within bounds', async () => {
    for (const [r, expected] of [
      [0, 8000],
      [0.5, 6000],
      [0.999, 4004],
    ] as const) {
      const t = loop({ backoff: { firstMs: 8000, maxMs: 8000, jitter: 0.5, random: () => r }, fail: () => new Error('x') });
      t.l.start();
      await t.clock.advance(1000);
      await t.clock.advance(expected - 1);
      expect(t.starts).toEqual([1000]);
      await t.clock.advance(1);
      expect(t.starts).toEqual([1000, 1000 + expected]);
      t.l.stop();
    }
  });

  it('without jitter the back-off waits are exact (no random source is read)', async () => {
    let read = 0;
    const t = loop({
      backoff: {
        firstMs: 500,
        maxMs: 500,
        random: () => {
          read++;
          return 0.9;
        },
      },
      fail: () => new Error('x'),
    });
    t.l.start();
    await t.clock.advance(2000);
    expect(t.starts).toEqual([1000, 1500, 2000]);
    expect(read).toBe(0);
  });

  it('runs a synchronous round synchronously (checkNow has done its work when it returns)', () => {
    const t = loop();
    void t.l.checkNow();
    expect(t.starts).toEqual([0]);
    expect(t.clock.pending).toBe(1);
  });
});
