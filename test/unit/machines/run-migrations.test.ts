import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RUN_MACHINE_VERSION } from '../../../machines/run-machine.js';
import { canMigrate, migrateRunSnapshot, type StoredRunSnapshot } from '../../../machines/run-migrations.js';
import { FakeWorld, LIMITS, currentInstanceId, poll, startRun, stateOf, status, tick } from './harness.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

/** What machine version 1 stored: the attempt history in context, no gone-offer fields. */
function asVersion1(snapshot: StoredRunSnapshot): StoredRunSnapshot {
  const { goneOffers: _g, goneThisSearch: _t, lastEnded: _l, ...context } = snapshot.context;
  const { goneOffersPerSearch: _b, ...limits } = context['limits'] as Record<string, unknown>;
  const current = context['current'] as { n: number; offerId: number; machineId: number; instanceId: number | null };
  return {
    ...snapshot,
    context: {
      ...context,
      limits,
      history: [
        {
          n: current.n,
          offerId: current.offerId,
          machineId: current.machineId,
          instanceId: current.instanceId,
          outcome: null,
          detail: null,
        },
      ],
    },
  };
}

describe('run machine snapshot migrations', () => {
  it('resumes a run stored by machine version 1 without a second create', async () => {
    const world = new FakeWorld();
    const first = startRun(world);
    first.actor.send({ type: 'ADMIT' });
    await tick(0);
    expect(stateOf(first.actor)).toBe('booting');
    const v1 = asVersion1(JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot())) as StoredRunSnapshot);
    first.actor.stop();

    expect(canMigrate(1, RUN_MACHINE_VERSION)).toBe(true);
    const migrated = migrateRunSnapshot(v1, 1, RUN_MACHINE_VERSION, LIMITS)!;
    expect(migrated.context).not.toHaveProperty('history');
    expect(migrated.context).toMatchObject({ goneOffers: [], goneThisSearch: 0, lastEnded: null });

    const second = startRun(world, { snapshot: migrated as never });
    await tick(0);
    await poll(second.actor, status(currentInstanceId(second.actor), 'running'));
    expect(stateOf(second.actor)).toBe('running');
    expect(world.serviceCreates).toHaveLength(1);
    second.actor.stop();
  });

  it('resumes a run stored by machine version 2 (no expiry, readiness or bid fields) without a second create', async () => {
    const world = new FakeWorld();
    const first = startRun(world);
    first.actor.send({ type: 'ADMIT' });
    await tick(0);
    const v3 = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot())) as StoredRunSnapshot;
    first.actor.stop();
    const { expire: _e, searchType: _s, ...context } = v3.context;
    const {
      diskDph: _d,
      bidPrice: _b,
      runningSeenAt: _r,
      reachable: _re,
      rebidAt: _ra,
      ...current
    } = context['current'] as Record<string, unknown>;
    const candidates = (context['candidates'] as Array<Record<string, unknown>>).map(({ minBid: _m, diskDph: _dd, ...c }) => c);
    const v2 = { ...v3, context: { ...context, current, candidates } };

    const migrated = migrateRunSnapshot(v2, 2, RUN_MACHINE_VERSION, LIMITS)!;
    expect(migrated.context).toMatchObject({ expire: null, searchType: 'on-demand' });
    expect(migrated.context['current']).toMatchObject({ bidPrice: null, diskDph: 0, runningSeenAt: null });
    const second = startRun(world, { snapshot: migrated as never });
    await tick(0);
    await poll(second.actor, status(currentInstanceId(second.actor), 'running'));
    expect(stateOf(second.actor)).toBe('running');
    expect(world.serviceCreates).toHaveLength(1);
    second.actor.stop();
  });

  it('resumes a run stored by machine version 3 (an ended attempt without its end time) and goes on to the next offer', async () => {
    const world = new FakeWorld();
    world.createResults.set(1, { kind: 'create_failed', detail: 'invalid_args' });
    const first = startRun(world);
    first.actor.send({ type: 'ADMIT' });
    await tick(0);
    const v4 = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot())) as StoredRunSnapshot;
    first.actor.stop();
    const { endedAt: _e, ...lastEnded } = v4.context['lastEnded'] as Record<string, unknown>;
    const v3 = { ...v4, context: { ...v4.context, lastEnded } };

    const migrated = migrateRunSnapshot(v3, 3, RUN_MACHINE_VERSION, LIMITS)!;
    expect(migrated.context['lastEnded']).toMatchObject({ n: 1, outcome: 'create_failed', endedAt: 0 });
    const second = startRun(world, { snapshot: migrated as never });
    await tick(0);
    await poll(second.actor, status(currentInstanceId(second.actor), 'running'));
    expect(stateOf(second.actor)).toBe('running');
    expect(world.serviceCreates.map((c) => c.offerId)).toEqual([1, 2]);
    second.actor.stop();
  });

  it('v10 → v11: the stored limits get files.stopped_keep_s as this berth derives it (issue #48), and nothing else changes', () => {
    const v10 = { value: { running: 'watching' }, context: { runId: 'r1', limits: { ...LIMITS, outputs: true } } };
    const migrated = migrateRunSnapshot(v10, 10, 11, { ...LIMITS, stoppedKeepS: 1800 })!;
    expect(migrated.value).toEqual({ running: 'watching' });
    expect(migrated.context['limits']).toEqual({ ...LIMITS, outputs: true, stoppedKeepS: 1800 });
    expect(migrateRunSnapshot(v10, 10, 11, LIMITS)).toEqual(v10);
  });

  it('refuses snapshots of a newer machine or of a version it has no step for', () => {
    expect(canMigrate(RUN_MACHINE_VERSION + 1, RUN_MACHINE_VERSION)).toBe(false);
    expect(canMigrate(0, RUN_MACHINE_VERSION)).toBe(false);
    expect(migrateRunSnapshot({ context: {} }, RUN_MACHINE_VERSION + 1, RUN_MACHINE_VERSION, LIMITS)).toBeNull();
  });
});
