// The warm pool's calls (issue #51), on a real SQLite store with fake time: what it hands over at a
// destroy and what it refuses, which hold it offers a run and which not, and the release at idle_s.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attemptLabel } from '../../../../src/daemon/instances/labels.js';
import { classifyInstance } from '../../../../src/daemon/instances/holdings.js';
import { WarmPool } from '../../../../src/daemon/instances/warm-pool.js';
import { costsReport } from '../../../../src/daemon/money/costs.js';
import { planRun, type RunPlan } from '../../../../src/job-spec/run-plan.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { silentLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const RUNS = {
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
const base = { name: 'job', image: 'ubuntu:22.04', max_price_per_hour: 1, run: 'python t.py', warm: { idle_s: 600 }, secrets: { T: 's' } };
const plan = (over: Record<string, unknown> = {}): RunPlan => planRun(parseJobSpec({ ...base, ...over }), RUNS);

let dir: string;
let store: Store;
let clock: FakeClock;
let plans: Map<string, RunPlan>;
let capped: string | null;
let pool: WarmPool;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-warm-'));
  store = openStore({ home: dir });
  clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
  plans = new Map();
  capped = null;
  pool = new WarmPool({ store, clock, log: silentLogger(), planOf: (id) => plans.get(id), capsRefuse: () => capped });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Run `runId`'s attempt 1 made instance `id` and ran its task to `outcome`, listed `status`. */
function ended(runId: string, id: number, outcome = 'succeeded', status = 'running', over: Record<string, unknown> = {}) {
  plans.set(runId, plan(over));
  store.runs.insert({ id: runId, name: runId, specJson: '{}', createdAt: clock.now() });
  store.attempts.beginCreate({
    runId,
    n: 1,
    offerId: 100 + id,
    machineId: 10 + id,
    dphTotal: 0.5,
    label: attemptLabel(store.storeId, runId, 1),
    at: clock.now(),
  });
  store.attempts.adopt(runId, 1, id, clock.now());
  store.attempts.setStatus(runId, 1, { actual_status: status, dph_total: 0.5 }, clock.now());
  store.attempts.setOutcome(runId, 1, outcome, null, clock.now());
  return { runId, n: 1, instanceId: id, outcome };
}
const none = { offerIds: [], machineIds: [] };

describe('warm pool', () => {
  it('hands over a clean end once, and offers it to the next run of the same key only', () => {
    const held = pool.handOver(ended('a', 501));
    expect(held).toMatchObject({ idleUntil: clock.now() + 600_000 });
    expect(pool.handOver({ runId: 'a', n: 1, instanceId: 501, outcome: 'succeeded' })).toEqual(held);
    expect(store.warm.live()).toHaveLength(1);
    const offered = pool.offerFor('b', plan({ run: 'other', name: 'b' }), 0, none);
    expect(offered).toMatchObject({ holdId: held!.holdId, instanceId: 501, offerId: 601, machineId: 511, dphTotal: 0.5 });
    expect(pool.holdOn(601, plan())).toMatchObject({ instanceId: 501 });
    // Other secrets, a price cap below it, its offer or machine blocked: none.
    expect(pool.offerFor('b', plan({ secrets: { T: 'x' } }), 0, none)).toBeNull();
    expect(pool.offerFor('b', plan({ max_price_per_hour: 0.4 }), 0, none)).toBeNull();
    expect(pool.offerFor('b', plan(), 0, { offerIds: [601], machineIds: [] })).toBeNull();
    expect(pool.offerFor('b', plan(), 0, { offerIds: [], machineIds: [511] })).toBeNull();
    expect(pool.holdOn(601, plan({ image: 'ubuntu:24.04' }))).toBeNull();
  });

  it.each([
    ['an outbid', () => ended('a', 501, 'outbid')],
    ['a cancel', () => ended('a', 501, 'cancelled')],
    ['a loss', () => ended('a', 501, 'lost')],
    ['an instance listed stopped', () => ended('a', 501, 'succeeded', 'stopped')],
    ['a spec without warm', () => ended('a', 501, 'succeeded', 'running', { warm: undefined })],
    ['outputs not all taken', () => ended('a', 501, 'succeeded', 'running', { outputs: ['out'] })],
    ['a failure kept for SSH', () => ended('a', 501, 'task_failed', 'running', { keep_on_failure_s: 60 })],
  ])('never hands over after %s', (_what, end) => {
    expect(pool.handOver(end())).toBeNull();
    expect(store.warm.live()).toEqual([]);
  });

  it('hands over a task with outputs once they were all taken, not when the caps refuse', () => {
    const input = ended('a', 501, 'task_failed', 'running', { outputs: ['out'] });
    store.outputs.begin({ runId: 'a', attempt: 1, state: 'collecting', host: 'h', dir: '/x', detail: null, at: clock.now() });
    store.outputs.finish({ runId: 'a', attempt: 1, state: 'kept', files: [], detail: null, at: clock.now() });
    capped = 'budget.max_usd_per_day would be passed';
    expect(pool.handOver(input)).toBeNull();
    capped = null;
    expect(pool.handOver(input)).not.toBeNull();
  });

  it('stops offering a hold near its idle_s, and releases it past it: its instance is then an orphan', async () => {
    const held = pool.handOver(ended('a', 501))!;
    await clock.advance(541_000); // 59 s left: less than the minute's margin
    expect(pool.offerFor('b', plan(), 0, none)).toBeNull();
    pool.sweep(new Set([501]), clock.now());
    expect(store.warm.live()).toHaveLength(1);
    await clock.advance(60_000);
    pool.sweep(new Set([501]), clock.now());
    expect(store.warm.get(held.holdId)).toMatchObject({ state: 'released', ended_why: 'its idle_s passed with no taker' });
    store.runs.setState('a', 'succeeded', null, clock.now());
    const owner = classifyInstance(
      { id: 501, label: attemptLabel(store.storeId, 'a', 1), machine_id: 1, actual_status: 'running' },
      store,
      () => false,
    );
    expect(owner.kind).toBe('orphan');
    expect(pool.releaseOf('a', 'cancelled')).toBe(false);
  });

  it('a hold whose instance a complete sweep no longer lists is over: released, gone, billing nothing, offered to nobody', async () => {
    const held = pool.handOver(ended('a', 501))!;
    await clock.advance(1_000);
    pool.sweep(new Set(), clock.now());
    expect(store.warm.get(held.holdId)).toMatchObject({ state: 'released', destroy_confirmed_at: clock.now() });
    expect(pool.offerFor('b', plan(), 0, none)).toBeNull();
    expect(store.warm.billingSince(clock.now())).toEqual([]);
  });
});

describe('berth costs with a warm instance (issue #51)', () => {
  it("marks the warm hold, and shares the instance's one service charge among the rows that name it", async () => {
    const held = pool.handOver(ended('a', 501))!;
    await clock.advance(3_600_000);
    const report = await costsReport(store, clock.now(), undefined, async () => [{ source: 'instance-501', amount: 0.8 }]);
    const rows = report.runs.flatMap((r) => r.instances);
    expect(rows.map((i) => [i.instance_id, i.warm ?? false])).toEqual([
      [501, false],
      [501, true],
    ]);
    expect(held.holdId).toBeGreaterThan(0);
    // The donor billed nothing (handed over at once), the hold an hour at $0.5: the charge goes with it, once.
    expect(report.service.total_usd).toBeCloseTo(0.8, 6);
    expect(rows.reduce((s, i) => s + (i.service_usd ?? 0), 0)).toBeCloseTo(0.8, 6);
    expect(report.total_usd).toBeCloseTo(0.5, 6);
  });
});
