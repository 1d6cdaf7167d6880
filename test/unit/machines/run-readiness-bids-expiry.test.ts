// The run machine's readiness (SSH banner, onstart callback), interruptible runs that are outbid
// (rebid, fail over, fall back to on-demand) and runs ended by the money guard (EXPIRE).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { BidPolicy, RunLimits } from '../../../machines/run-machine.js';
import { nextBid } from '../../../machines/run-rules.js';
import { FakeWorld, confirmGone, currentInstanceId, endedAttempts, poll, startRun, stateOf, status, tick } from './harness.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

async function admitted(world: FakeWorld, limits: Partial<RunLimits> = {}) {
  const run = startRun(world, { limits });
  run.actor.send({ type: 'ADMIT' });
  await tick(0);
  return run;
}

const outbid = (id: number) => status(id, 'stopped', { intended_status: 'running', status_msg: 'outbid' });
const BID: BidPolicy = { price: 'min', stepPct: 50, onOutbid: 'rebid', rebidWaitS: 20 };

describe('readiness by SSH', () => {
  it('waits for an SSH banner after the list shows running, then is ready with the endpoints that answered', async () => {
    const world = new FakeWorld();
    world.probeAnswer = 'never';
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh' });
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'running'));
    expect(stateOf(actor)).toBe('booting');
    expect(world.probes).toEqual([
      {
        runId: 'r1',
        n: 1,
        instanceId: id,
        endpoints: [
          { kind: 'proxy', host: 'ssh1.example', port: 40022 },
          { kind: 'direct', host: '203.0.113.7', port: 41022 },
        ],
      },
    ]);
    // The probe answers on a later try.
    world.probeAnswer = 'all';
    await poll(actor, status(id, 'running', { ssh_port: 40023 })); // the service moved the proxy port
    expect(stateOf(actor)).toBe('running');
    expect(world.probes).toHaveLength(2);
    expect(world.probes[1]!.endpoints[0]).toMatchObject({ port: 40023 });
    const ready = emitted.find((e) => e.type === 'attempt.running');
    expect(ready).toMatchObject({
      via: 'ssh',
      reachable: [
        { kind: 'proxy', port: 40023 },
        { kind: 'direct', port: 41022 },
      ],
    });
  });

  it('after the banner, logs in to the endpoints that answered (until the SSH deadline) and is ready by that login', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh', sshTimeoutS: 30, bootTimeoutS: 600 });
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(world.logins).toEqual([
      {
        runId: 'r1',
        n: 1,
        instanceId: id,
        endpoints: [
          { kind: 'proxy', host: 'ssh1.example', port: 40022 },
          { kind: 'direct', host: '203.0.113.7', port: 41022 },
        ],
        until: Date.now() + 30_000,
      },
    ]);
    expect(emitted.filter((e) => e.type === 'attempt.running')).toEqual([
      expect.objectContaining({ via: 'ssh', login: { ok: true }, reachable: world.logins[0]!.endpoints }),
    ]);
  });

  it('a login that never works by the SSH deadline: ready by the banner (never destroyed), the one running event saying why', async () => {
    const world = new FakeWorld();
    world.loginAnswer = 'deadline';
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh', sshTimeoutS: 30, bootTimeoutS: 600 });
    await poll(actor, status(100, 'running'));
    await tick(29_000);
    expect(actor.getSnapshot().value).toEqual({ booting: 'loggingIn' });
    await tick(1_000);
    expect(stateOf(actor)).toBe('running');
    const ready = emitted.filter((e) => e.type === 'attempt.running');
    expect(ready).toEqual([
      expect.objectContaining({ via: 'ssh', login: expect.objectContaining({ ok: false, code: 'ssh_auth_refused' }) }),
    ]);
    expect(emitted.filter((e) => e.type === 'attempt.ending')).toEqual([]);
    expect(world.destroys).toEqual([]);
  });

  it('a login actor that fails outright still leaves the instance ready by its banner, with the failure as the reason', async () => {
    const world = new FakeWorld();
    world.loginAnswer = Object.assign(new Error('something broke'), { code: 'internal' });
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh' });
    await poll(actor, status(100, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(emitted.find((e) => e.type === 'attempt.running')).toMatchObject({
      via: 'ssh',
      login: { ok: false, why: expect.stringContaining('something broke') },
    });
    expect(world.destroys).toEqual([]);
  });

  it('a login restored from a snapshot is tried again with the same deadline', async () => {
    const world = new FakeWorld();
    world.loginAnswer = 'deadline';
    const limits = { readyWhen: 'ssh' as const, sshTimeoutS: 30, bootTimeoutS: 600 };
    const { actor } = await admitted(world, limits);
    await poll(actor, status(100, 'running'));
    await tick(10_000);
    const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as never;
    actor.stop();
    world.loginAnswer = { ok: true };
    const restored = startRun(world, { limits, snapshot: stored });
    await tick(0);
    expect(stateOf(restored.actor)).toBe('running');
    expect(world.logins).toHaveLength(2);
    expect(world.logins[1]!.until).toBe(world.logins[0]!.until);
    expect(restored.emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ login: { ok: true } });
  });

  it('replaces an instance that runs but never answers SSH within sshTimeoutS (unreachable: offer and machine blocked)', async () => {
    const world = new FakeWorld();
    world.probeAnswer = 'never';
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh', sshTimeoutS: 30, bootTimeoutS: 600 });
    await poll(actor, status(100, 'running'));
    await tick(29_000);
    expect(stateOf(actor)).toBe('booting');
    await tick(1_000);
    expect(stateOf(actor)).toBe('destroying');
    expect(emitted.find((e) => e.type === 'attempt.ending')).toMatchObject({ outcome: 'unreachable' });
    await confirmGone(actor);
    const ended = endedAttempts(emitted)[0]!;
    expect(ended).toMatchObject({ outcome: 'unreachable', instanceId: 100 });
    expect(ended.detail).toContain('ssh1.example:40022 and 203.0.113.7:41022');
    expect(actor.getSnapshot().context).toMatchObject({ blockedOffers: [1], blockedMachines: [10] });
    expect(actor.getSnapshot().context.current?.offerId).toBe(2);
  });

  it('a task restored while it waited for SSH, now ready by status (#37), is running when the wait runs out, not unreachable', async () => {
    const world = new FakeWorld();
    world.probeAnswer = 'never';
    const limits = { task: true, sshTimeoutS: 30, bootTimeoutS: 600 };
    const { actor } = await admitted(world, { ...limits, readyWhen: 'ssh' });
    await poll(actor, status(100, 'running'));
    expect(stateOf(actor)).toBe('booting');
    // Restored by an upgraded daemon: its stored spec migrated, its limits taken afresh (run-driver.ts).
    const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as { context: { limits: RunLimits } };
    actor.stop();
    stored.context.limits = { ...stored.context.limits, readyWhen: 'status' };
    const restored = startRun(world, { limits: { ...limits, readyWhen: 'status' }, snapshot: stored as never });
    await tick(30_000);
    expect(stateOf(restored.actor)).toBe('running');
    expect(restored.emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ via: 'status', n: 1 });
    expect(restored.emitted.filter((e) => e.type === 'attempt.ending')).toEqual([]);
  });

  it('ends the SSH wait at the boot deadline when the boot timeout is the shorter (unreachable, not boot_timeout)', async () => {
    const world = new FakeWorld();
    world.probeAnswer = 'never';
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh', sshTimeoutS: 180, bootTimeoutS: 40 });
    await tick(10_000);
    await poll(actor, status(100, 'running'));
    await tick(29_000);
    expect(stateOf(actor)).toBe('booting');
    await tick(1_000);
    expect(stateOf(actor)).toBe('destroying');
    expect(emitted.find((e) => e.type === 'attempt.ending')).toMatchObject({ outcome: 'unreachable' });
  });

  it('is ready by status alone when ready_when is "status" (no probe)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { readyWhen: 'status' });
    await poll(actor, status(100, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(world.probes).toHaveLength(0);
    expect(emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ via: 'status', reachable: null });
  });

  it('is ready at once on the onstart callback of the current attempt, and ignores one for another attempt', async () => {
    const world = new FakeWorld();
    world.probeAnswer = 'never';
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh' });
    await poll(actor, status(100, 'loading'));
    actor.send({ type: 'READY', n: 7 });
    expect(stateOf(actor)).toBe('booting');
    actor.send({ type: 'READY', n: 1 });
    expect(stateOf(actor)).toBe('running');
    expect(emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ via: 'callback' });
    // The list still has the last word: a failure after the callback is a lost instance.
    await poll(actor, status(100, 'exited'));
    expect(stateOf(actor)).toBe('destroying');
  });
});

describe('the boot deadline (issue #18, found while measuring)', () => {
  it('says which bound ended the SSH wait: the boot deadline when it came first, readiness.ssh_timeout_s otherwise', async () => {
    const world = new FakeWorld();
    world.probeAnswer = 'never';
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh', sshTimeoutS: 180, bootTimeoutS: 2 });
    await tick(500);
    await poll(actor, status(100, 'running'));
    await tick(1_500);
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]!.detail).toMatch(
      /did not answer with a banner within 1\.5 s of being listed running: the boot deadline \(boot_timeout_s, 2 s\) ended the wait$/,
    );
    expect(endedAttempts(emitted)[0]!.detail).not.toMatch(/180/);

    const other = new FakeWorld();
    other.probeAnswer = 'never';
    const second = await admitted(other, { readyWhen: 'ssh', sshTimeoutS: 30, bootTimeoutS: 600 });
    await poll(second.actor, status(100, 'running'));
    await tick(30_000);
    await confirmGone(second.actor);
    expect(endedAttempts(second.emitted)[0]!.detail).toMatch(/did not answer with a banner within 30 s \(readiness\.ssh_timeout_s\)$/);
  });

  it('looks once more at the instance before destroying it: running by that look, it is kept (ready by status)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { readyWhen: 'status', bootTimeoutS: 60 });
    await poll(actor, status(100, 'loading')); // the last list the run saw, older than the deadline
    world.lookAnswer = { instance: status(100, 'running'), reachable: null };
    await tick(60_000);
    expect(world.looks).toMatchObject([{ runId: 'r1', n: 1, instanceId: 100, readyWhen: 'status' }]);
    expect(stateOf(actor)).toBe('running');
    expect(world.destroys).toEqual([]);
    expect(emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ via: 'status', status: { actual_status: 'running' } });
  });

  it('running by the last look with readiness by SSH: kept when SSH answered that look, else replaced as unreachable', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { readyWhen: 'ssh', bootTimeoutS: 60 });
    const endpoint = { kind: 'proxy' as const, host: 'ssh1.example', port: 40022 };
    world.lookAnswer = { instance: status(100, 'running'), reachable: [endpoint] };
    await tick(60_000);
    expect(stateOf(actor)).toBe('running');
    expect(emitted.find((e) => e.type === 'attempt.running')).toMatchObject({ via: 'ssh', reachable: [endpoint] });

    const other = new FakeWorld();
    const second = await admitted(other, { readyWhen: 'ssh', bootTimeoutS: 60 });
    other.lookAnswer = { instance: status(100, 'running'), reachable: null };
    await tick(60_000);
    await confirmGone(second.actor);
    const ended = endedAttempts(second.emitted)[0]!;
    expect(ended.outcome).toBe('unreachable');
    expect(ended.detail).toMatch(
      /first listed running by a last look at its boot deadline \(boot_timeout_s, 60 s\), and SSH at ssh1\.example:40022/,
    );
  });

  it('still not ready by the last look (or no list answered): destroyed, saying what that look showed', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { readyWhen: 'status', bootTimeoutS: 60 });
    await poll(actor, status(100, 'created'));
    world.lookAnswer = { instance: status(100, 'loading'), reachable: null };
    await tick(60_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'boot_timeout', detail: 'instance 100 still loading after 60 s' });

    const other = new FakeWorld(); // lookAnswer null: the list did not answer in time
    const second = await admitted(other, { readyWhen: 'status', bootTimeoutS: 60 });
    await poll(second.actor, status(100, 'created'));
    await tick(60_000);
    await confirmGone(second.actor);
    expect(endedAttempts(second.emitted)[0]).toMatchObject({ outcome: 'boot_timeout', detail: 'instance 100 still created after 60 s' });
  });
});

describe('the boot deadline of a snapshot stored before the last look existed', () => {
  it('a booting run restored with its deadline as a plain sleep still replaces the instance at the deadline', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { readyWhen: 'status', bootTimeoutS: 60 });
    await poll(actor, status(100, 'loading'));
    const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as { children: Record<string, { src: string }> };
    actor.stop();
    const deadline = Object.values(stored.children).find((c) => c.src === 'bootDeadline')!;
    deadline.src = 'sleepUntil'; // how machine v3 stored it
    const restored = startRun(world, { limits: { readyWhen: 'status', bootTimeoutS: 60 }, snapshot: stored as never });
    await tick(60_000);
    expect(world.looks).toEqual([]);
    expect(stateOf(restored.actor)).toBe('destroying');
    expect(restored.actor.getSnapshot().context.current?.ending).toMatchObject({
      outcome: 'boot_timeout',
      detail: 'instance 100 still loading after 60 s',
    });
  });
});

describe('interruptible runs that are outbid', () => {
  it('raises the bid by stepPct and goes back to booting when the instance starts again', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { bid: BID, maxPricePerHour: 1 });
    expect(world.serviceCreates[0]).toMatchObject({ bidPrice: 0.2 }); // the offer's min_bid
    await poll(actor, status(100, 'running'));
    expect(stateOf(actor)).toBe('running');
    await poll(actor, outbid(100));
    expect(stateOf(actor)).toBe('rebidding');
    expect(world.bids).toEqual([{ runId: 'r1', n: 1, instanceId: 100, price: 0.3, dphTotal: 0.35 }]);
    // What the instance bills from now on (the money guard's new price): the bid plus the disk.
    expect(emitted.find((e) => e.type === 'bid.raised')).toMatchObject({ price: 0.3, dphTotal: 0.35 });
    await poll(actor, status(100, 'loading'));
    expect(stateOf(actor)).toBe('booting');
    await poll(actor, status(100, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(world.destroys).toHaveLength(0);
  });

  it('is running again on the one poll that shows the outbid instance restarted and running (no second poll needed)', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { bid: BID, maxPricePerHour: 1 });
    await poll(actor, status(100, 'running'));
    await poll(actor, outbid(100));
    expect(stateOf(actor)).toBe('rebidding');
    await poll(actor, status(100, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(world.destroys).toHaveLength(0);
  });

  it('raises again while it stays stopped, and fails over once the bid reaches the cap (bid + disk <= cap)', async () => {
    const world = new FakeWorld();
    // Cap 0.45 and 0.05 disk: bids may go up to 0.40. 0.2 → 0.3 → 0.4 → cannot raise → fail over.
    const { actor, emitted } = await admitted(world, { bid: BID, maxPricePerHour: 0.45 });
    await poll(actor, status(100, 'running'));
    await poll(actor, outbid(100));
    expect(world.bids.map((b) => b.price)).toEqual([0.3]);
    // Still outbid, its record showing the new bid: it waits, it does not count as a failure.
    await poll(actor, { ...outbid(100), dph_total: 0.35 });
    expect(stateOf(actor)).toBe('rebidding');
    await tick(BID.rebidWaitS * 1000);
    expect(world.bids.map((b) => b.price)).toEqual([0.3, 0.4]);
    expect(stateOf(actor)).toBe('rebidding');
    await tick(BID.rebidWaitS * 1000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    const ended = endedAttempts(emitted)[0]!;
    expect(ended.outcome).toBe('outbid');
    expect(ended.detail).toContain('price cap');
    // An outbid is the market, not the machine: the offer is blocked, the machine is not.
    expect(actor.getSnapshot().context).toMatchObject({ blockedOffers: [1], blockedMachines: [] });
    expect(actor.getSnapshot().context.current?.offerId).toBe(2);
  });

  it('fails over to the next offer at once with on_outbid "failover", the deadline starting afresh', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { bid: { ...BID, onOutbid: 'failover' }, deadlineS: 60 });
    await poll(actor, status(100, 'running'));
    await tick(120_000);
    await poll(actor, outbid(100));
    expect(stateOf(actor)).toBe('destroying');
    expect(world.bids).toHaveLength(0);
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'outbid' });
    expect(stateOf(actor)).toBe('booting');
  });

  it('falls back to on-demand offers with on_outbid "on_demand"', async () => {
    const world = new FakeWorld();
    world.searchResults = [offers2(1, 2), offers2(3)];
    const { actor, emitted } = await admitted(world, { bid: { ...BID, onOutbid: 'on_demand' } });
    expect(world.searches[0]).toMatchObject({ searchType: 'bid' });
    await poll(actor, status(100, 'running'));
    await poll(actor, outbid(100));
    await confirmGone(actor);
    expect(emitted.some((e) => e.type === 'search.switched')).toBe(true);
    // The bid candidates are dropped: the next attempt comes from an on-demand search, with no bid.
    expect(world.searches[1]).toMatchObject({ searchType: 'on-demand' });
    expect(world.serviceCreates.at(-1)).toMatchObject({ offerId: 3, bidPrice: null });
  });

  it('treats a bid create that comes back stopped like an outbid (never left billing its disk)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { bid: { ...BID, onOutbid: 'failover' } });
    await poll(actor, outbid(100));
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'outbid', instanceId: 100 });
  });

  it('reads a stopped on-demand instance as lost, not outbid', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    await poll(actor, status(100, 'running'));
    await poll(actor, outbid(100));
    await confirmGone(actor);
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'lost' });
  });

  it('never bids past the cap less the disk, and never lowers a bid', () => {
    const limits = { bid: BID, maxPricePerHour: 1 };
    expect(nextBid(limits, { bidPrice: 0.2, diskDph: 0.05 })).toBe(0.3);
    expect(nextBid(limits, { bidPrice: 0.9, diskDph: 0.05 })).toBe(0.95);
    expect(nextBid(limits, { bidPrice: 0.95, diskDph: 0.05 })).toBeNull();
    expect(nextBid({ bid: null, maxPricePerHour: 1 }, { bidPrice: 0.2, diskDph: 0 })).toBeNull();
  });
});

describe('runs ended by the money guard (EXPIRE)', () => {
  const reason = { kind: 'max_runtime' as const, message: 'ran 3600 s (max_runtime_s)' };

  it.each(['queued', 'searching'])('ends a %s run at once: expired, no instance held', async (where) => {
    const world = new FakeWorld();
    world.defaultSearch = Object.assign(new Error('503'), { code: 'server_error' });
    const run = startRun(world);
    if (where === 'searching') {
      run.actor.send({ type: 'ADMIT' });
      await tick(0);
    }
    run.actor.send({ type: 'EXPIRE', reason });
    expect(stateOf(run.actor)).toBe('expired');
    expect(run.actor.getSnapshot().context.error).toEqual(reason);
    expect(run.emitted.at(-1)).toMatchObject({ type: 'run.expired', error: reason });
  });

  it.each(['booting', 'running'])('destroys the instance of a %s run, then ends it expired', async (where) => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    if (where === 'running') await poll(actor, status(100, 'running'));
    actor.send({ type: 'EXPIRE', reason });
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('expired');
    expect(endedAttempts(emitted)[0]).toMatchObject({ outcome: 'expired', detail: reason.message });
    expect(world.serviceCreates).toHaveLength(1);
  });

  it('waits for a create in flight, destroys what it made, then ends expired', async () => {
    const world = new FakeWorld();
    world.holdCreates = true;
    const { actor } = await admitted(world);
    actor.send({ type: 'EXPIRE', reason });
    expect(stateOf(actor)).toBe('creating');
    world.releaseCreates();
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('expired');
  });

  it('ends expired after an ongoing destroy, whatever that destroy was for', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    await poll(actor, status(100, 'exited'));
    expect(stateOf(actor)).toBe('destroying');
    actor.send({ type: 'EXPIRE', reason });
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('expired');
    expect(world.serviceCreates).toHaveLength(1);
  });

  it('a cancel already asked for wins over a later expiry', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    actor.send({ type: 'CANCEL' });
    actor.send({ type: 'EXPIRE', reason });
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
  });

  it('ends expired (budget) when offers match but the remaining budget pays for none of them', async () => {
    const world = new FakeWorld();
    const exhausted = { kind: 'budget' as const, message: 'the remaining $0.01 of budget_usd cannot pay for any matching offer to boot' };
    // A search that found offers, none of them affordable.
    world.searchResults = [{ candidates: [], exhausted }];
    const run = startRun(world, { limits: { relaxSteps: 0 } });
    run.actor.send({ type: 'ADMIT' });
    await tick(0);
    expect(stateOf(run.actor)).toBe('expired');
    expect(run.actor.getSnapshot().context.error).toEqual(exhausted);
  });
});

function offers2(...ids: number[]) {
  return ids.map((id) => ({ offerId: id, machineId: id * 10, dphTotal: 0.5, minBid: 0.2, diskDph: 0.05 }));
}
