// The account's credit as the daemon tracks it, on fake time with a scripted users/current.
import { describe, expect, it } from 'vitest';
import type { CurrentUser } from '../../../../src/client/types.js';
import { creditOf } from '../../../../src/account/credit.js';
import { AccountWatch } from '../../../../src/daemon/money/account-watch.js';
import { BerthError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

function watch(answers: Array<CurrentUser | Error>) {
  const clock = new FakeClock();
  let calls = 0;
  let changes = 0;
  const w = new AccountWatch({
    client: {
      currentUser: async () => {
        const a = answers[Math.min(calls++, answers.length - 1)]!;
        if (a instanceof Error) throw a;
        return a;
      },
    },
    clock,
    log: silentLogger(),
    minCreditUsd: 10,
    intervalMs: 60_000,
    heldIntervalMs: 60_000,
    onChange: () => changes++,
  });
  return { w, clock, calls: () => calls, changes: () => changes };
}

describe('AccountWatch', () => {
  it('is unread until a read has answered: a failure for now is tried again within 5 s; one the key may not make answers (the credit unknown)', async () => {
    const t = watch([
      new BerthError('network', 'down', { retryable: true }),
      new BerthError('permission', 'no user_read'),
      { id: 1, credit: 3 },
    ]);
    t.w.start();
    expect(t.w.read).toBe(false);
    await t.clock.advance(1);
    // The network failed: still unread, and read again soon, not after the 60 s interval.
    expect([t.calls(), t.w.read, t.changes()]).toEqual([1, false, 0]);
    await t.clock.advance(5_000);
    // The key may not read it: answered, the credit unknown, creates not held for want of it.
    expect([t.calls(), t.w.read, t.w.credit, t.w.low, t.changes()]).toEqual([2, true, null, false, 1]);
    // Answered once: the next read after an interval, as usual.
    await t.clock.advance(60_000);
    expect([t.calls(), t.w.low, t.changes()]).toEqual([3, true, 2]);
    t.w.stop();
  });

  it('a figure the start-up checks read answers it: start then waits an interval', async () => {
    const t = watch([{ id: 1, credit: 50 }]);
    t.w.accept({ id: 1, credit: 50 });
    expect([t.w.read, t.changes()]).toEqual([true, 1]);
    t.w.start();
    await t.clock.advance(59_000);
    expect(t.calls()).toBe(0);
    t.w.stop();
  });

  it('a daemon that does not lead answers with the figure the leader stored, or, with none stored, after 30 s', async () => {
    for (const stored of [4, undefined]) {
      const clock = new FakeClock();
      const stash: { kept: number | undefined } = { kept: undefined };
      const w = new AccountWatch({
        client: { currentUser: () => Promise.reject(new Error('a daemon that does not lead never calls')) },
        clock,
        log: silentLogger(),
        minCreditUsd: 10,
        intervalMs: 300_000,
        heldIntervalMs: 30_000,
        onChange: () => undefined,
        shared: { leads: () => false, save: () => undefined, load: () => stash.kept, request: () => undefined, requests: () => undefined },
      });
      w.start();
      await clock.advance(5_000);
      expect(w.read).toBe(false);
      // The leader's first figure reaches the store.
      stash.kept = stored;
      await clock.advance(1_000);
      if (stored !== undefined) expect([w.read, w.low]).toEqual([true, true]);
      else {
        expect(w.read).toBe(false);
        await clock.advance(25_000);
        expect([w.read, w.low]).toEqual([true, false]);
      }
      w.stop();
    }
  });

  it('reads the credit every interval, tells the gate when it crosses the minimum either way, and keeps the last figure through a failed read', async () => {
    const t = watch([
      { id: 1, credit: 50 },
      { id: 1, credit: 5 },
      new BerthError('network', 'down', { retryable: true }),
      { id: 1, credit: 12 },
    ]);
    expect([t.w.credit, t.w.low, t.w.read]).toEqual([null, false, false]);
    t.w.start();
    // The first read at once (nothing has read it yet); its answer tells the gate.
    await t.clock.advance(1);
    expect([t.calls(), t.w.credit, t.w.low, t.w.read, t.changes()]).toEqual([1, 50, false, true, 1]);
    await t.clock.advance(60_000);
    expect([t.w.credit, t.w.low, t.changes()]).toEqual([5, true, 2]);
    await t.clock.advance(60_000);
    expect([t.calls(), t.w.credit, t.w.low]).toEqual([3, 5, true]);
    await t.clock.advance(60_000);
    expect([t.w.credit, t.w.low, t.changes()]).toEqual([12, false, 3]);
    t.w.stop();
    await t.clock.advance(600_000);
    expect(t.calls()).toBe(4);
  });

  it('reads at once when asked (a low_credit webhook), one read in flight however often it is asked', async () => {
    const t = watch([{ id: 1, credit: 3 }]);
    t.w.start();
    await Promise.all([t.w.checkNow(), t.w.checkNow(), t.w.checkNow()]);
    expect([t.calls(), t.w.low]).toEqual([1, true]);
    // The next periodic read counts from this one.
    await t.clock.advance(59_999);
    expect(t.calls()).toBe(1);
    await t.clock.advance(1);
    expect(t.calls()).toBe(2);
    t.w.stop();
  });

  it('reads `credit` only: `balance` is another figure, and none is unknown (issue #30, case 6)', () => {
    expect(creditOf({ id: 1, credit: 4, balance: 9 })).toBe(4);
    // A real record: no create is held for the zero balance of an account with $17.50 of credit.
    expect(creditOf({ id: 1, balance: 0.0, credit: 17.5 })).toBe(17.5);
    // Without a credit the figure is unknown: a balance of 0 must not stand in for it and hold creates.
    expect(creditOf({ id: 1, balance: 0 })).toBeNull();
    expect(creditOf({ id: 1, balance: 9 })).toBeNull();
    expect(creditOf({ id: 1 })).toBeNull();
  });
});
