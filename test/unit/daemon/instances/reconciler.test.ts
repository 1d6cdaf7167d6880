// The reconciler on complete sweeps: a real store in a temp directory, a scripted destroy, fake time
// and a log captured line by line.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Instance, MarketClient } from '../../../../src/client/types.js';
import { BerthError } from '../../../../src/errors.js';
import { AttemptJournal } from '../../../../src/daemon/runs/attempt-journal.js';
import { SoleOwner } from '../../../../src/daemon/cluster/run-ownership.js';
import { ALERT_AFTER } from '../../../../src/daemon/instances/destroy-alerts.js';
import { Reconciler } from '../../../../src/daemon/instances/reconciler.js';
import { createLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const RETRY_MS = 30_000;
let dir: string;
let store: Store;
let clock: FakeClock;
let lines: Array<{ level: number; msg: string }>;
let destroys: number[];
let destroyAnswer: () => Promise<'destroyed'>;
let reconciler: Reconciler;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-reconcile-'));
  store = openStore({ home: dir, lock: false });
  clock = new FakeClock();
  lines = [];
  destroys = [];
  destroyAnswer = async () => 'destroyed';
  const log = createLogger({
    destination: new Writable({
      write(chunk: Buffer, _e, cb) {
        lines.push(JSON.parse(chunk.toString('utf8')) as { level: number; msg: string });
        cb();
      },
    }),
  });
  const client = {
    destroyInstance: (id: number) => {
      destroys.push(id);
      return destroyAnswer();
    },
  } as unknown as MarketClient;
  reconciler = new Reconciler({
    store,
    journal: new AttemptJournal(store, new SoleOwner(store)),
    client,
    clock,
    log,
    isLive: (runId) => store.runs.get(runId)?.ended_at === null,
    sweptStores: new Set(['0ldst0re']),
    retryMs: RETRY_MS,
  });
});
afterEach(() => {
  reconciler.stop();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const label = (runId: string, n: number) => `berth:${store.storeId}:${runId}:${n}`;
const inst = (id: number, l: string): Instance => ({ id, label: l, machine_id: 1, actual_status: 'running' });
function journaled(runId: string, n: number, at = clock.now()) {
  if (!store.runs.get(runId)) store.runs.insert({ id: runId, name: 'j', specJson: '{}', createdAt: 0 });
  store.attempts.beginCreate({ runId, n, offerId: 7, machineId: 70, dphTotal: 0.5, label: label(runId, n), at });
}
/** One sweep at the clock's time, its handling settled. */
async function sweep(...instances: Instance[]) {
  reconciler.sweep(instances, clock.now());
  await clock.settle();
}
const alerts = () => lines.filter((l) => l.level === 50 && l.msg.startsWith('ALERT'));

describe('reconciler', () => {
  it('adopts an instance carrying the label of a journaled create, billed from the journal entry', async () => {
    journaled('r1', 1, clock.now() - 2_000);
    await sweep(inst(500, label('r1', 1)));
    expect(store.attempts.get('r1', 1)).toMatchObject({
      create_state: 'created',
      instance_id: 500,
      instance_created_at: clock.now() - 2_000,
    });
    expect(destroys).toEqual([]);
  });

  it('never touches an instance of another label or another store', async () => {
    await sweep(inst(1, 'my-box'), inst(2, 'berth:abcd9999:r1:1'));
    expect(destroys).toEqual([]);
  });

  it('destroys an orphan once per retry period while it stays listed, then confirms it gone and journals that', async () => {
    journaled('r1', 1);
    store.attempts.adopt('r1', 1, 500, clock.now());
    store.instanceKeys.put(500, 'its-own-instance-key');
    store.runs.setState('r1', 'failed', { kind: 'internal', message: 'bug' }, clock.now()); // its run ended holding it
    await sweep(inst(500, label('r1', 1)));
    expect(destroys).toEqual([500]);
    await clock.advance(RETRY_MS - 1);
    await sweep(inst(500, label('r1', 1)));
    expect(destroys).toEqual([500]);
    await clock.advance(1);
    await sweep(inst(500, label('r1', 1)));
    expect(destroys).toEqual([500, 500]);
    expect(store.events.list('r1').map((e) => e.type)).toEqual(['orphan.destroy', 'orphan.destroy']);
    await clock.advance(1_000);
    await sweep();
    expect(store.attempts.get('r1', 1)!.destroy_confirmed_at).toBe(clock.now());
    // Its key can do nothing any more: it is not kept.
    expect(store.instanceKeys.get(500)).toBeUndefined();
    await clock.advance(RETRY_MS);
    await sweep();
    expect(destroys).toEqual([500, 500]);
  });

  it('destroys every instance of a store this one replaced', async () => {
    await sweep(inst(9, 'berth:0ldst0re:rx:1'));
    expect(destroys).toEqual([9]);
  });

  it(`warns while an orphan's destroy fails, and logs ALERT at error level from failure #${ALERT_AFTER} on`, async () => {
    destroyAnswer = async () => Promise.reject(new BerthError('server_error', 'The marketplace failed (500)'));
    for (let i = 1; i <= ALERT_AFTER + 1; i++) {
      await sweep(inst(9, 'berth:0ldst0re:rx:1'));
      expect(destroys).toHaveLength(i);
      expect(alerts()).toHaveLength(Math.max(0, i - ALERT_AFTER + 1));
      await clock.advance(RETRY_MS);
    }
    expect(alerts()[0]!.msg).toContain('500');
    expect(lines.filter((l) => l.level === 40 && l.msg.includes('did not take'))).toHaveLength(ALERT_AFTER - 1);
  });

  it('counts a destroy that was accepted while the instance stays listed as a failure too', async () => {
    for (let i = 0; i <= ALERT_AFTER; i++) {
      await sweep(inst(9, 'berth:0ldst0re:rx:1'));
      await clock.advance(RETRY_MS);
    }
    expect(destroys).toHaveLength(ALERT_AFTER + 1);
    expect(alerts()).toHaveLength(1);
    expect(alerts()[0]!.msg).toContain('still listed');
  });
});
