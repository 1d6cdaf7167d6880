// The account's view shared through the store (src/daemon/cluster/shared-view.ts), on both
// backends: what the leader publishes, what a follower reads (once, dated on its own clock, early),
// and the leader's complete sweeps, from which a follower's runs learn absences.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Instance } from '../../../../src/client/types.js';
import { LeaseOwner } from '../../../../src/daemon/cluster/lease-owner.js';
import { StoreSharedView } from '../../../../src/daemon/cluster/shared-view.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';
import { createPgDatabase, type PgDatabase } from '../../../helpers/pg-database.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function openBackend(backend: 'sqlite' | 'postgres'): Promise<() => Store> {
  let pgDb: PgDatabase | undefined;
  if (backend === 'postgres') {
    pgDb = await createPgDatabase();
    cleanups.push(() => pgDb!.drop());
  }
  return () => {
    const home = mkdtempSync(join(tmpdir(), 'berth-view-'));
    const store = openStore({ home, ...(pgDb ? { pg: { url: pgDb.url } } : {}) });
    cleanups.push(() => {
      store.close();
      rmSync(home, { recursive: true, force: true });
    });
    return store;
  };
}

const inst = (id: number, status: string, extra: Record<string, unknown> = {}): Instance => ({
  id,
  label: `berth:s:r${id}:1`,
  machine_id: 7,
  actual_status: status,
  ...extra,
});

/** A daemon's view: its clock, and the database's clock `offsetMs` ahead of it. */
function daemonView(store: Store, clock: FakeClock, offsetMs: number, leader: boolean) {
  return new StoreSharedView({
    store,
    clock,
    owner: { now: () => clock.now() + offsetMs, leader, daemonId: 'd', leaseMs: 3000, leaderLease: () => undefined, takeLead: () => false },
  });
}

describe.each(['sqlite', 'postgres'] as const)('the shared view of the instances (%s)', (backend) => {
  it("hands a follower what the leader's lists showed once, dated on its own clock a little early, and only the fields berth reads", async () => {
    const opener = await openBackend(backend);
    const db = opener();
    const clock = new FakeClock(1_000_000);
    // The leader's clock is 10 s behind the database; the follower's 3 s ahead of it.
    const leader = daemonView(db, clock, 10_000, true);
    const follower = daemonView(backend === 'postgres' ? opener() : db, clock, -3_000, false);
    leader.publish([inst(1, 'running', { extra_env: [['HF_TOKEN', 'hf_secret']], jupyter_token: 'tok', gpu_util: 12 })], 999_000, null);
    const first = follower.read();
    expect(first.seen).toHaveLength(1);
    // Listed at 999,000 on the leader's clock = 1,009,000 on the database's = 1,012,000 on the follower's, less 2 s.
    expect(first.seen[0]!.listedAt).toBe(1_010_000);
    expect(first.seen[0]!.instances).toEqual([{ id: 1, label: 'berth:s:r1:1', machine_id: 7, actual_status: 'running', gpu_util: 12 }]);
    expect(first.sweep).toBeUndefined();
    // Read again: nothing new. A newer listing of it is handed over; an older one never replaces it.
    expect(follower.read().seen).toEqual([]);
    await clock.advance(1_000);
    leader.publish([inst(1, 'exited')], 1_000_500, null);
    leader.publish([inst(1, 'running')], 998_000, null);
    const second = follower.read().seen;
    expect(second.map((s) => s.instances.map((i) => i.actual_status))).toEqual([['exited']]);
  });

  it("gives a follower the leader's complete sweep once: every instance swept since its start, none it did not show", async () => {
    const opener = await openBackend(backend);
    const db = opener();
    const clock = new FakeClock(5_000_000);
    const leader = daemonView(db, clock, 0, true);
    const follower = daemonView(db, clock, 0, false);
    leader.publish([inst(1, 'running'), inst(2, 'running')], 4_000_000, 4_000_000);
    leader.sweepDone(4_000_000);
    expect(follower.read().sweep).toEqual({
      startedAt: 3_998_000,
      instances: [expect.objectContaining({ id: 1 }), expect.objectContaining({ id: 2 })],
    });
    // The next sweep shows only instance 2 (1 is gone); a targeted list showed 3, which no sweep has.
    leader.publish([inst(2, 'running')], 4_100_000, 4_100_000);
    leader.publish([inst(3, 'loading')], 4_100_500, null);
    expect(follower.read().sweep).toBeUndefined(); // not complete yet
    leader.sweepDone(4_100_000);
    const got = follower.read();
    expect(got.sweep?.instances.map((i) => i.id)).toEqual([2]);
    expect(follower.read().sweep).toBeUndefined();
  });

  it('drops rows of instances no sweep has shown for an hour', async () => {
    const opener = await openBackend(backend);
    const db = opener();
    const clock = new FakeClock(10_000_000);
    const leader = daemonView(db, clock, 0, true);
    leader.publish([inst(1, 'running')], 1_000_000, 1_000_000);
    leader.publish([inst(2, 'running')], 9_000_000, 9_000_000);
    leader.sweepDone(9_000_000);
    const fresh = daemonView(db, clock, 0, false);
    expect(fresh.read().seen.flatMap((s) => s.instances.map((i) => i.id))).toEqual([2]);
  });

  it("a follower takes the lead from a leader whose complete sweeps are overdue, one of two followers, and no run's lease moves (issue #38 item 5)", async () => {
    const opener = await openBackend(backend);
    const clock = new FakeClock(50_000_000);
    const LEASE = 3_000;
    // Three daemons, each its own connection; the database's clock is the fake one.
    const daemons = ['leader', 'f1', 'f2'].map((id) => {
      const store = backend === 'postgres' || id === 'leader' ? opener() : undefined;
      return { id, store };
    });
    const stores = daemons.map((d) => d.store ?? daemons[0]!.store!);
    for (const s of stores) s.leases.serverNow = () => clock.now();
    const owners = daemons.map((d, i) => new LeaseOwner({ store: stores[i]!, clock, daemonId: d.id, leaseMs: LEASE }));
    const views = owners.map((owner, i) => new StoreSharedView({ store: stores[i]!, clock, owner }));
    const [leader, f1, f2] = owners as [LeaseOwner, LeaseOwner, LeaseOwner];
    stores[0]!.transaction(() => stores[0]!.runs.insert({ id: 'r1', name: 'r1', specJson: '{}', createdAt: clock.now() }));
    expect(leader.renew().leader).toBe(true);
    expect(leader.take('r1')).toBe(true);
    f1.renew();
    f2.renew();
    // The leader's last complete sweep; then it is cut from the service (not from the store: it renews).
    views[0]!.sweepDone(clock.now());
    expect([views[1]!.takeLeadIfOverdue(2 * LEASE), views[2]!.takeLeadIfOverdue(2 * LEASE)]).toEqual([false, false]);
    const rounds: Array<[boolean, boolean]> = [];
    for (let t = 0; t < 20; t++) {
      await clock.advance(500);
      for (const o of owners) o.renew();
      rounds.push([views[1]!.takeLeadIfOverdue(2 * LEASE), views[2]!.takeLeadIfOverdue(2 * LEASE)]);
      if (rounds.at(-1)!.some(Boolean)) break;
    }
    // Overdue once the last sweep is more than 6 s old (the 13th half-second), not before; one follower took it.
    expect(rounds.slice(0, -1).every(([a, b]) => !a && !b)).toBe(true);
    expect(rounds.at(-1)!.filter(Boolean)).toHaveLength(1);
    expect(rounds.length).toBe(13);
    const newLeader = rounds.at(-1)![0] ? f1 : f2;
    // The old leader's next renewal finds the lead gone; it keeps its run, which the new leader cannot take.
    expect(leader.renew()).toMatchObject({ leader: false, lost: [] });
    expect(newLeader.leader).toBe(true);
    expect(newLeader.take('r1')).toBe(false);
    expect(() => leader.check('r1')).not.toThrow();
    // The new leader is given its time: the other follower does not take the lead from it at once.
    const other = newLeader === f1 ? views[2]! : views[1]!;
    await clock.advance(500);
    for (const o of owners) o.renew();
    expect(other.takeLeadIfOverdue(2 * LEASE)).toBe(false);
  });
});
