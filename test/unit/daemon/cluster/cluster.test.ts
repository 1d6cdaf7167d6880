// A daemon's leases and its cluster loop (src/daemon/cluster/), on a SQLite store with the fake
// clock: a run another daemon took is reported lost and fenced off; renewals that keep failing make
// the daemon give up its runs before their leases can end; one daemon leads at a time, and the
// lead passes on once the leader stops renewing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeaseLostError, StoreWriteError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logger.js';
import { ClusterLoop, type ClusterRuns } from '../../../../src/daemon/cluster/cluster-loop.js';
import { LeaseOwner } from '../../../../src/daemon/cluster/lease-owner.js';
import { SharedPace } from '../../../../src/daemon/cluster/shared-pace.js';
import { loadConfig } from '../../../../src/config/load.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const LEASE_MS = 15_000;
/** The configured rate limits (config/default.json). */
const defaultRates = () => loadConfig({}, { BERTH_HOME: '/nonexistent' }).config.rate_limits;
let home: string;
let store: Store;
let clock: FakeClock;

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'berth-cluster-unit-'));
  store = openStore({ home });
  clock = new FakeClock(Date.now());
  // The database's clock is the fake one here: leases end when the test moves time.
  store.leases.serverNow = () => clock.now();
});
afterEach(() => {
  store.close();
  rmSync(home, { recursive: true, force: true });
});

function addRun(id: string): void {
  store.transaction(() => store.runs.insert({ id, name: id, specJson: '{}', createdAt: clock.now() }));
}

const owner = (daemonId: string) => new LeaseOwner({ store, clock, daemonId, leaseMs: LEASE_MS });

function recordingRuns(): ClusterRuns & { lostRuns: string[]; lostAt: number[] } {
  const r = {
    lostRuns: [] as string[],
    lostAt: [] as number[],
    takeOver: () => undefined,
    lost(ids: string[]) {
      r.lostRuns.push(...ids);
      r.lostAt.push(clock.now());
    },
    cancelRequested: () => undefined,
  };
  return r;
}

describe('LeaseOwner', () => {
  it('writes for a run only while it holds it: once another daemon took it, the renewal reports it lost and a write throws having written nothing', async () => {
    addRun('r1');
    const a = owner('a');
    a.renew();
    expect(a.take('r1')).toBe(true);
    expect(owner('b').take('r1')).toBe(false);
    a.write('r1', () => store.events.append({ runId: 'r1', at: clock.now(), type: 'note', message: 'by a', data: {} }));

    // a stops renewing (paused): once its lease has ended, b takes the run.
    await clock.advance(LEASE_MS + 1);
    const b = owner('b');
    b.renew();
    expect(b.take('r1')).toBe(true);
    expect(store.leases.get('r1')).toMatchObject({ owner: 'b', epoch: 2 });

    expect(() =>
      a.write('r1', () => store.events.append({ runId: 'r1', at: clock.now(), type: 'note', message: 'late', data: {} })),
    ).toThrow(LeaseLostError);
    expect(store.events.list('r1').map((e) => e.message)).toEqual(['by a']);
    expect(a.renew().lost).toEqual(['r1']);
  });
});

describe('LeaseOwner giving a run up (issue #31 item 1)', () => {
  it('a run given up and taken back before the next renewal is renewed, not released under its new driver', () => {
    addRun('r1');
    const a = owner('a');
    a.renew();
    expect(a.take('r1')).toBe(true);
    a.giveUp('r1');
    expect(a.ownedCount).toBe(0);
    expect(a.take('r1')).toBe(true);
    a.renew();
    expect(store.leases.get('r1')).toMatchObject({ owner: 'a' });
    expect(a.ownedCount).toBe(1);
  });
});

describe('ClusterLoop', () => {
  it('gives up its runs before their leases can end when the store stops answering', async () => {
    addRun('r1');
    const a = owner('a');
    const runs = recordingRuns();
    const loop = new ClusterLoop({ owner: a, runs, clock, log: silentLogger(), onLeader: () => undefined, onDaemons: () => undefined });
    loop.start();
    a.take('r1');
    const lastRenewal = clock.now();
    const expiresAt = store.leases.get('r1')!.expires_at;
    // The store refuses every renewal from now on.
    const fakeServerNow = store.leases.serverNow;
    store.leases.serverNow = () => {
      throw new StoreWriteError('SQLITE_BUSY', new Error('locked'));
    };
    await clock.advance(LEASE_MS - 2000);
    expect(runs.lostRuns).toEqual(['r1']);
    // Given up with a margin left: before any other daemon could take the run.
    expect(runs.lostAt[0]! - lastRenewal).toBeLessThan(LEASE_MS);
    expect(runs.lostAt[0]!).toBeLessThan(expiresAt);
    expect(() => a.write('r1', () => undefined)).toThrow(LeaseLostError);
    // The store answers again before the lease ended: the lease given up is released, not renewed
    // for a run nobody here drives (any daemon may take it at once, this one included).
    store.leases.serverNow = fakeServerNow;
    await clock.advance(1000);
    expect(clock.now()).toBeLessThan(expiresAt);
    expect(store.leases.get('r1')).toBeUndefined();
    loop.stop();
  });

  it('has one leader at a time, and the lead passes on when the leader stops renewing', async () => {
    const leads: Record<string, boolean[]> = { a: [], b: [] };
    const loops = ['a', 'b'].map(
      (id) =>
        new ClusterLoop({
          owner: owner(id),
          runs: recordingRuns(),
          clock,
          log: silentLogger(),
          onLeader: (l) => leads[id]!.push(l),
          onDaemons: () => undefined,
        }),
    );
    loops[0]!.start();
    loops[1]!.start();
    expect([loops[0]!.leader, loops[1]!.leader]).toEqual([true, false]);
    await clock.advance(LEASE_MS);
    expect([loops[0]!.leader, loops[1]!.leader]).toEqual([true, false]);
    // a dies (its timer stops): b leads once a's lease has ended, within a renewal period.
    loops[0]!.stop();
    await clock.advance(LEASE_MS + LEASE_MS / 3 + 1000);
    expect(loops[1]!.leader).toBe(true);
    loops[1]!.stop();
    expect(leads).toEqual({ a: [true], b: [true] });
  });
});

describe('a step of the wall clock (issue #31 item 1)', () => {
  const HOUR = 3_600_000;
  beforeEach(() => {
    // The database's clock goes on as it did: only this machine's wall clock steps.
    const base = clock.now();
    store.leases.serverNow = () => base + clock.monotonic();
  });
  const loopOf = (o: LeaseOwner) =>
    new ClusterLoop({ owner: o, runs: recordingRuns(), clock, log: silentLogger(), onLeader: () => undefined, onDaemons: () => undefined });

  it('forward by an hour: the daemon neither takes a run another daemon holds nor stops acting for its own', async () => {
    addRun('r1');
    addRun('r2');
    const a = owner('a');
    const b = owner('b');
    const loops = [loopOf(a), loopOf(b)];
    for (const l of loops) l.start();
    expect(a.take('r1')).toBe(true);
    expect(b.take('r2')).toBe(true);
    await clock.advance(2_000);
    clock.step(HOUR);
    expect(a.claimable(10)).toEqual([]);
    expect(a.take('r2')).toBe(false);
    expect(a.expiring()).toBe(false);
    a.write('r1', () => store.events.append({ runId: 'r1', at: clock.now(), type: 'note', message: 'by a', data: {} }));
    await clock.advance(LEASE_MS * 2);
    expect(store.leases.get('r1')).toMatchObject({ owner: 'a', epoch: 1 });
    expect(store.leases.get('r2')).toMatchObject({ owner: 'b', epoch: 1 });
    for (const l of loops) l.stop();
  });

  it('back by an hour: the renewals go on every third of the lease, so that no other daemon may take its runs', async () => {
    addRun('r1');
    const a = owner('a');
    const loop = loopOf(a);
    loop.start();
    expect(a.take('r1')).toBe(true);
    await clock.advance(2_000);
    clock.step(-HOUR);
    await clock.advance(LEASE_MS * 3);
    const b = owner('b');
    b.renew();
    expect(b.take('r1')).toBe(false);
    expect(store.leases.get('r1')).toMatchObject({ owner: 'a', epoch: 1 });
    a.write('r1', () => store.events.append({ runId: 'r1', at: clock.now(), type: 'note', message: 'by a', data: {} }));
    loop.stop();
  });

  it('a daemon stalled past its margin stops acting though the wall clock was stepped back meanwhile', async () => {
    addRun('r1');
    const a = owner('a');
    a.renew();
    expect(a.take('r1')).toBe(true);
    clock.step(-HOUR);
    // A stall (SIGSTOP) of 13 s with no renewal: inside the lease's last 3 s by the monotonic clock.
    await clock.advance(13_000);
    expect(a.expiring()).toBe(true);
    expect(() => a.write('r1', () => undefined)).toThrow(LeaseLostError);
  });
});

describe('SharedPace', () => {
  it("spaces the calls of every daemon on the store by the group's interval, whichever daemon makes them", async () => {
    const rateLimits = { ...defaultRates(), list: { per_s: 1, burst: 1 } };
    const sentAt: Array<[string, number]> = [];
    const paces = ['a', 'b', 'c'].map(
      (id) => [id, new SharedPace({ store, owner: { now: () => clock.now() }, clock, log: silentLogger(), rateLimits })] as const,
    );
    const start = clock.now();
    // Three daemons, two calls each, all asked for at once.
    const calls = paces.flatMap(([id, pace]) => [0, 1].map(() => pace.wait('list').then(() => sentAt.push([id, clock.now() - start]))));
    await clock.advance(10_000);
    await Promise.all(calls);
    expect(sentAt.map(([, at]) => at)).toEqual([0, 1000, 2000, 3000, 4000, 5000]);
    expect(new Set(sentAt.map(([id]) => id))).toEqual(new Set(['a', 'b', 'c']));
    // Idle since: the next call goes at once, not at the end of a backlog.
    await clock.advance(60_000);
    const before = clock.now();
    await paces[0]![1].wait('list');
    expect(clock.now()).toBe(before);
    // A 429 answered to one daemon pauses the group for all of them.
    paces[1]![1].hold('list', 12_000);
    const held = paces[2]![1].wait('list').then(() => clock.now() - before);
    await clock.advance(20_000);
    expect(await held).toBe(12_000);
  });

  it('counts the interval from when a call goes: one that went late never brings the next one closer', async () => {
    const rateLimits = { ...defaultRates(), list: { per_s: 1, burst: 1 } };
    const a = new SharedPace({ store, owner: { now: () => clock.now() }, clock, log: silentLogger(), rateLimits });
    const b = new SharedPace({ store, owner: { now: () => clock.now() }, clock, log: silentLogger(), rateLimits });
    const start = clock.now();
    await a.wait('list');
    // b's call comes 1.5 s later (its daemon was busy): it goes then, and the next one 1 s after it.
    await clock.advance(1500);
    await b.wait('list');
    const next = a.wait('list').then(() => clock.now() - start);
    await clock.advance(5000);
    expect(await next).toBe(2500);
  });
});
