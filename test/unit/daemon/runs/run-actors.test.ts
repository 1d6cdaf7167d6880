// The create actor, branch by branch: a real store in a temp directory, a scripted client and
// scripted label look-ups, and fake time. Each test checks what the actor answers the machine, what
// the journal row says, and which calls reached the service.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import type { CreateInput } from '../../../../machines/run-machine.js';
import type { CreateInstanceRequest, Instance, MarketClient } from '../../../../src/client/types.js';
import {
  AmbiguousCreateError,
  AuthError,
  BerthError,
  LeaseLostError,
  OfferGoneError,
  OfferRefusedError,
  PermissionError,
  ServiceHttpError,
} from '../../../../src/errors.js';
import { AttemptJournal } from '../../../../src/daemon/runs/attempt-journal.js';
import { LeaseOwner } from '../../../../src/daemon/cluster/lease-owner.js';
import { SoleOwner, type RunOwnership } from '../../../../src/daemon/cluster/run-ownership.js';
import { MachineQuarantine } from '../../../../src/daemon/runs/machine-quarantine.js';
import { OfferClaims } from '../../../../src/daemon/runs/offer-claims.js';
import { StoreClaims } from '../../../../src/daemon/runs/store-claims.js';
import { makeRunActors } from '../../../../src/daemon/runs/run-actors.js';
import type { InstanceLists } from '../../../../src/daemon/instances/poller.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { planRun } from '../../../../src/job-spec/run-plan.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';
import { passThroughActorDeps } from '../../../helpers/run-actor-stubs.js';

let dir: string;
let store: Store;
let clock: FakeClock;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-actors-'));
  store = openStore({ home: dir, lock: false });
  store.runs.insert({ id: 'run1', name: 'j', specJson: '{}', createdAt: 0 });
  clock = new FakeClock();
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const RUNS_CONFIG = {
  max_attempts: 3,
  boot_timeout_s: 60,
  deadline_s: 600,
  destroy_retry_max_delay_s: 5,
  outage_backoff_s: 1,
  gone_offers_per_search: 4,
  machine_quarantine_s: 0,
  rebid_wait_s: 30,
  idle_warning_s: 300,
  search_share_s: 30,
  relax: [],
};
const spec = planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1 }), RUNS_CONFIG);

const INPUT: CreateInput = {
  runId: 'run1',
  n: 1,
  offerId: 31,
  machineId: 310,
  dphTotal: 0.25,
  bidPrice: null,
  gpu: { name: 'RTX 4090', count: 2 },
};
const GRACE_MS = 10_000;

/** A client whose createInstance is `create`, recording every call and its signal. */
function scripted(create: (signal: AbortSignal) => Promise<{ instanceId: number }>) {
  const calls: Array<{ offerId: number; request: CreateInstanceRequest; signal: AbortSignal }> = [];
  const client = {
    createInstance: (offerId: number, request: CreateInstanceRequest, options: { signal: AbortSignal }) => {
      calls.push({ offerId, request, signal: options.signal });
      return create(options.signal);
    },
  } as unknown as MarketClient;
  return { client, calls };
}

/** Label look-ups answered from `found` (by call number), each dated. */
function lookups(found: (call: number) => Instance | null = () => null) {
  const asked: Array<{ label: string; after: number }> = [];
  return {
    asked,
    lists: {
      findLabel: async (label: string, after: number) => {
        asked.push({ label, after });
        return found(asked.length);
      },
      lookAt: async () => null,
    },
  };
}

function actorsWith(
  client: MarketClient,
  lists: InstanceLists = lookups().lists,
  claims = new OfferClaims(),
  ownership: RunOwnership = new SoleOwner(store),
) {
  const specs = { get: () => spec };
  return makeRunActors({
    ...passThroughActorDeps(specs, clock),
    client,
    clock,
    journal: new AttemptJournal(store, ownership),
    specs,
    reconcileGraceMs: GRACE_MS,
    claims,
    lists,
    quarantine: new MachineQuarantine(0, clock),
  });
}

function startCreate(client: MarketClient, lists: InstanceLists = lookups().lists, claims = new OfferClaims(), input: CreateInput = INPUT) {
  const actor = createActor(actorsWith(client, lists, claims).createInstance, { input }).start();
  return { actor, done: toPromise(actor) };
}

const row = (n = 1) => store.attempts.get('run1', n);
const label = () => `berth:${store.storeId}:run1:1`;
const fail = (err: unknown) => async () => Promise.reject(err);

describe('create actor: a fresh attempt', () => {
  it('journals the intent with what the row needs before the call, then records the instance', async () => {
    let rowAtCall: ReturnType<typeof row>;
    const { client, calls } = scripted(async () => {
      rowAtCall = row();
      return { instanceId: 900 };
    });
    const sentAt = clock.now();
    const out = await startCreate(client).done;
    expect(out).toEqual({ kind: 'created', instanceId: 900, createdAt: clock.now(), at: clock.now() });
    expect(rowAtCall!).toMatchObject({
      create_state: 'intent',
      offer_id: 31,
      machine_id: 310,
      dph_total: 0.25,
      label: label(),
      started_at: sentAt,
      gpu_name: 'RTX 4090',
      num_gpus: 2,
    });
    expect(calls.map((c) => [c.offerId, c.request.label])).toEqual([[31, label()]]);
    expect(row()).toMatchObject({ create_state: 'created', instance_id: 900, instance_created_at: sentAt });
  });

  it('an on-demand create answered success: false naming its instance is recorded, and marked to go at once (dstack #4036)', async () => {
    const { client } = scripted(async () => ({ instanceId: 901, unsuccessful: 'success: false, resources_unavailable' }) as never);
    const out = await startCreate(client).done;
    expect(out).toMatchObject({
      kind: 'created',
      instanceId: 901,
      createdStopped: expect.stringMatching(/instance 901 .*resources_unavailable/),
    });
    // Owned by the run before anything else: the machine destroys it.
    expect(row()).toMatchObject({ create_state: 'created', instance_id: 901 });
  });

  it("a bid's success: false naming its instance is its pending answer: followed as any create (issue #30)", async () => {
    const { client } = scripted(async () => ({ instanceId: 902, unsuccessful: 'success: false' }) as never);
    const out = await startCreate(client, lookups().lists, new OfferClaims(), { ...INPUT, bidPrice: 0.2 }).done;
    expect(out).toEqual({ kind: 'created', instanceId: 902, createdAt: clock.now(), at: clock.now() });
  });

  it('an offer gone (410 no_such_ask) moves on without counting it: the row says offer_gone', async () => {
    const { client } = scripted(fail(new OfferGoneError(31, 410)));
    await expect(startCreate(client).done).resolves.toMatchObject({ kind: 'offer_gone' });
    expect(row()).toMatchObject({ create_state: 'offer_gone', instance_id: null });
  });

  it('a 403 about the offer ("not your own") moves on like a gone offer', async () => {
    const { client } = scripted(
      fail(
        new OfferRefusedError(
          31,
          'invalid_args',
          'The marketplace refused offer 31 (403 invalid_args): error 403/3586: Offer 31 is not your own.',
        ),
      ),
    );
    await expect(startCreate(client).done).resolves.toMatchObject({ kind: 'offer_gone', detail: expect.stringContaining('403') });
    expect(row()).toMatchObject({ create_state: 'offer_gone' });
  });

  it('an offer another run of this daemon is trying is skipped without a call', async () => {
    const claims = new OfferClaims();
    claims.claim(31, 'other');
    const { client, calls } = scripted(async () => ({ instanceId: 900 }));
    await expect(startCreate(client, lookups().lists, claims).done).resolves.toMatchObject({
      kind: 'offer_gone',
      detail: expect.stringContaining('other'),
    });
    expect(calls).toHaveLength(0);
    expect(row()).toMatchObject({ create_state: 'offer_gone' });
  });

  it("an offer another daemon's run is trying (a shared store) is skipped without a call, and is free again once that attempt ends", async () => {
    // Two daemons on one store: each its own OfferClaims (in memory), both reading the same attempts table.
    const daemonClaims = () => new OfferClaims(new StoreClaims({ attempts: store.attempts, clock, maxAgeMs: 1000 }));
    store.runs.insert({ id: 'run2', name: 'j', specJson: '{}', createdAt: 0 });
    const first = scripted(() => new Promise(() => undefined));
    const pending = startCreate(first.client, lookups().lists, daemonClaims());
    await clock.settle();
    expect(first.calls).toHaveLength(1);

    const other = daemonClaims();
    const second = scripted(async () => ({ instanceId: 901 }));
    const onRun2 = { ...INPUT, runId: 'run2' };
    await expect(startCreate(second.client, lookups().lists, other, onRun2).done).resolves.toMatchObject({
      kind: 'offer_gone',
      detail: expect.stringContaining('run1'),
    });
    expect(second.calls).toHaveLength(0);
    expect(store.attempts.get('run2', 1)).toMatchObject({ create_state: 'offer_gone' });

    // run1's attempt ends: its offer is free for the other daemon's next attempt.
    store.attempts.setOutcome('run1', 1, 'boot_timeout', null, clock.now());
    await expect(startCreate(second.client, lookups().lists, other, { ...onRun2, n: 2 }).done).resolves.toMatchObject({
      kind: 'created',
      instanceId: 901,
    });
    expect(second.calls.map((c) => c.offerId)).toEqual([31]);
    pending.actor.stop();
  });

  it('a create the service refuses (400) fails this attempt only', async () => {
    const { client } = scripted(
      fail(new ServiceHttpError('bad_request', 400, 'invalid_args', 'The marketplace rejected PUT /api/v0/asks/31/ (400 invalid_args)')),
    );
    await expect(startCreate(client).done).resolves.toMatchObject({ kind: 'create_failed', detail: expect.stringContaining('400') });
    expect(row()).toMatchObject({ create_state: 'failed', create_detail: expect.stringContaining('400') });
  });

  it.each([
    ['a rejected key', new AuthError(undefined, 'auth_error', 404), 'auth'],
    ['a missing permission', new PermissionError('instance_write'), 'permission'],
  ])('%s fails the run: the actor rejects with it and the row says failed', async (_, err, code) => {
    const { client } = scripted(fail(err));
    // The machine gets the error with the policy's verdict and the time (src/daemon/runs/actor-failure.ts).
    await expect(startCreate(client).done).rejects.toMatchObject({ error: { kind: code }, fatal: true, at: clock.now(), cause: err });
    expect(row()).toMatchObject({ create_state: 'failed' });
  });

  it('a stop aborts the call and leaves the intent for the next start to reconcile', async () => {
    const { client, calls } = scripted(
      (signal) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject(new BerthError('aborted', 'stopped')), { once: true })),
    );
    const { actor } = startCreate(client);
    await clock.settle();
    actor.stop();
    await clock.settle();
    expect(calls[0]!.signal.aborted).toBe(true);
    expect(row()).toMatchObject({ create_state: 'intent', instance_id: null });
  });
});

describe('create actor: the ownership fence on a shared store (issue #38 item 7)', () => {
  const LEASE_MS = 30_000;
  /** Daemon a, holding run1's lease as far as it knows (a fresh renewal). */
  function holderA(): LeaseOwner {
    // The database's clock is the fake one here: leases end when the test moves time.
    store.leases.serverNow = () => clock.now();
    const a = new LeaseOwner({ store, clock, daemonId: 'a', leaseMs: LEASE_MS });
    a.renew();
    expect(a.take('run1')).toBe(true);
    return a;
  }
  const startCreateAs = (client: MarketClient, owner: RunOwnership) => {
    const actor = createActor(actorsWith(client, lookups().lists, new OfferClaims(), owner).createInstance, { input: INPUT }).start();
    return toPromise(actor);
  };
  /** The actor's failure, and the error it carries (the run machine's onError gets it). */
  const leaseLost = (err: unknown) => (err as Error).cause instanceof LeaseLostError;

  it('a daemon whose lease another daemon took over (the store says so, it does not know yet) writes no intent and sends no create', async () => {
    const a = holderA();
    // Daemon b took the run once a's lease had ended on the database's clock; a was paused meanwhile
    // and its own clock has not moved, so only the store's fence can stop it.
    expect(store.leases.acquire('run1', 'b', clock.now() + LEASE_MS + 1, LEASE_MS)).toBeDefined();
    const { client, calls } = scripted(async () => ({ instanceId: 900 }));
    expect(leaseLost(await startCreateAs(client, a).catch((e: unknown) => e))).toBe(true);
    expect(row()).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('a daemon that has not renewed its lease for as long as the lease lasts writes no intent and sends no create', async () => {
    const a = holderA();
    await clock.advance(LEASE_MS);
    const { client, calls } = scripted(async () => ({ instanceId: 900 }));
    expect(leaseLost(await startCreateAs(client, a).catch((e: unknown) => e))).toBe(true);
    expect(row()).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('the holder of the lease writes the intent and sends the create', async () => {
    const a = holderA();
    const { client, calls } = scripted(async () => ({ instanceId: 900 }));
    await expect(startCreateAs(client, a)).resolves.toMatchObject({ kind: 'created', instanceId: 900 });
    expect(row()).toMatchObject({ create_state: 'created', instance_id: 900 });
    expect(calls).toHaveLength(1);
  });
});

describe('create actor: an unknown outcome', () => {
  it('an ambiguous create looks for its label and adopts the instance it finds', async () => {
    const { client, calls } = scripted(fail(new AmbiguousCreateError(31, label(), new Error('socket hang up'))));
    const { lists, asked } = lookups((call) =>
      call === 2 ? { id: 901, label: label(), machine_id: 310, actual_status: 'loading' } : null,
    );
    const sentAt = clock.now();
    const { done } = startCreate(client, lists);
    await clock.advance(GRACE_MS / 2);
    await expect(done).resolves.toMatchObject({ kind: 'created', instanceId: 901 });
    expect(calls).toHaveLength(1);
    expect(asked.map((a) => [a.label, a.after - sentAt])).toEqual([
      [label(), 0],
      [label(), GRACE_MS / 2],
    ]);
    expect(row()).toMatchObject({ create_state: 'created', instance_id: 901, instance_created_at: sentAt });
  });

  it('an ambiguous create whose label never appears in 3 lists over the grace period fails the attempt', async () => {
    const { client } = scripted(fail(new AmbiguousCreateError(31, label(), new Error('socket hang up'))));
    const { lists, asked } = lookups();
    const sentAt = clock.now();
    const { done } = startCreate(client, lists);
    await clock.advance(GRACE_MS);
    await expect(done).resolves.toMatchObject({ kind: 'create_failed', detail: expect.stringContaining(label()) });
    expect(asked.map((a) => a.after - sentAt)).toEqual([0, GRACE_MS / 2, GRACE_MS]);
    expect(row()).toMatchObject({ create_state: 'failed', instance_id: null });
  });

  it('an intent left by a crash is never sent again: the label is looked for, and what it finds is adopted', async () => {
    store.attempts.beginCreate({
      runId: 'run1',
      n: 1,
      offerId: 31,
      machineId: 310,
      dphTotal: 0.25,
      label: label(),
      at: clock.now() - 5_000,
    });
    const { client, calls } = scripted(async () => ({ instanceId: 999 }));
    const { lists } = lookups(() => ({ id: 902, label: label(), machine_id: 310, actual_status: 'running' }));
    await expect(startCreate(client, lists).done).resolves.toMatchObject({ kind: 'created', instanceId: 902 });
    expect(calls).toHaveLength(0);
    // Billed from when the lost process journaled the create, the earliest it can have been made.
    expect(row()).toMatchObject({ create_state: 'created', instance_id: 902, instance_created_at: clock.now() - 5_000 });
  });

  it('an intent left by a crash whose label never appears fails the attempt without a call', async () => {
    store.attempts.beginCreate({ runId: 'run1', n: 1, offerId: 31, machineId: 310, dphTotal: 0.25, label: label(), at: clock.now() });
    const { client, calls } = scripted(async () => ({ instanceId: 999 }));
    const { done } = startCreate(client);
    await clock.advance(GRACE_MS);
    await expect(done).resolves.toMatchObject({ kind: 'create_failed' });
    expect(calls).toHaveLength(0);
    expect(row()).toMatchObject({ create_state: 'failed' });
  });
});

describe('create actor: a row already settled (the actor re-run on restore)', () => {
  it('a created row answers with its instance, without a call or a look-up', async () => {
    store.attempts.beginCreate({ runId: 'run1', n: 1, offerId: 31, machineId: 310, dphTotal: 0.25, label: label(), at: 100 });
    store.attempts.adopt('run1', 1, 903, 150);
    const { client, calls } = scripted(async () => ({ instanceId: 999 }));
    const { lists, asked } = lookups();
    await expect(startCreate(client, lists).done).resolves.toEqual({ kind: 'created', instanceId: 903, createdAt: 150, at: clock.now() });
    expect([calls.length, asked.length]).toEqual([0, 0]);
  });

  it.each([
    ['offer_gone', 'offer_gone'],
    ['failed', 'create_failed'],
  ] as const)('a row that says %s answers %s again', async (state, kind) => {
    store.attempts.beginCreate({ runId: 'run1', n: 1, offerId: 31, machineId: 310, dphTotal: 0.25, label: label(), at: 100 });
    store.attempts.notCreated('run1', 1, state, 'earlier');
    const { client, calls } = scripted(async () => ({ instanceId: 999 }));
    await expect(startCreate(client).done).resolves.toEqual({ kind, detail: 'earlier', at: clock.now() });
    expect(calls).toHaveLength(0);
  });
});

describe('boot deadline actor: one more look before the destroy (issue #18)', () => {
  const LOOK = { runId: 'run1', n: 1, instanceId: 500, until: 0, readyWhen: 'status' as const };
  const looked = (answer: () => Promise<Instance | null>) => ({
    findLabel: async () => null,
    lookAt: (id: number, after: number) => {
      asked.push({ id, after });
      return answer();
    },
  });
  let asked: Array<{ id: number; after: number }>;
  beforeEach(() => {
    asked = [];
  });

  it('at the deadline, looks at the instance once (dated after the deadline) and answers what the list showed', async () => {
    const lists = looked(async () => ({ id: 500, actual_status: 'running', machine_id: 1 }) as Instance);
    const actor = createActor(actorsWith({} as MarketClient, lists).bootDeadline, { input: { ...LOOK, until: clock.now() + 60_000 } });
    const done = toPromise(actor.start());
    await clock.advance(59_999);
    expect(asked).toEqual([]);
    await clock.advance(1);
    expect(await done).toMatchObject({ at: clock.now(), look: { instance: { id: 500, actual_status: 'running' }, reachable: null } });
    expect(asked).toEqual([{ id: 500, after: clock.now() }]);
  });

  it('answers null when no list answers within the grace (an outage): the run judges by what it last saw', async () => {
    const lists = looked(() => new Promise<never>(() => undefined));
    const actor = createActor(actorsWith({} as MarketClient, lists).bootDeadline, { input: { ...LOOK, until: clock.now() } });
    const done = toPromise(actor.start());
    const t0 = clock.now();
    await clock.advance(GRACE_MS);
    expect(await done).toEqual({ at: t0, look: null });
  });
});

describe('create actor: a task’s daemon-free backstop (issue #29)', () => {
  it('is sized from what the run has left, not its whole limits, and sleeps until an absolute time', async () => {
    const taskSpec = planRun(
      parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1, run: 'python train.py', max_runtime_s: 3600, budget_usd: 10 }),
      RUNS_CONFIG,
    );
    const { client, calls } = scripted(async () => ({ instanceId: 900 }));
    const specs = { get: () => taskSpec };
    const actors = makeRunActors({
      ...passThroughActorDeps(specs, clock),
      client,
      clock,
      journal: new AttemptJournal(store, new SoleOwner(store)),
      specs,
      reconcileGraceMs: GRACE_MS,
      claims: new OfferClaims(),
      lists: lookups().lists,
      quarantine: new MachineQuarantine(0, clock),
      money: {
        // An earlier attempt ran 3,000 s and spent $9: 600 s and $1 are left.
        guard: { affordable: (_r, candidates) => ({ candidates }), bidRefusal: () => null, left: () => ({ runtimeS: 600, usd: 1 }) },
        gate: { admit: async (_i, _s, start) => start(), bidHold: () => null },
      },
    });
    await toPromise(createActor(actors.createInstance, { input: { ...INPUT, n: 2 } }).start());
    const onstart = calls[0]!.request.onstart!;
    // The runtime left plus the boot timeout (660 s) comes before what $1 buys at $0.25/h (4 h),
    // plus the 600 s grace: 1,260 s from the create, as an absolute time.
    const at = Math.ceil(clock.now() / 1000 + 1260);
    expect(onstart).toContain(`berth_w=$(( ${at} - $(date +%s 2>/dev/null || echo ${Math.floor(clock.now() / 1000)}) ))`);
  });
});
