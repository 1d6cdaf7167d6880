// The offers other daemons' runs are on, read from the attempts table (a real store in a temp
// directory, fake time): which attempts hold an offer, and how often the table is read.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreClaims } from '../../../../src/daemon/runs/store-claims.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

let dir: string;
let store: Store;
let clock: FakeClock;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-store-claims-'));
  store = openStore({ home: dir, lock: false });
  clock = new FakeClock(0);
  for (const id of ['r1', 'r2', 'r3', 'r4']) store.runs.insert({ id, name: 'j', specJson: '{}', createdAt: 0 });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const intent = (runId: string, offerId: number, n = 1) =>
  store.attempts.beginCreate({ runId, n, offerId, machineId: offerId * 10, dphTotal: 0.2, label: `l-${runId}-${n}`, at: 0 });

describe('store claims', () => {
  it('an attempt holds its offer from its intent until it ends, booting included; a create that made nothing holds none', () => {
    intent('r1', 11);
    intent('r2', 12);
    store.attempts.adopt('r2', 1, 900, 0);
    intent('r3', 13);
    store.attempts.notCreated('r3', 1, 'offer_gone', 'gone');
    intent('r4', 14);
    store.attempts.setOutcome('r4', 1, 'boot_timeout', null, 0);
    const claims = new StoreClaims({ attempts: store.attempts, clock, maxAgeMs: 1000 });
    expect(claims.held().sort()).toEqual([11, 12]);
    expect(claims.heldByOthers('r1')).toEqual([12]);
    expect(claims.holder(11, 'r2')).toBe('r1');
    expect(claims.holder(11, 'r1')).toBeUndefined();
    expect(claims.holder(13, 'r1')).toBeUndefined();
  });

  it("a run that ended holds no offer, whatever its last attempt's row says", () => {
    intent('r1', 11);
    store.runs.insert({ id: 'r5', name: 'j', specJson: '{}', createdAt: 0 });
    const claims = new StoreClaims({ attempts: store.attempts, clock, maxAgeMs: 1000 });
    expect(claims.holder(11, 'r5')).toBe('r1');
    store.transaction(() => store.runs.setState('r1', 'cancelled', null, 0));
    expect(claims.holder(11, 'r5')).toBeUndefined();
  });

  it('searches read the table at most once per max age; the exact read at create time is never cached', async () => {
    let reads = 0;
    const claims = new StoreClaims({
      attempts: {
        onOffers: () => (reads++, store.attempts.onOffers()),
        onOffer: (offerId, runId) => store.attempts.onOffer(offerId, runId),
      },
      clock,
      maxAgeMs: 1000,
    });
    expect(claims.held()).toEqual([]);
    intent('r1', 11);
    expect(claims.heldByOthers('r2')).toEqual([]);
    expect(claims.holder(11, 'r2')).toBe('r1');
    expect(reads).toBe(1);
    await clock.advance(1000);
    expect(claims.heldByOthers('r2')).toEqual([11]);
    expect(claims.heldByOther(11, 'r2')).toBe('r1');
    expect(reads).toBe(2);
  });

  it('a store that does not answer leaves the last read in place', async () => {
    let down = false;
    const claims = new StoreClaims({
      attempts: {
        onOffers: () => {
          if (down) throw new Error('store down');
          return store.attempts.onOffers();
        },
        onOffer: () => undefined,
      },
      clock,
      maxAgeMs: 1000,
    });
    intent('r1', 11);
    expect(claims.held()).toEqual([11]);
    down = true;
    await clock.advance(1000);
    expect(claims.held()).toEqual([11]);
  });
});
