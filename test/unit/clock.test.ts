import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS, systemClock } from '../../src/clock.js';
import { FakeClock } from '../helpers/fake-clock.js';

describe('clock', () => {
  it('ends a sleep exactly at its time on a fake clock', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    let doneAt: number | undefined;
    void clock.sleep(1500).then(() => (doneAt = clock.now()));
    await clock.advance(1499);
    expect(doneAt).toBeUndefined();
    await clock.advance(1);
    expect(doneAt).toBe(start + 1500);
  });

  it('waits past the 24.8-day setTimeout limit instead of firing at once', async () => {
    const clock = new FakeClock();
    const days30 = 30 * 86_400_000;
    expect(days30).toBeGreaterThan(MAX_TIMER_MS);
    let done = false;
    void clock.sleep(days30).then(() => (done = true));
    await clock.advance(days30 - 1);
    expect(done).toBe(false);
    await clock.advance(1);
    expect(done).toBe(true);
  });

  it('does not fire a wall-clock wait longer than setTimeout allows at once', async () => {
    const ctrl = new AbortController();
    let settled = false;
    const wait = systemClock.sleep(40 * 86_400_000, ctrl.signal).then(
      () => (settled = true),
      () => 'aborted',
    );
    await new Promise((r) => setTimeout(r, 20));
    expect(settled).toBe(false);
    ctrl.abort();
    await expect(wait).resolves.toBe('aborted');
  });

  it('rejects a sleep with an aborted error when its signal fires, and drops its timer', async () => {
    const clock = new FakeClock();
    const ctrl = new AbortController();
    const wait = clock.sleep(10_000, ctrl.signal);
    ctrl.abort();
    await expect(wait).rejects.toMatchObject({ code: 'aborted' });
    expect(clock.pending).toBe(0);
  });

  it('sleepUntil a past moment resolves at once', async () => {
    const clock = new FakeClock();
    await expect(clock.sleepUntil(clock.now() - 1)).resolves.toBeUndefined();
  });
});
