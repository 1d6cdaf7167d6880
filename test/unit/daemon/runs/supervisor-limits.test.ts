// A run's limits (max_runtime_s, budget_usd) on fake time, through the supervisor with a real store:
// an expiry that lands while another program holds berth.db's write lock (issue #18 item 1), and a
// run held after a restored backup (item 7). The service is a scripted client that makes instance
// 500; the lists are the test's own `onSeen` / `onAbsent` calls.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Instance, MarketClient, Offer } from '../../../../src/client/types.js';
import { loadConfig } from '../../../../src/config/load.js';
import { composeRuns } from '../../../../src/daemon/runs/compose-runs.js';
import type { Supervisor } from '../../../../src/daemon/runs/supervisor.js';
import type { Submissions } from '../../../../src/daemon/runs/submission.js';
import { Releasers } from '../../../../src/releasers.js';
import { silentLogger } from '../../../../src/logger.js';
import { StoreWriteError } from '../../../../src/errors.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';
import { LeaseOwner } from '../../../../src/daemon/cluster/lease-owner.js';
import { SoleOwner, type RunOwnership } from '../../../../src/daemon/cluster/run-ownership.js';

let dir: string;
let store: Store;
let clock: FakeClock;
let supervisor: Supervisor;
let submissions: Submissions;
/** What superviseWith built: released as a stopping daemon releases it. */
let releasers: Releasers;
let destroyed: Array<{ id: number; at: number }>;
let created: number;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-limits-'));
  store = openStore({ home: dir });
  clock = new FakeClock();
  // The machine reads Date.now() in its actions: the same fake time.
  vi.spyOn(Date, 'now').mockImplementation(() => clock.now());
  destroyed = [];
  created = 0;
  ({ supervisor, submissions } = superviseWith(store));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await releasers.release();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const offer = (id: number) =>
  ({ id, machine_id: id * 10, dph_total: 3.6, dph_base: 3.6, direct_port_count: 1, gpu_ram: 24_000 }) as unknown as Offer;

function superviseWith(s: Store, ownership?: RunOwnership): { supervisor: Supervisor; submissions: Submissions } {
  const client = {
    searchOffers: async () => [offer(7), offer(8)],
    createInstance: async () => ({ instanceId: 500 + created++ }),
    destroyInstance: async (id: number) => {
      destroyed.push({ id, at: clock.now() });
    },
  } as unknown as MarketClient;
  releasers = new Releasers();
  const composed = composeRuns(
    {
      store: s,
      client,
      clock,
      lists: { findLabel: async () => null, lookAt: async () => null },
      config: loadConfig({}, {}).config,
      log: silentLogger(),
      apiKey: 'test-key',
      ownership: ownership ?? new SoleOwner(s),
    },
    releasers,
  );
  // The daemon's start-up read of the credit (issue #49: no create starts before one answered).
  composed.account.accept({ id: 1, credit: 100 });
  return composed;
}

const instance = (id: number, actual_status: string): Instance =>
  ({ id, actual_status, intended_status: 'running', cur_state: 'running', dph_total: 3.6, ssh_host: 'h', ssh_port: 22 }) as Instance;

/** Submits `limits`, and shows its instance running (ready by status). */
async function runningRun(limits: Record<string, unknown>): Promise<string> {
  supervisor.resumeAll();
  const { row } = await submissions.submit({ name: 'l', image: 'img', max_price_per_hour: 5, ready_when: 'status', ...limits });
  await clock.settle();
  expect(store.runs.get(row.id)!.state).toBe('booting');
  supervisor.onSeen([instance(500, 'running')], clock.now());
  await clock.settle();
  expect(store.runs.get(row.id)!.state).toBe('running');
  return row.id;
}

/** Lists no longer show instance `id`: its destroy is confirmed and the run ends. */
async function gone(id: number): Promise<void> {
  supervisor.onAbsent([id], clock.now());
  await clock.settle();
}

describe('an expiry while berth.db is locked by another program (issue #18 item 1)', () => {
  for (const [limit, spec] of [
    ['max_runtime_s', { max_runtime_s: 10 }],
    // $3.6/h bills $0.001 a second from the create: 0.05 is reached 50 s in (EXPIRE one poll interval before).
    ['budget_usd', { budget_usd: 0.05, boot_timeout_s: 10 }],
  ] as const) {
    it(`${limit}: the expiry lost with the write that failed is delivered once the store takes writes again`, async () => {
      const runId = await runningRun(spec);
      await clock.advance(5_000);
      const other = new Database(join(dir, 'berth.db'));
      other.exec('BEGIN IMMEDIATE'); // as `sqlite3 berth.db` holding a write transaction
      await clock.advance(60_000); // the limit passes: EXPIRE's transition cannot be stored, the run pauses
      expect(store.runs.get(runId)!.state).toBe('running');
      other.exec('COMMIT');
      other.close();
      await clock.advance(30_000); // the paused run is resumed from its last stored snapshot
      expect(store.runs.get(runId)!.state).toBe('destroying');
      expect(destroyed.map((d) => d.id)).toContain(500);
      await gone(500);
      const row = store.runs.get(runId)!;
      expect(row.state).toBe('expired');
      expect(JSON.parse(row.error_json!)).toMatchObject({ kind: limit === 'budget_usd' ? 'budget' : 'max_runtime' });
      expect(created).toBe(1); // nothing rented again for it
    });
  }

  it('a store that refuses again right after its first write back still ends the run expired', async () => {
    const runId = await runningRun({ max_runtime_s: 10 });
    const other = new Database(join(dir, 'berth.db'));
    other.exec('BEGIN IMMEDIATE');
    await clock.advance(12_000);
    // The store takes the supervisor's probe, then is locked again before the resumed run writes.
    const canWrite = store.canWrite.bind(store);
    store.canWrite = () => {
      other.exec('COMMIT');
      const ok = canWrite();
      other.exec('BEGIN IMMEDIATE');
      return ok;
    };
    await clock.advance(1_000); // resumed, and paused again at its first write
    store.canWrite = canWrite;
    other.exec('COMMIT');
    other.close();
    await clock.advance(10_000);
    expect(store.runs.get(runId)!.state).toBe('destroying');
    await gone(500);
    expect(store.runs.get(runId)!.state).toBe('expired');
  });
});

describe('a run held after a restored backup (issue #18 item 7)', () => {
  /** A running run, then the daemon stops and the store is found restored: the run is held. */
  async function heldRun(limits: Record<string, unknown>): Promise<string> {
    const runId = await runningRun(limits);
    await releasers.release(); // the daemon stops
    const other = new Database(join(dir, 'berth.db'));
    other.prepare('UPDATE runs SET held_at = ? WHERE id = ?').run(clock.now(), runId);
    other.close();
    ({ supervisor, submissions } = superviseWith(store));
    supervisor.resumeAll();
    await clock.settle();
    expect(store.runs.get(runId)!.held_at).not.toBeNull();
    return runId;
  }

  for (const [limit, spec, kind, at] of [
    ['max_runtime_s', { max_runtime_s: 30 }, 'max_runtime', 30_000],
    // $0.001 a second from the create, EXPIRE one poll interval (10 s) before 0.05 is reached.
    ['budget_usd', { budget_usd: 0.05, boot_timeout_s: 10 }, 'budget', 40_000],
  ] as const) {
    it(`${limit} keeps running while held: its instance is destroyed at the limit and the run ends expired`, async () => {
      const t0 = clock.now();
      const runId = await heldRun(spec);
      await clock.advance(at - 1_000);
      expect(destroyed).toEqual([]); // held: its instance is kept until the limit
      expect(store.runs.get(runId)!.state).toBe('running');
      await clock.advance(1_000);
      expect(destroyed.map((d) => [d.id, d.at - t0])).toEqual([[500, at]]);
      expect(store.runs.get(runId)!.held_at).toBeNull();
      await gone(500);
      const row = store.runs.get(runId)!;
      expect(row.state).toBe('expired');
      expect(JSON.parse(row.error_json!)).toMatchObject({ kind });
      expect(store.events.list(runId).find((e) => e.type === 'held.expired')?.message).toMatch(
        /held after a restore, the run reached a limit/,
      );
      expect(created).toBe(1); // nothing rented for it
    });
  }

  it('reaching its limit while berth.db is locked, it is expired once the store takes writes again', async () => {
    const runId = await heldRun({ max_runtime_s: 10 });
    const other = new Database(join(dir, 'berth.db'));
    other.exec('BEGIN IMMEDIATE');
    await clock.advance(15_000);
    expect(destroyed).toEqual([]);
    other.exec('COMMIT');
    other.close();
    await clock.advance(1_000);
    expect(destroyed.map((d) => d.id)).toEqual([500]);
    await gone(500);
    expect(store.runs.get(runId)!.state).toBe('expired');
  });
});

/** A daemon's leases on this store (its clock the fake one), renewed once. */
function daemon(id: string): LeaseOwner {
  store.leases.serverNow = () => clock.now();
  const owner = new LeaseOwner({ store, clock, daemonId: id, leaseMs: 15_000 });
  owner.renew();
  return owner;
}

describe('a run held after a restore, on a store several daemons share (issue #21)', () => {
  it('every daemon watches its limits: at max_runtime_s the one that sees it takes the run, destroys its instance, and the run ends expired', async () => {
    const first = daemon('a');
    await releasers.release();
    ({ supervisor, submissions } = superviseWith(store, first));
    const t0 = clock.now();
    const runId = await runningRun({ max_runtime_s: 30 });
    await releasers.release(); // daemon a stops and gives its leases up
    first.releaseAll();
    const other = new Database(join(dir, 'berth.db'));
    other.prepare('UPDATE runs SET held_at = ? WHERE id = ?').run(clock.now(), runId);
    other.close();

    const second = daemon('b');
    ({ supervisor, submissions } = superviseWith(store, second));
    supervisor.resumeAll();
    await clock.settle();
    expect(store.leases.get(runId)).toBeUndefined(); // held: nobody drives it
    await clock.advance(t0 + 29_000 - clock.now());
    expect(destroyed).toEqual([]);
    second.renew(); // as its cluster loop does
    await clock.advance(1_000);
    expect(destroyed.map((d) => [d.id, d.at - t0])).toEqual([[500, 30_000]]);
    expect(store.runs.get(runId)!.held_at).toBeNull();
    expect(store.leases.get(runId)).toMatchObject({ owner: 'b' });
    await gone(500);
    expect(store.runs.get(runId)!.state).toBe('expired');
    expect(store.events.list(runId).filter((e) => e.type === 'held.expired')).toHaveLength(1);
    expect(created).toBe(1);
  });
});

describe('a take-over the store fails half way (issue #21)', () => {
  it('gives its lease up instead of renewing it for a run nobody drives, and takes the run at the next try', async () => {
    await releasers.release();
    ({ supervisor, submissions } = superviseWith(store, daemon('a')));
    const runId = await runningRun({});
    await releasers.release(); // daemon a dies: its lease ends on its own
    const b = daemon('b');
    ({ supervisor, submissions } = superviseWith(store, b));
    supervisor.resumeAll();
    await clock.advance(16_000);
    b.renew();
    const append = store.events.append.bind(store.events);
    store.events.append = () => {
      throw new StoreWriteError('SQLITE_BUSY', new Error('database is locked'));
    };
    expect(() => supervisor.takeOver()).toThrow(StoreWriteError);
    expect(store.leases.get(runId)).toBeUndefined();
    expect(b.ownedCount).toBe(0);
    store.events.append = append;
    supervisor.takeOver();
    expect(supervisor.liveRunIds()).toContain(runId);
    expect(store.leases.get(runId)).toMatchObject({ owner: 'b' });
    expect(store.events.list(runId).filter((e) => e.type === 'run.taken')).toHaveLength(1);
  });
});

describe('a fail-over within a budget (issue #18 item 6)', () => {
  it('checks the next candidate of the last search against what is left of the budget when it is chosen: none affordable, the run expires and rents nothing more', async () => {
    // $3.6/h bills $0.001 a second; booting an offer for boot_timeout_s (30 s) costs $0.03. The
    // search (t = 0) saw $0.05 left; when the first instance fails 25 s in, $0.025 is left.
    const runId = await runningRun({ budget_usd: 0.05, boot_timeout_s: 30 });
    await clock.advance(25_000);
    supervisor.onSeen([instance(500, 'exited')], clock.now());
    await clock.settle();
    expect(store.runs.get(runId)!.state).toBe('destroying');
    await gone(500);
    const row = store.runs.get(runId)!;
    expect(row.state).toBe('expired');
    expect(JSON.parse(row.error_json!)).toMatchObject({ kind: 'budget' });
    expect(JSON.parse(row.error_json!).message).toMatch(/cannot pay for the matching offer to boot/);
    expect(created).toBe(1); // offer 8 was not rented
  });

  it('a candidate the budget left still pays for is rented as before', async () => {
    const runId = await runningRun({ budget_usd: 0.05, boot_timeout_s: 10 });
    await clock.advance(25_000);
    supervisor.onSeen([instance(500, 'exited')], clock.now());
    await clock.settle();
    await gone(500);
    expect(created).toBe(2);
    expect(store.runs.get(runId)!.state).toBe('booting');
  });
});

describe('a run its daemon handed over when its lease looked about to end (issue #31 item 1)', () => {
  it('leaves the held set at once: the next renewal releases its lease, and another daemon takes the run and carries out its cancel', async () => {
    await releasers.release();
    const a = daemon('a');
    ({ supervisor, submissions } = superviseWith(store, a));
    const aReleasers = releasers;
    const runId = await runningRun({});
    // a stalls for 13 s (a SIGSTOP): by its monotonic clock the lease is in its last 3 s (15 s less
    // the margin), though the database's has 2 s left. A cancel sent to it hands the run over.
    await clock.advance(13_000);
    expect(a.expiring()).toBe(true);
    supervisor.cancel(runId);
    await clock.settle();
    expect(destroyed).toEqual([]);
    a.renew(); // its cluster loop, running again
    expect(a.ownedCount).toBe(0);
    expect(store.leases.get(runId)).toBeUndefined();

    const b = daemon('b');
    ({ supervisor, submissions } = superviseWith(store, b));
    supervisor.resumeAll();
    await clock.settle();
    expect(store.leases.get(runId)).toMatchObject({ owner: 'b' });
    expect(destroyed.map((d) => d.id)).toEqual([500]);
    await gone(500);
    expect(store.runs.get(runId)!.state).toBe('cancelled');
    await aReleasers.release();
  });
});
