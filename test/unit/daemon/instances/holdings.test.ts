import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Instance } from '../../../../src/client/types.js';
import { attemptLabel, parseLabel } from '../../../../src/daemon/instances/labels.js';
import { MachineQuarantine } from '../../../../src/daemon/runs/machine-quarantine.js';
import { OfferClaims } from '../../../../src/daemon/runs/offer-claims.js';
import {
  billingNow,
  billOf,
  billsSince,
  classifyInstance,
  spentUsd,
  usdPerHour,
  usdSince,
} from '../../../../src/daemon/instances/holdings.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-own-'));
  store = openStore({ home: dir });
  store.runs.insert({ id: 'live', name: 'a', specJson: '{}', createdAt: 1 });
  store.runs.insert({ id: 'ended', name: 'b', specJson: '{}', createdAt: 1 });
  store.runs.setState('ended', 'cancelled', null, 2);
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const live = (runId: string) => store.runs.get(runId)?.ended_at === null;
function instance(id: number, label: string | null): Instance {
  return { id, label, machine_id: 1, actual_status: 'running' };
}
function journal(runId: string, n: number) {
  store.attempts.beginCreate({ runId, n, offerId: 10 + n, machineId: 1, dphTotal: 1, label: attemptLabel(store.storeId, runId, n), at: 1 });
}

describe('labels', () => {
  it('round-trips store, run and attempt, and rejects other labels', () => {
    expect(parseLabel(attemptLabel('abcd1234', 'r1', 3))).toEqual({ storeId: 'abcd1234', runId: 'r1', n: 3 });
    for (const l of [null, '', 'my-job', 'berth:a:b', 'berth:a:b:0', 'berth:a:b:x', 'berth::b:1']) expect(parseLabel(l)).toBeNull();
  });
});

describe('who owns a listed instance', () => {
  it('never touches instances without this store prefix', () => {
    expect(classifyInstance(instance(1, 'my-own-box'), store, live)).toEqual({ kind: 'foreign' });
    expect(classifyInstance(instance(1, attemptLabel('otherstore', 'live', 1)), store, live)).toEqual({ kind: 'foreign' });
  });

  it('owns the recorded instance of the live attempt of a live run', () => {
    journal('live', 1);
    store.attempts.adopt('live', 1, 500, 2);
    expect(classifyInstance(instance(500, attemptLabel(store.storeId, 'live', 1)), store, live).kind).toBe('owned');
    store.attempts.setOutcome('live', 1, 'running', null, null);
    expect(classifyInstance(instance(500, attemptLabel(store.storeId, 'live', 1)), store, live).kind).toBe('owned');
  });

  it('adopts an instance whose create was journaled but whose id was never recorded', () => {
    journal('live', 1);
    expect(classifyInstance(instance(500, attemptLabel(store.storeId, 'live', 1)), store, live)).toEqual({
      kind: 'adopt',
      runId: 'live',
      n: 1,
    });
  });

  it.each([
    ['its run ended', 'ended', () => journal('ended', 1)],
    ['its run is unknown', 'nosuchrun', () => undefined],
    ['its attempt was never journaled', 'live', () => undefined],
    [
      'its attempt already ended',
      'live',
      () => {
        journal('live', 1);
        store.attempts.adopt('live', 1, 500, 2);
        store.attempts.setOutcome('live', 1, 'exited', 'x', 3);
      },
    ],
    [
      'its attempt gave up on the create',
      'live',
      () => {
        journal('live', 1);
        store.attempts.notCreated('live', 1, 'failed', 'not found');
      },
    ],
    [
      'its attempt owns another instance',
      'live',
      () => {
        journal('live', 1);
        store.attempts.adopt('live', 1, 499, 2);
      },
    ],
  ])('destroys it as an orphan when %s', (_, runId, arrange) => {
    arrange();
    expect(classifyInstance(instance(500, attemptLabel(store.storeId, runId, 1)), store, live).kind).toBe('orphan');
  });
});

describe('offer claims between runs of one daemon', () => {
  it('lets one run at a time hold an offer, and frees it on release', () => {
    const claims = new OfferClaims();
    expect(claims.claim(7, 'a')).toBe(true);
    expect(claims.claim(7, 'b')).toBe(false);
    expect(claims.heldByOther(7, 'b')).toBe('a');
    expect(claims.heldByOthers('b')).toEqual([7]);
    expect(claims.heldByOthers('a')).toEqual([]);
    claims.release('a');
    expect(claims.claim(7, 'b')).toBe(true);
  });

  it('keeps the claim of the next attempt when the end of the previous one is recorded late', () => {
    const claims = new OfferClaims();
    claims.claim(7, 'a');
    claims.claim(8, 'a'); // the next attempt started before attempt 1's end was written
    claims.release('a', 7);
    expect(claims.claim(8, 'b')).toBe(false);
    claims.release('a', 8);
    expect(claims.claim(8, 'b')).toBe(true);
  });

  it('moves a run to its next offer (a run holds one offer at a time)', () => {
    const claims = new OfferClaims();
    claims.claim(7, 'a');
    claims.claim(8, 'a');
    expect(claims.claim(7, 'b')).toBe(true);
    expect(claims.heldByOther(8, 'b')).toBe('a');
  });
});

describe('machine quarantine', () => {
  it('puts offers on recently failed machines last, keeping the order, until the quarantine ends', async () => {
    const clock = new FakeClock(0);
    const q = new MachineQuarantine(1000, clock);
    q.note(2);
    const offers = [{ m: 1 }, { m: 2 }, { m: 3 }, { m: 2 }];
    await clock.advance(999);
    expect(q.lastIfQuarantined(offers, (o) => o.m).map((o) => o.m)).toEqual([1, 3, 2, 2]);
    await clock.advance(1);
    expect(q.lastIfQuarantined(offers, (o) => o.m)).toBe(offers);
  });
});

describe('what bills now', () => {
  const H = 3_600_000;
  // live#1 made at 0 and running; live#2 made at H and booting; live#3 a create in flight since 2H;
  // ended#1 made at 0 and destroyed at H (its run cancelled at 2 in beforeEach).
  beforeEach(() => {
    const begin = (runId: string, n: number, dph: number, at: number) =>
      store.attempts.beginCreate({
        runId,
        n,
        offerId: 10 + n,
        machineId: 1,
        dphTotal: dph,
        label: attemptLabel(store.storeId, runId, n),
        at,
      });
    begin('live', 1, 2, 0);
    store.attempts.adopt('live', 1, 501, 0);
    store.attempts.setStatus('live', 1, { actual_status: 'running', dph_total: 2 }, 10);
    begin('live', 2, 1, H);
    store.attempts.adopt('live', 2, 502, H);
    begin('live', 3, 4, 2 * H);
    begin('ended', 1, 8, 0);
    store.attempts.adopt('ended', 1, 503, 0);
    store.attempts.destroyConfirmed('ended', 1, 503, H);
  });

  it('prices every hold that may have billed in a window, creates in flight included', () => {
    const bills = billsSince(store, 0, 3 * H);
    expect(bills.map((b) => [b.runId, b.n, b.instanceId, b.usdPerHour, b.booting]).sort()).toEqual([
      ['ended', 1, 503, 0, false],
      ['live', 1, 501, 2, false],
      ['live', 2, 502, 1, true],
      ['live', 3, null, 4, true],
    ]);
    expect(usdPerHour(bills)).toBe(7);
    // 3 h at $2 + 2 h at $1 + 1 h at $4 + the ended run's 1 h at $8.
    expect(usdSince(bills)).toBeCloseTo(6 + 2 + 4 + 8, 9);
    // The last hour only.
    expect(usdSince(bills, 2 * H)).toBeCloseTo(2 + 1 + 4, 9);
    // A window that starts after the ended run's destroy no longer holds it.
    expect(billsSince(store, 2 * H, 3 * H).map((b) => b.runId)).not.toContain('ended');
  });

  it('counts only instances made as billing now, each with its holder', () => {
    const now = billingNow(store, 3 * H);
    expect(now.n).toBe(2);
    expect(now.usdPerHour).toBe(3);
    expect(now.each.map((b) => b.instanceId).sort()).toEqual([501, 502]);
    expect(billOf(store, 'live', 2, 3 * H)?.usdPerHour).toBe(1);
    expect(billOf(store, 'ended', 1, 3 * H)?.usdPerHour).toBe(0);
    expect(billOf(store, 'live', 9, 3 * H)).toBeUndefined();
  });
});

describe('warm holds (issue #51)', () => {
  const H = 3_600_000;
  const hand = (at: number) =>
    store.warm.hand({
      instanceId: 501,
      runId: 'live',
      n: 1,
      reuseKey: 'k',
      relaxLevel: 0,
      offerId: 11,
      machineId: 1,
      gpu: { name: 'RTX 4090', count: 1 },
      dphTotal: 2,
      diskDph: 0.1,
      at,
      idleUntil: at + H,
    });
  beforeEach(() => {
    journal('live', 1);
    store.attempts.adopt('live', 1, 501, 0);
  });
  const listed = () => instance(501, attemptLabel(store.storeId, 'live', 1));

  it('holds the instance from the hand-over, and bills it there instead of the donor, once', () => {
    const h = hand(H)!;
    expect(hand(H)?.id).toBe(h.id); // repeated after a restart: the same hold
    store.runs.setState('live', 'succeeded', null, H + 5);
    expect(classifyInstance(listed(), store, live)).toEqual({ kind: 'warm', holdId: h.id, runId: 'live', n: 1 });
    const bills = billsSince(store, -Infinity, 2 * H);
    // The donor's hour at $1 (journal's dph), then the hold's hour at $2.
    expect(usdSince(bills)).toBeCloseTo(1 + 2, 9);
    expect(usdPerHour(bills)).toBe(2);
    expect(billingNow(store, 2 * H).each.map((b) => b.warmHoldId)).toEqual([h.id]);
  });

  it('passes to the taker in one step, and a released hold leaves an orphan that bills until it is gone', () => {
    const h = hand(H)!;
    store.runs.setState('live', 'succeeded', null, H);
    store.runs.insert({ id: 'next', name: 'c', specJson: '{}', createdAt: 1 });
    store.transaction(() => {
      expect(store.warm.take(h.id, 'next', 1, 2 * H)).toBe(true);
      store.attempts.beginCreate({ runId: 'next', n: 1, offerId: 11, machineId: 1, dphTotal: 2, label: 'x', at: 2 * H });
      store.attempts.adopt('next', 1, 501, 2 * H);
    });
    expect(store.warm.take(h.id, 'other', 1, 2 * H)).toBe(false); // one taker
    expect(classifyInstance(listed(), store, live)).toEqual({ kind: 'owned', runId: 'next', n: 1 });
    // Donor 1 h at $1 + hold 1 h at $2 + taker 1 h at $2: nothing counted twice.
    expect(usdSince(billsSince(store, -Infinity, 3 * H))).toBeCloseTo(1 + 2 + 2, 9);

    const other = store.warm.hand({
      ...h,
      instanceId: 502,
      runId: 'live',
      n: 2,
      reuseKey: 'k',
      relaxLevel: 0,
      offerId: 12,
      machineId: 2,
      gpu: null,
      dphTotal: 1,
      diskDph: 0,
      at: H,
      idleUntil: 2 * H,
    });
    expect(other).toBeNull(); // attempt 2 was never journaled on 502: nothing to hand
  });

  it('a released hold is an orphan, billing until a sweep confirms it gone', () => {
    const h = hand(H)!;
    store.runs.setState('live', 'succeeded', null, H);
    expect(store.warm.release(h.id, 'idle_s passed', 2 * H)).toBe(true);
    expect(store.warm.take(h.id, 'next', 1, 2 * H)).toBe(false);
    expect(classifyInstance(listed(), store, live)).toMatchObject({ kind: 'orphan', reason: 'its warm hold was released (idle_s passed)' });
    expect(billingNow(store, 3 * H).usdPerHour).toBe(2);
    store.warm.gone(501, 3 * H);
    expect(billingNow(store, 4 * H).usdPerHour).toBe(0);
    expect(usdSince(billsSince(store, -Infinity, 4 * H))).toBeCloseTo(1 + 2 * 2, 9);
    expect(spentUsd(store, 4 * H)).toBeCloseTo(1 + 2 * 2, 9);
  });
});
