// The create actor's reading of the client's typed errors, with a real store in a temp directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import type { MarketClient } from '../../../src/client/types.js';
import { systemClock } from '../../../src/clock.js';
import { AuthError, OfferRefusedError, PermissionError } from '../../../src/errors.js';
import { MachineQuarantine } from '../../../src/daemon/machine-quarantine.js';
import { OfferClaims } from '../../../src/daemon/offer-claims.js';
import { makeRunActors } from '../../../src/daemon/run-actors.js';
import { parseJobSpec, resolveJobSpec } from '../../../src/job-spec/validate.js';
import { openStore, type Store } from '../../../src/store/index.js';

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-actors-'));
  store = openStore({ home: dir, lock: false });
  store.runs.insert({ id: 'run1', name: 'j', specJson: '{}', createdAt: 0 });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const spec = resolveJobSpec(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1 }), {
  max_attempts: 3,
  boot_timeout_s: 60,
  deadline_s: 600,
  destroy_retry_max_delay_s: 5,
  outage_backoff_s: 1,
  gone_offers_per_search: 4,
  machine_quarantine_s: 0,
  relax: [],
});

function actors(createInstance: MarketClient['createInstance']) {
  const client = { createInstance } as unknown as MarketClient;
  return makeRunActors({
    client,
    clock: systemClock,
    store,
    specOf: () => spec,
    reconcileGraceMs: 10,
    claims: new OfferClaims(),
    lists: { findLabel: async () => null },
    quarantine: new MachineQuarantine(0),
  });
}

const create = (fn: MarketClient['createInstance']) =>
  toPromise(createActor(actors(fn).createInstance, { input: { runId: 'run1', n: 1, offerId: 31, machineId: 310, dphTotal: 0.5, bidPrice: null } }).start());

describe('create actor', () => {
  it('a 403 about the offer ("not your own") moves on like a gone offer: the offer is blocked, the run goes on', async () => {
    const out = await create(async () => {
      throw new OfferRefusedError(31, 'invalid_args', 'The marketplace refused offer 31 (403 invalid_args): error 403/3586: Offer 31 is not your own.');
    });
    expect(out).toMatchObject({ kind: 'offer_gone', detail: expect.stringContaining('403') });
    expect(store.attempts.get('run1', 1)).toMatchObject({ create_state: 'offer_gone' });
  });

  it('a permission 403 or a rejected key fails the run (the actor rejects with it)', async () => {
    await expect(create(async () => Promise.reject(new PermissionError('instance_write')))).rejects.toMatchObject({ code: 'permission' });
    store.runs.insert({ id: 'run2', name: 'j', specJson: '{}', createdAt: 0 });
    const a = actors(async () => Promise.reject(new AuthError(undefined, 'auth_error', 404)));
    await expect(toPromise(createActor(a.createInstance, { input: { runId: 'run2', n: 1, offerId: 32, machineId: 320, dphTotal: 0.5, bidPrice: null } }).start())).rejects.toMatchObject({
      code: 'auth',
    });
  });
});
