// The poller on a fake clock against a fake account whose list keeps the service's pace (one call
// per `spacing`, as berth's list limiter does): every schedule below is exact.
import { afterEach, describe, expect, it } from 'vitest';
import type { Instance, InstancePage, InstancePageQuery, MarketClient } from '../../../../src/client/types.js';
import { BerthError } from '../../../../src/errors.js';
import { InstancePoller, type PollSubscriber, type SharedView } from '../../../../src/daemon/instances/poller.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const INTERVAL = 10_000;
const SPACING = 1_000;

interface Call {
  at: number;
  kind: 'sweep' | 'ids' | 'labels' | 'moved';
  ids?: number[];
}

/** An account of `count` instances (ids 1000..), listed 25 per page in id order. */
function fakeAccount(clock: FakeClock, count: number) {
  const instances: Instance[] = Array.from({ length: count }, (_, i) => ({
    id: 1000 + i,
    label: `foreign-${i}`,
    machine_id: 1,
    actual_status: 'running',
  }));
  const calls: Call[] = [];
  let lastAt = Number.NEGATIVE_INFINITY;
  let failNext = 0;
  let refuseStatusFilter = false;
  const client = {
    async listInstancePage(q: InstancePageQuery, opts?: { signal?: AbortSignal }): Promise<InstancePage> {
      // The list limiter: one call per SPACING.
      await clock.sleepUntil(lastAt + SPACING, opts?.signal);
      lastAt = clock.now();
      const idIn = q.filters?.['id']?.['in'] as number[] | undefined;
      const labelIn = q.filters?.['label']?.['in'] as string[] | undefined;
      const statusIn = q.filters?.['actual_status']?.['in'] as string[] | undefined;
      calls.push({
        at: clock.now(),
        kind: statusIn ? 'moved' : idIn ? 'ids' : labelIn ? 'labels' : 'sweep',
        ...(idIn ? { ids: idIn } : {}),
      });
      if (failNext > 0) {
        failNext--;
        throw new BerthError('server_error', 'list failed');
      }
      if (statusIn && refuseStatusFilter) throw new BerthError('bad_request', 'invalid select_filters');
      const matching = instances.filter(
        (i) =>
          (!idIn || idIn.includes(i.id)) &&
          (!labelIn || labelIn.includes(i.label ?? '')) &&
          (!statusIn || (i.actual_status !== null && statusIn.includes(i.actual_status))),
      );
      const after = q.afterToken ? Number(q.afterToken) : 0;
      const rest = matching.filter((i) => i.id > after);
      const page = rest.slice(0, 25).map((i) => ({ ...i }));
      return { instances: page, nextToken: rest.length > 25 ? String(page.at(-1)!.id) : null, total: matching.length };
    },
  } as unknown as MarketClient;
  return { client, instances, calls, failNextCalls: (n: number) => (failNext = n), refuseStatusFilter: () => (refuseStatusFilter = true) };
}

/**
 * `waited`: ids waited on for any change or absence; `booting`: ids waited on for a status other than
 * loading; `tasks`: running tasks' ids, waited on for a status other than running.
 */
function recorder(waited: () => number[] = () => [], booting: () => number[] = () => [], tasks: () => number[] = () => []) {
  const seen: Array<{ at: number; ids: number[] }> = [];
  const absent: Array<{ at: number; ids: number[] }> = [];
  const sweeps: Array<{ startedAt: number; count: number }> = [];
  const subscriber: PollSubscriber = {
    waited: () => ({ forStatus: booting(), forAbsence: waited(), forEnd: tasks() }),
    onSeen: (instances, at) => void seen.push({ at, ids: instances.map((i) => i.id) }),
    onAbsent: (ids, at) => void absent.push({ at, ids }),
    onSweep: (instances, startedAt) => void sweeps.push({ startedAt, count: instances.length }),
  };
  return { subscriber, seen, absent, sweeps };
}

let poller: InstancePoller | undefined;
afterEach(async () => {
  await poller?.stop();
  poller = undefined;
});

function start(clock: FakeClock, client: MarketClient, subscriber: PollSubscriber, shared?: SharedView): InstancePoller {
  poller = new InstancePoller({
    client,
    clock,
    intervalMs: INTERVAL,
    listSpacingMs: SPACING,
    log: silentLogger(),
    ...(shared ? { shared } : {}),
  });
  poller.subscribe(subscriber);
  poller.start();
  return poller;
}

describe('the poller, small account (one page)', () => {
  it('makes exactly one call per interval: a one-page sweep that also answers the waited ids', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 10);
    const rec = recorder(() => [1003, 999]);
    start(clock, account.client, rec.subscriber);
    await clock.advance(3 * INTERVAL - 1);
    expect(account.calls).toEqual([
      { at: 0, kind: 'sweep' },
      { at: 10_000, kind: 'sweep' },
      { at: 20_000, kind: 'sweep' },
    ]);
    expect(rec.sweeps).toEqual([
      { startedAt: 0, count: 10 },
      { startedAt: 10_000, count: 10 },
      { startedAt: 20_000, count: 10 },
    ]);
    expect(rec.seen[0]!.ids).toContain(1003);
  });
});

describe('the poller, 1,000 instances (40 pages)', () => {
  it('lists the waited ids at the start of every interval, never delayed by the sweep', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const rec = recorder(() => [1500, 99]);
    start(clock, account.client, rec.subscriber);
    await clock.advance(10 * INTERVAL - 1);
    const targeted = account.calls.filter((c) => c.kind === 'ids');
    // The first round sweeps first (the account's size is not known yet), then every targeted
    // list goes exactly on the interval.
    expect(targeted.map((c) => c.at)).toEqual([1000, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 90_000]);
    expect(targeted[1]!.ids).toEqual([1500, 99]);
    // Id 99 is not on the account: each targeted list says so, dated from when it was asked for
    // (the first waited at the limiter behind the first sweep page: never dated later than sent).
    expect(rec.absent.map((a) => a.at)).toEqual([0, ...targeted.slice(1).map((c) => c.at)]);
    expect(rec.absent.every((a) => a.ids.length === 1 && a.ids[0] === 99)).toBe(true);
  });

  it('sweeps the whole account in the rest of the budget, page by page, and hands it over when complete', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const rec = recorder(() => [1500]);
    start(clock, account.client, rec.subscriber);
    await clock.advance(60 * SPACING);
    const sweepCalls = account.calls.filter((c) => c.kind === 'sweep');
    // 9 pages fit between two targeted lists (a 10th would take the next interval's slot).
    expect(sweepCalls.filter((c) => c.at > 10_000 && c.at < 20_000).map((c) => c.at)).toEqual([
      11_000, 12_000, 13_000, 14_000, 15_000, 16_000, 17_000, 18_000, 19_000,
    ]);
    expect(rec.sweeps[0]).toEqual({ startedAt: 0, count: 1000 });
    // Calls never come closer than the list budget allows: nothing waits at the limiter but itself.
    const gaps = account.calls.slice(1).map((c, i) => c.at - account.calls[i]!.at);
    expect(Math.min(...gaps)).toBe(SPACING);
  });

  it('sees a booting instance running at the next interval, however large the account', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const booting = account.instances[700]!;
    booting.actual_status = 'loading';
    const rec = recorder(() => [booting.id]);
    start(clock, account.client, rec.subscriber);
    await clock.advance(12_000);
    booting.actual_status = 'running';
    await clock.advance(8_000);
    const seenRunning = rec.seen.find((s) => s.at >= 12_000 && s.ids.includes(booting.id));
    expect(seenRunning?.at).toBe(20_000);
  });

  it('with 300 instances booting at once, asks only for those that left loading: one call per round, none read as absent', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const booting = account.instances.slice(100, 400);
    for (const b of booting) b.actual_status = 'loading';
    const rec = recorder(
      () => [],
      () => booting.map((b) => b.id),
    );
    start(clock, account.client, rec.subscriber);
    await clock.advance(12_000);
    booting[250]!.actual_status = 'running';
    booting[10]!.actual_status = 'exited';
    await clock.advance(9_000);
    // Rounds at 0 (after the first sweep page), 10 and 20 s: two calls each (the 300 ids in chunks
    // of 200), where reading every booting instance would take 12.
    const moved = account.calls.filter((c) => c.kind === 'moved');
    expect(moved.map((c) => c.at)).toEqual([1_000, 2_000, 10_000, 11_000, 20_000, 21_000]);
    expect(account.calls.filter((c) => c.kind === 'ids')).toEqual([]);
    const seenAt20 = rec.seen.filter((x) => x.at >= 20_000).flatMap((x) => x.ids);
    expect(seenAt20).toEqual(expect.arrayContaining([booting[250]!.id, booting[10]!.id]));
    // Still loading is not absent: only complete sweeps may say an instance is gone.
    expect(rec.absent).toEqual([]);
  });

  it('goes back to 25 ids a call for good when the service refuses the list by status', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    account.refuseStatusFilter();
    const booting = account.instances.slice(100, 400);
    for (const b of booting) b.actual_status = 'loading';
    const rec = recorder(
      () => [],
      () => booting.map((b) => b.id),
    );
    start(clock, account.client, rec.subscriber);
    await clock.advance(12_000);
    booting[250]!.actual_status = 'running';
    await clock.advance(20_000);
    // Asked once, refused, and never again; the same round reads all 300 ids, 25 a call.
    expect(account.calls.filter((c) => c.kind === 'moved').map((c) => c.at)).toEqual([1_000]);
    const firstRound = account.calls.filter((c) => c.kind === 'ids').slice(0, 12);
    expect(firstRound.map((c) => c.at)).toEqual(Array.from({ length: 12 }, (_, i) => 2_000 + i * 1_000));
    expect(firstRound.flatMap((c) => c.ids)).toEqual(booting.map((b) => b.id));
    expect(rec.seen.some((x) => x.at >= 12_000 && x.ids.includes(booting[250]!.id))).toBe(true);
    expect(rec.absent).toEqual([]);
  });

  it("sees a task's instance stop itself at the next interval, however large the account: one call for all running tasks, none read as absent", async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const tasks = account.instances.slice(500, 800);
    const rec = recorder(
      () => [],
      () => [],
      () => [...tasks.map((t) => t.id), 999_999],
    );
    start(clock, account.client, rec.subscriber);
    await clock.advance(12_000);
    tasks[290]!.actual_status = 'stopped';
    tasks[3]!.actual_status = 'exited';
    await clock.advance(9_000);
    // Every round asks for the 301 running tasks by status: two calls (200 ids each), answered with
    // only the instances that stopped, never read as absent (999,999 is nowhere).
    const moved = account.calls.filter((c) => c.kind === 'moved');
    expect(moved.map((c) => c.at)).toEqual([1_000, 2_000, 10_000, 11_000, 20_000, 21_000]);
    // Both calls of a round are dated from when the round asked (the second waited at the limiter).
    expect(rec.seen.filter((x) => x.at === 10_000).flatMap((x) => x.ids)).toEqual([]);
    expect(rec.seen.filter((x) => x.at === 20_000).flatMap((x) => x.ids)).toEqual([tasks[3]!.id, tasks[290]!.id]);
    expect(rec.absent).toEqual([]);
  });

  it('keeps the plain id list, absence included, for up to a page of booting instances', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const rec = recorder(
      () => [],
      () => [1005, 999_999],
    );
    start(clock, account.client, rec.subscriber);
    await clock.advance(1_000);
    expect(account.calls.map((c) => c.kind)).toEqual(['sweep', 'ids']);
    expect(account.calls[1]).toMatchObject({ ids: [1005, 999_999] });
    expect(rec.absent).toEqual([{ at: 0, ids: [999_999] }]); // dated from when it was asked for
  });

  it('never starves the sweep: every interval gets a page even when the targeted list fills it', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    // 300 waited ids: 12 targeted calls, longer than the interval.
    const rec = recorder(() => Array.from({ length: 300 }, (_, i) => 1000 + i));
    start(clock, account.client, rec.subscriber);
    await clock.advance(100_000);
    const kinds = account.calls.map((c) => c.kind);
    const rounds = kinds
      .join(',')
      .split('sweep')
      .filter((r) => r.length > 0);
    expect(kinds.filter((k) => k === 'sweep').length).toBeGreaterThanOrEqual(7);
    // Between two sweep pages there is at most one whole targeted round (12 calls).
    for (const r of rounds) expect(r.split(',').filter((k) => k === 'ids').length).toBeLessThanOrEqual(12);
  });
});

describe('failures and look-ups', () => {
  it('a failed list is skipped, not read as absence, and not tried again until the next interval', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const rec = recorder(() => [99]);
    start(clock, account.client, rec.subscriber);
    await clock.advance(INTERVAL - 1);
    const before = account.calls.length;
    const absentBefore = rec.absent.length;
    account.failNextCalls(1);
    await clock.advance(INTERVAL + 1);
    // The targeted call at 10 s failed: no absence from it, and the next call is the next interval's.
    expect(account.calls.slice(before).map((c) => c.at)).toEqual([10_000, 20_000]);
    expect(rec.absent.slice(absentBefore).map((a) => a.at)).toEqual([20_000]);
  });

  it('looks labels up in the next free slot, several in one call, null for a label no instance has', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const p = start(clock, account.client, recorder().subscriber);
    await clock.advance(3000);
    // The sweep page of 3 s is done and the one of 4 s is booked: the look-up takes the slot after it.
    const a = p.findLabel('foreign-3', clock.now());
    const b = p.findLabel('berth:s:r:1', clock.now());
    await clock.advance(2000);
    expect(await a).toMatchObject({ id: 1003 });
    expect(await b).toBeNull();
    const lookups = account.calls.filter((c) => c.kind === 'labels');
    expect(lookups).toEqual([{ at: 5000, kind: 'labels' }]);
  });

  it('looks ids up at once (an instance at its boot deadline): one filtered call, null for an id the list lacks', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const p = start(clock, account.client, recorder().subscriber);
    await clock.advance(3000);
    const a = p.lookAt(1007, clock.now());
    const b = p.lookAt(99, clock.now());
    await clock.advance(2000);
    expect(await a).toMatchObject({ id: 1007, actual_status: 'running' });
    expect(await b).toBeNull();
    expect(account.calls.filter((c) => c.kind === 'ids')).toEqual([{ at: 5000, kind: 'ids', ids: [1007, 99] }]);
  });

  it('on stop, a pending look-up is rejected as aborted, never answered "not found"', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 10);
    account.failNextCalls(100);
    const p = start(clock, account.client, recorder().subscriber);
    const waiting = p.findLabel('x', clock.now());
    await clock.advance(5000);
    await p.stop();
    await expect(waiting).rejects.toMatchObject({ code: 'aborted' });
  });
});

/** A store's shared view: what the leader published, and what a follower is handed when it reads. */
function fakeView(leading: () => boolean) {
  const published: Array<{ listedAt: number; ids: number[]; sweepStartedAt: number | null }> = [];
  const sweepsDone: number[] = [];
  let next: ReturnType<SharedView['read']> = { seen: [] };
  let reads = 0;
  const view: SharedView = {
    leads: leading,
    publish: (instances, listedAt, sweepStartedAt) => void published.push({ listedAt, ids: instances.map((i) => i.id), sweepStartedAt }),
    sweepDone: (startedAt) => void sweepsDone.push(startedAt),
    read: () => {
      reads++;
      const out = next;
      next = { seen: [] };
      return out;
    },
    takeLeadIfOverdue: () => false,
  };
  return { view, published, sweepsDone, reads: () => reads, handNext: (r: ReturnType<SharedView['read']>) => (next = r) };
}

describe('the poller, several daemons on one store', () => {
  it('leading, sweeps and publishes every list it makes, its pages with their sweep, and says when a sweep is complete', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 60);
    const shared = fakeView(() => true);
    start(clock, account.client, recorder(() => [1001]).subscriber, shared.view);
    await clock.advance(INTERVAL - 1);
    const sweepPages = shared.published.filter((p) => p.sweepStartedAt !== null);
    expect(sweepPages.map((p) => p.ids.length)).toEqual([25, 25, 10]);
    expect(sweepPages.every((p) => p.sweepStartedAt === 0)).toBe(true);
    expect(shared.sweepsDone).toEqual([0]);
    // The targeted list of the waited id is published too (no sweep of its own).
    expect(shared.published.some((p) => p.sweepStartedAt === null && p.ids.includes(1001))).toBe(true);
    expect(shared.reads()).toBe(0);
  });

  it("following, never sweeps: it reads the leader's lists each round and makes only its targeted ones", async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    const shared = fakeView(() => false);
    const rec = recorder(() => [1500]);
    shared.handNext({
      seen: [{ instances: [{ id: 1700, label: null, machine_id: 1, actual_status: 'exited' }], listedAt: -500 }],
      sweep: { instances: [{ id: 1700, label: null, machine_id: 1, actual_status: 'exited' }], startedAt: -3000 },
    });
    start(clock, account.client, rec.subscriber, shared.view);
    await clock.advance(3 * INTERVAL - 1);
    expect(account.calls.filter((c) => c.kind === 'sweep')).toEqual([]);
    expect(account.calls.map((c) => c.at)).toEqual([0, 10_000, 20_000]);
    expect(shared.reads()).toBe(3);
    expect(shared.published).toEqual([]);
    // What the leader listed is handed over dated as read, and its complete sweep as one.
    expect(rec.seen[0]).toEqual({ at: -500, ids: [1700] });
    expect(rec.sweeps).toEqual([{ startedAt: -3000, count: 1 }]);
  });

  it('never announces a sweep complete when the store missed one of its pages (the others would read those instances as gone)', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 60);
    const shared = fakeView(() => true);
    const publish = shared.view.publish;
    let failed = false;
    shared.view.publish = (instances, listedAt, sweepStartedAt) => {
      if (!failed && sweepStartedAt !== null && instances.some((i) => i.id === 1030)) {
        failed = true;
        throw new Error('the store does not answer');
      }
      publish(instances, listedAt, sweepStartedAt);
    };
    start(clock, account.client, recorder().subscriber, shared.view);
    await clock.advance(INTERVAL - 1);
    expect(failed).toBe(true);
    expect(shared.sweepsDone).toEqual([]);
    // The next sweep reaches the store whole: announced.
    await clock.advance(INTERVAL);
    expect(shared.sweepsDone).toEqual([INTERVAL]);
  });

  it('a leader that stops leading drops its sweep; one that starts leading sweeps from its next round', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    let leads = true;
    const shared = fakeView(() => leads);
    start(clock, account.client, recorder().subscriber, shared.view);
    await clock.advance(5 * SPACING - 1);
    expect(account.calls.filter((c) => c.kind === 'sweep').length).toBe(5);
    leads = false;
    await clock.advance(3 * INTERVAL);
    // The page already asked for (waiting at the limiter) goes; none after it.
    expect(account.calls.filter((c) => c.kind === 'sweep').length).toBe(6);
    expect(shared.sweepsDone).toEqual([]);
    leads = true;
    await clock.advance(INTERVAL + 60 * SPACING);
    expect(account.calls.filter((c) => c.kind === 'sweep').length).toBeGreaterThanOrEqual(45);
    expect(shared.sweepsDone.length).toBe(1);
  });

  it('following a leader whose sweeps stopped (cut from the service), takes the lead once its last complete sweep is two intervals old and sweeps in that very round (issue #38 item 5)', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 10);
    let leads = false;
    const shared = fakeView(() => leads);
    // The leader's last complete sweep (one page) started just before 0; none completes after it.
    shared.handNext({ seen: [], sweep: { instances: account.instances.slice(), startedAt: -1 } });
    const asked: Array<{ at: number; overdueMs: number }> = [];
    shared.view.takeLeadIfOverdue = (overdueMs) => {
      asked.push({ at: clock.now(), overdueMs });
      leads = clock.now() - -1 > overdueMs;
      return leads;
    };
    const rec = recorder();
    start(clock, account.client, rec.subscriber, shared.view);
    await clock.advance(4 * INTERVAL - 1);
    // Asked every round while it follows, with two intervals for a one-page account; it leads from the third round on.
    expect(asked).toEqual([0, INTERVAL, 2 * INTERVAL].map((at) => ({ at, overdueMs: 2 * INTERVAL })));
    // Its own sweep goes in the round it took the lead, and every interval after; each one handed over and published.
    expect(account.calls.filter((c) => c.kind === 'sweep').map((c) => c.at)).toEqual([2 * INTERVAL, 3 * INTERVAL]);
    expect(rec.sweeps).toEqual([
      { startedAt: -1, count: 10 },
      { startedAt: 2 * INTERVAL, count: 10 },
      { startedAt: 3 * INTERVAL, count: 10 },
    ]);
    expect(shared.sweepsDone).toEqual([2 * INTERVAL, 3 * INTERVAL]);
  });
});

describe('the poller: running instances asked for by id', () => {
  it('tells which running instances a call answered for, those shown (no longer running) and those not', async () => {
    const clock = new FakeClock(0);
    const account = fakeAccount(clock, 1000);
    account.instances[10]!.actual_status = 'exited';
    const covered: number[][] = [];
    const rec = recorder(
      () => [],
      () => [],
      () => [1010, 1011, 1012],
    );
    start(clock, account.client, { ...rec.subscriber, onCovered: (ids) => void covered.push(ids) });
    await clock.advance(INTERVAL - 1);
    const moved = account.calls.filter((c) => c.kind === 'moved');
    expect(moved).toHaveLength(1);
    expect(covered).toEqual([[1010, 1011, 1012]]);
    expect(rec.seen.some((s) => s.ids.length === 1 && s.ids[0] === 1010)).toBe(true);
  });
});
