import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import { runMachine } from '../../../machines/run-machine.js';
import { describeAttempts, ERRORS_LISTING_ATTEMPTS, failureOfStatus, GONE_OFFERS_KEPT } from '../../../machines/run-rules.js';
import {
  FakeWorld,
  LIMITS,
  confirmGone,
  currentInstanceId,
  offers,
  poll,
  startRun,
  stateOf,
  status,
  tick,
  endedAttempts,
  type RunActor,
} from './harness.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

async function admitted(world: FakeWorld, limits = {}) {
  const run = startRun(world, { limits });
  run.actor.send({ type: 'ADMIT' });
  await tick(0);
  return run;
}

async function bootToRunning(actor: RunActor) {
  const id = currentInstanceId(actor);
  await poll(actor, status(id, 'loading'));
  await poll(actor, status(id, 'running'));
}

describe('run machine: the happy path', () => {
  it('searches, creates, boots and reaches running with the SSH address', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    expect(stateOf(actor)).toBe('booting');
    expect(world.serviceCreates).toEqual([
      { runId: 'r1', n: 1, offerId: 1, machineId: 10, dphTotal: 0.5, bidPrice: null, gpu: { name: 'RTX 4090', count: 1 } },
    ]);
    await bootToRunning(actor);
    expect(stateOf(actor)).toBe('running');
    const ctx = actor.getSnapshot().context;
    expect(ctx.current?.status?.ssh_host).toBe('ssh1.example');
    expect(ctx.current).toMatchObject({ n: 1, offerId: 1, machineId: 10, instanceId: 100 });
    expect(emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ n: 1 });
    expect(emitted.map((e) => e.type)).toEqual([
      'search.started',
      'search.found',
      'attempt.started',
      'attempt.instance',
      'attempt.status',
      'attempt.running',
    ]);
  });

  it('stays queued until admitted', async () => {
    const world = new FakeWorld();
    const { actor } = startRun(world);
    await tick(1000);
    expect(stateOf(actor)).toBe('queued');
    expect(world.searches).toHaveLength(0);
  });
});

describe('run machine: an image that cannot be pulled', () => {
  const manifest = 'Error response from daemon: manifest for pytorch/pytorch:no-such-tag not found: manifest unknown: manifest unknown';

  it('ends the run after the first instance says its image does not exist, trying no other offer', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    await poll(actor, status(100, 'loading'));
    await poll(actor, status(100, 'created', { status_msg: manifest }));
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    const ctx = actor.getSnapshot().context;
    expect(ctx.error).toMatchObject({ kind: 'image_unavailable' });
    expect(ctx.error!.message).toContain('manifest for pytorch/pytorch:no-such-tag not found');
    expect(world.serviceCreates).toHaveLength(1);
    // The host did nothing wrong: it is not blocked.
    expect(ctx.blockedMachines).toEqual([]);
    expect(endedAttempts(emitted)[0]).toMatchObject({ n: 1, outcome: 'image_unavailable' });
  });

  it.each([
    ['Pulling image layers', null],
    ['success, running', null],
    [
      "Error response from daemon: pull access denied for me/private, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
      'image_unavailable',
    ],
    [
      'Error response from daemon: Head "https://registry-1.docker.io/v2/me/x/manifests/1": unauthorized: incorrect username or password',
      'image_unavailable',
    ],
    ['Error response from daemon: no matching manifest for linux/amd64 in the manifest list entries', 'image_unavailable'],
    ['Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request canceled (Client.Timeout exceeded)', null],
    ['Error response from daemon: error pulling image configuration: Get "https://x": net/http: TLS handshake timeout', 'exited'],
    ['Error response from daemon: toomanyrequests: You have reached your pull rate limit.', 'exited'],
  ])('reads the status message %j as %s', (msg, outcome) => {
    expect(failureOfStatus(status(100, 'created', { status_msg: msg }))?.outcome ?? null).toBe(outcome);
  });

  it('fails over when the pull failed for a reason of that host (a registry rate limit)', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    const limited = 'Error response from daemon: toomanyrequests: You have reached your pull rate limit.';
    await poll(actor, status(100, 'created', { status_msg: limited }));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    expect(actor.getSnapshot().context.current).toMatchObject({ n: 2 });
  });
});

describe('run machine: failed attempts fail over to the next offer', () => {
  it.each([
    ['exited', status(100, 'exited'), 'exited'],
    ['unknown', status(100, 'unknown'), 'unknown'],
    ['offline', status(100, 'offline'), 'offline'],
    ['OCI failure', status(100, 'created', { status_msg: 'OCI runtime create failed: runc' }), 'exited'],
  ])('destroys the instance when it goes %s during boot, blocks it and tries the next offer', async (_, bad, outcome) => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    await poll(actor, status(100, 'loading'));
    await poll(actor, bad);
    expect(stateOf(actor)).toBe('destroying');
    // The destroy says why, so that a failed attempt's logs are asked for before it.
    expect(world.destroys).toEqual([{ runId: 'r1', n: 1, instanceId: 100, outcome }]);
    // A list taken after the destroy no longer shows it: the attempt ends and the next offer is tried.
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    const ctx = actor.getSnapshot().context;
    expect(endedAttempts(emitted)[0]).toMatchObject({ n: 1, offerId: 1, instanceId: 100, outcome });
    expect(ctx.blockedOffers).toEqual([1]);
    expect(ctx.blockedMachines).toEqual([10]);
    expect(ctx.current).toMatchObject({ n: 2, offerId: 2 });
    await bootToRunning(actor);
    expect(stateOf(actor)).toBe('running');
  });

  it('replaces an instance still loading at the boot deadline', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    await poll(actor, status(100, 'loading'));
    await tick(LIMITS.bootTimeoutS * 1000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'boot_timeout' });
    expect(actor.getSnapshot().context.current?.n).toBe(2);
  });

  it('treats an instance missing from several lists as lost', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    await poll(actor, null);
    await poll(actor, null);
    expect(stateOf(actor)).toBe('booting');
    await poll(actor, null);
    expect(stateOf(actor)).toBe('destroying');
  });

  it('moves on without spending an attempt when the offer is gone', async () => {
    const world = new FakeWorld();
    world.createResults.set(1, { kind: 'offer_gone', detail: 'no_such_ask' });
    const { actor, emitted } = await admitted(world, { maxAttempts: 1 });
    expect(stateOf(actor)).toBe('booting');
    const ctx = actor.getSnapshot().context;
    expect(endedAttempts(emitted)[0]).toMatchObject({ offerId: 1, outcome: 'offer_unavailable', instanceId: null });
    expect(ctx.spentAttempts).toBe(0);
    expect(ctx.current?.offerId).toBe(2);
  });

  it('counts a failed create and goes on', async () => {
    const world = new FakeWorld();
    world.createResults.set(1, { kind: 'create_failed', detail: 'invalid_args' });
    const { actor } = await admitted(world);
    expect(actor.getSnapshot().context.spentAttempts).toBe(1);
    expect(actor.getSnapshot().context.current?.offerId).toBe(2);
  });

  it('searches again when the candidates are used up, with blocked offers and machines excluded', async () => {
    const world = new FakeWorld();
    world.searchResults = [offers(1), offers(2)];
    const { actor } = await admitted(world);
    await poll(actor, status(100, 'exited'));
    await confirmGone(actor);
    expect(world.searches).toHaveLength(2);
    expect(world.searches[1]).toMatchObject({ blockedOffers: [1], blockedMachines: [10] });
    expect(actor.getSnapshot().context.current?.offerId).toBe(2);
  });

  it('starts a new attempt when a running instance is lost', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    await bootToRunning(actor);
    await poll(actor, status(100, 'offline'));
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'lost' });
    expect(stateOf(actor)).toBe('booting');
  });

  it('gives a run that lost its instance after the deadline a fresh deadline, not a failure', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { deadlineS: 60 });
    await bootToRunning(actor);
    await tick(3 * 60_000); // ran well past the original deadline
    await poll(actor, status(100, 'unknown'));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    expect(actor.getSnapshot().context.current?.n).toBe(2);
    expect(actor.getSnapshot().context.deadlineAt).toBeGreaterThan(Date.now() + 50_000);
  });

  it('retries a failed destroy with backoff until the instance is gone', async () => {
    const world = new FakeWorld();
    world.destroyFailures = 2;
    const { actor, emitted } = await admitted(world);
    await poll(actor, status(100, 'exited'));
    expect(actor.getSnapshot().value).toEqual({ destroying: 'waiting' });
    await tick(1000);
    await tick(2000);
    expect(world.destroys).toHaveLength(3);
    expect(actor.getSnapshot().value).toEqual({ destroying: 'confirming' });
    expect(emitted.filter((e) => e.type === 'destroy.retry')).toHaveLength(2);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
  });

  it('destroys again when the instance is still listed after the destroy', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    await poll(actor, status(100, 'exited'));
    await poll(actor, status(100, 'exited'));
    expect(actor.getSnapshot().value).toEqual({ destroying: 'confirming' });
    await tick(LIMITS.destroyConfirmS * 1000 + 1000);
    expect(world.destroys.length).toBeGreaterThanOrEqual(2);
  });
  it('takes a list that no longer holds the instance while the next destroy waits to be sent', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    await poll(actor, status(100, 'exited'));
    expect(actor.getSnapshot().value).toEqual({ destroying: 'confirming' });
    // No list came in the confirm window: the machine waits to destroy again.
    await tick(LIMITS.destroyConfirmS * 1000 + 10);
    expect(actor.getSnapshot().value).toEqual({ destroying: 'waiting' });
    // The list taken now (after the accepted destroy) shows it gone: the attempt ends, no second destroy.
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    expect(world.destroys).toHaveLength(1);
  });
});

describe('run machine: offers that vanish between search and create', () => {
  it('searches again after goneOffersPerSearch gone offers instead of trying the rest of the search', async () => {
    const world = new FakeWorld();
    world.searchResults = [offers(1, 2, 3, 4, 5, 6), offers(7, 8)];
    for (const id of [1, 2, 3, 4, 5, 6]) world.createResults.set(id, { kind: 'offer_gone', detail: 'no_such_ask' });
    const { actor } = await admitted(world, { goneOffersPerSearch: 2, maxAttempts: 1 });
    // Two gone offers spend the search's budget; offers 3-6 of that search are never created on.
    expect(world.serviceCreates.map((c) => c.offerId)).toEqual([1, 2, 7]);
    expect(world.searches).toHaveLength(2);
    expect(world.searches[1]!.blockedOffers).toEqual([1, 2]);
    expect(stateOf(actor)).toBe('booting');
    expect(actor.getSnapshot().context.spentAttempts).toBe(0);
  });

  it('bounds the creates of a run whose every offer vanishes by its searches, and keeps its snapshot small', async () => {
    const world = new FakeWorld();
    // 200 searches of 64 fresh offers each, every one of which turns out gone.
    for (let s = 0; s < 200; s++) {
      const batch = offers(...Array.from({ length: 64 }, (_, i) => 1 + s * 64 + i));
      world.searchResults.push(batch);
      for (const o of batch) world.createResults.set(o.offerId, { kind: 'offer_gone', detail: 'no_such_ask' });
    }
    const { actor } = await admitted(world, { goneOffersPerSearch: 3, maxAttempts: 3 });
    for (let i = 0; i < 50; i++) await tick(0);
    expect(world.searches.length).toBeGreaterThan(10);
    expect(world.serviceCreates.length).toBeLessThanOrEqual(3 * world.searches.length);
    // The context holds no growing history: gone offers are kept to a bounded list.
    expect(actor.getSnapshot().context.goneOffers.length).toBeLessThanOrEqual(GONE_OFFERS_KEPT);
    expect(JSON.stringify(actor.getPersistedSnapshot()).length).toBeLessThan(20_000);
    actor.stop();
  });

  it('treats a search whose offers are all blocked or gone as finding nothing', async () => {
    const world = new FakeWorld();
    world.createResults.set(1, { kind: 'offer_gone', detail: 'no_such_ask' });
    world.searchResults = [offers(1), offers(1), offers(1), offers(2)];
    const { actor } = await admitted(world, { relaxSteps: 1 });
    // The stub ignores the exclusions a real search applies; the machine must not trust it either.
    expect(world.serviceCreates.map((c) => c.offerId)).toEqual([1]);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('no_offers');
  });
});

describe('run machine: relaxing and limits', () => {
  it('relaxes step by step when nothing matches, then succeeds', async () => {
    const world = new FakeWorld();
    world.searchResults = [[], [], offers(7)];
    const { actor, emitted } = await admitted(world);
    expect(world.searches.map((s) => s.relaxLevel)).toEqual([0, 1, 2]);
    expect(emitted.filter((e) => e.type === 'relaxed')).toEqual([
      { type: 'relaxed', level: 1 },
      { type: 'relaxed', level: 2 },
    ]);
    expect(actor.getSnapshot().context.current?.offerId).toBe(7);
  });

  it('fails when the relax ladder is exhausted', async () => {
    const world = new FakeWorld();
    world.defaultSearch = [];
    const { actor } = await admitted(world);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('no_offers');
    expect(world.searches).toHaveLength(3);
  });

  it('fails after max_attempts with every offer tried and why', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { maxAttempts: 2 });
    await poll(actor, status(100, 'exited'));
    await confirmGone(actor);
    await poll(actor, status(101, 'unknown'));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    const error = actor.getSnapshot().context.error!;
    expect(error.kind).toBe('attempts_exhausted');
    // The daemon completes the message with this story from its attempts table.
    expect(ERRORS_LISTING_ATTEMPTS.has(error.kind)).toBe(true);
    const story = describeAttempts(endedAttempts(emitted));
    expect(story).toContain('#1 offer 1 (machine 10, instance 100): exited');
    expect(story).toContain('#2 offer 2 (machine 20, instance 101): unknown');
    expect(world.serviceCreates).toHaveLength(2);
  });

  it('fails at the deadline while searching keeps failing', async () => {
    const world = new FakeWorld();
    world.defaultSearch = Object.assign(new Error('503'), { code: 'server_error' });
    const { actor } = await admitted(world, { deadlineS: 12 });
    expect(actor.getSnapshot().value).toEqual({ searching: 'backoff' });
    await tick(13_000);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('deadline');
  });

  it('destroys the booting instance and fails when the deadline comes first', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { deadlineS: 30, bootTimeoutS: 600 });
    await tick(31_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('deadline');
    expect(actor.getSnapshot().context.current).toBeNull();
  });

  it('fails at once on an auth error, without retrying', async () => {
    const world = new FakeWorld();
    world.searchResults = [Object.assign(new Error('401: check BERTH_API_KEY'), { code: 'auth' })];
    const { actor } = await admitted(world);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error).toEqual({ kind: 'auth', message: '401: check BERTH_API_KEY' });
    expect(world.searches).toHaveLength(1);
  });

  it('fails at once when the service refuses the search as invalid', async () => {
    const world = new FakeWorld();
    world.searchResults = [Object.assign(new Error('400 invalid_args: unknown field'), { code: 'bad_request' })];
    const { actor } = await admitted(world);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('bad_request');
    expect(world.searches).toHaveLength(1);
  });

  it('fails at once when the create is refused for a missing permission', async () => {
    const world = new FakeWorld();
    world.createResults.set(1, Object.assign(new Error('lacks instance_write'), { code: 'permission' }));
    const { actor } = await admitted(world);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('permission');
  });
});

describe('run machine: cancel from every state', () => {
  it('cancels a queued run', async () => {
    const world = new FakeWorld();
    const { actor } = startRun(world);
    actor.send({ type: 'CANCEL' });
    expect(stateOf(actor)).toBe('cancelled');
  });

  it('cancels while searching without creating anything', async () => {
    const world = new FakeWorld();
    world.defaultSearch = Object.assign(new Error('503'), { code: 'server_error' });
    const { actor } = await admitted(world);
    actor.send({ type: 'CANCEL' });
    expect(stateOf(actor)).toBe('cancelled');
    expect(world.serviceCreates).toHaveLength(0);
  });

  it('cancels while creating: waits for the create, then destroys what it made', async () => {
    const world = new FakeWorld();
    world.holdCreates = true;
    const { actor, emitted } = await admitted(world);
    expect(stateOf(actor)).toBe('creating');
    actor.send({ type: 'CANCEL' });
    expect(stateOf(actor)).toBe('creating');
    world.releaseCreates();
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
    expect(world.destroys).toHaveLength(1);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'cancelled' });
  });

  it.each(['booting', 'running'])('cancels while %s and destroys the instance', async (where) => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    if (where === 'running') await bootToRunning(actor);
    actor.send({ type: 'CANCEL' });
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
    expect(world.destroys).toEqual([{ runId: 'r1', n: 1, instanceId: 100, outcome: 'cancelled' }]);
    expect(emitted.at(-1)).toEqual({ type: 'run.cancelled' });
  });

  it('cancels while destroying: finishes the destroy and does not try another offer', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    await poll(actor, status(100, 'exited'));
    actor.send({ type: 'CANCEL' });
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
    expect(world.serviceCreates).toHaveLength(1);
  });
});

describe('run machine: restore from a snapshot in every state repeats no side effect', () => {
  type Stage = (actor: RunActor, world: FakeWorld) => Promise<void>;
  const stages: Record<string, Stage> = {
    queued: async () => {},
    searching: async (actor, world) => {
      world.searchResults = [Object.assign(new Error('503'), { code: 'server_error' })];
      actor.send({ type: 'ADMIT' });
      await tick(0);
    },
    creating: async (actor, world) => {
      world.holdCreates = true;
      actor.send({ type: 'ADMIT' });
      await tick(0);
    },
    booting: async (actor) => {
      actor.send({ type: 'ADMIT' });
      await tick(0);
      await poll(actor, status(100, 'loading'));
    },
    running: async (actor) => {
      actor.send({ type: 'ADMIT' });
      await tick(0);
      await bootToRunning(actor);
    },
    destroying: async (actor) => {
      actor.send({ type: 'ADMIT' });
      await tick(0);
      await poll(actor, status(100, 'exited'));
    },
  };

  it.each(Object.keys(stages))('resumes from %s and reaches running with one create per attempt', async (stage) => {
    const world = new FakeWorld();
    const first = startRun(world);
    await stages[stage]!(first.actor, world);
    expect(stateOf(first.actor)).toBe(stage);
    const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot()));
    first.actor.stop();
    // A create that was in flight when the daemon died was accepted by the service.
    world.holdCreates = false;
    world.releaseCreates();
    await tick(0);

    const second = startRun(world, { snapshot: persisted });
    await tick(0);
    if (stateOf(second.actor) === 'queued') second.actor.send({ type: 'ADMIT' });
    await tick(LIMITS.outageBackoffS * 1000);
    for (let i = 0; i < 3 && stateOf(second.actor) !== 'running'; i++) {
      const snap = second.actor.getSnapshot();
      if (stateOf(second.actor) === 'destroying') await confirmGone(second.actor);
      else if (snap.context.current?.instanceId != null) await bootToRunning(second.actor);
      await tick(0);
    }
    expect(stateOf(second.actor)).toBe('running');
    const ctx = second.actor.getSnapshot().context;
    // One service create per attempt number, never two for the same attempt.
    const ns = world.serviceCreates.map((c) => c.n);
    expect(new Set(ns).size).toBe(ns.length);
    // Only the attempt that failed before the snapshot (destroying) needs a second one.
    const expectedAttempts = stage === 'destroying' ? 2 : 1;
    expect(ctx.attemptCount).toBe(expectedAttempts);
    expect(world.serviceCreates).toHaveLength(expectedAttempts);
    expect(ctx.current).toMatchObject({ n: expectedAttempts });
    expect([...first.emitted, ...second.emitted].filter((e) => e.type === 'attempt.running').at(-1)).toMatchObject({ n: expectedAttempts });
  });

  it('restores a persisted snapshot into a fresh machine with the same context', async () => {
    const world = new FakeWorld();
    const first = await admitted(world);
    const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot()));
    first.actor.stop();
    const restored = createActor(runMachine.provide({ actors: world.actors() }), {
      snapshot: persisted,
      input: { runId: 'r1', limits: LIMITS, submittedAt: 0 },
    });
    restored.start();
    expect(restored.getSnapshot().context.current?.instanceId).toBe(100);
    expect(restored.getSnapshot().status).toBe('active');
    restored.stop();
  });
});

describe('run machine: time comes only with what it is told', () => {
  it('judges the deadline by when the attempt ended, not by the clock', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { deadlineS: 60 });
    const id = currentInstanceId(actor);
    // The list that confirms the instance gone was taken after the deadline; the clock says before.
    await poll(actor, status(id, 'exited'));
    await tick(0);
    actor.send({ type: 'POLL', instance: null, listedAt: Date.now() + 61_000 });
    await tick(0);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error?.kind).toBe('deadline');
    expect(world.serviceCreates).toHaveLength(1);
  });

  it('starts the readiness wait from the list that showed the instance running', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { readyWhen: 'ssh' });
    world.probeAnswer = 'never';
    const id = currentInstanceId(actor);
    await tick(1);
    const listedAt = Date.now() - 5_000;
    actor.send({ type: 'POLL', instance: status(id, 'running'), listedAt });
    await tick(0);
    expect(actor.getSnapshot().context.current?.runningSeenAt).toBe(listedAt);
  });
});
