// The figures /metrics reads when scraped, on a real SQLite store: spend as billed $/h × the time
// each instance existed (and never less after retention deletes its run), live instances, and the
// limiter's 429s, pauses and queues from the client's stats.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClientStats } from '../../../../src/client/events.js';
import type { GroupStats } from '../../../../src/client/limiter.js';
import { RATE_GROUPS } from '../../../../src/config/schema.js';
import { DaemonMetrics } from '../../../../src/daemon/notify/metrics.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { parsePrometheus, sampleValue } from '../../../helpers/prometheus.js';

const HOUR = 3_600_000;
let dir: string;
let store: Store | undefined;
afterEach(() => {
  store?.close();
  rmSync(dir, { recursive: true, force: true });
});

function idleGroup(): GroupStats {
  return {
    scheduled: 0,
    sent: 0,
    rateLimited: 0,
    pauses: 0,
    mode: 'full',
    paused: false,
    pausedMs: 0,
    perS: 1,
    burst: 1,
    queued: 0,
    refilling: false,
  };
}

function setup(stats: Partial<Record<(typeof RATE_GROUPS)[number], Partial<GroupStats>>> = {}) {
  dir = mkdtempSync(join(tmpdir(), 'berth-metrics-'));
  store = openStore({ home: dir });
  let now = 0;
  const groups = Object.fromEntries(RATE_GROUPS.map((g) => [g, { ...idleGroup(), ...stats[g] }])) as ClientStats['groups'];
  const metrics = new DaemonMetrics({
    store,
    clock: { now: () => now },
    clientStats: () => ({ groups, calls: 0, retries: 0, rateLimited: 0, ambiguousCreates: 0, rateShare: 1 }),
  });
  const scrape = async () => parsePrometheus(await metrics.text());
  return { store, metrics, scrape, at: (t: number) => (now = t) };
}

/** A run with one instance made at `createdAt`, billed `dph` $/h. */
function instance(s: Store, runId: string, dph: number, createdAt: number): void {
  s.runs.insert({ id: runId, name: runId, specJson: '{}', createdAt });
  s.attempts.beginCreate({ runId, n: 1, offerId: 1, machineId: 1, dphTotal: dph, label: `l-${runId}`, at: createdAt });
  s.attempts.adopt(runId, 1, Number(runId.slice(1)), createdAt);
}

describe('DaemonMetrics', () => {
  it('counts spend as billed $/h × the time each instance existed, and keeps what retention deletes', async () => {
    const { store: s, scrape, at } = setup();
    instance(s, 'r1', 0.5, 0);
    instance(s, 'r2', 2, HOUR);
    at(2 * HOUR);
    let m = await scrape();
    expect(sampleValue(m, 'berth_spend_usd_total')).toBeCloseTo(0.5 * 2 + 2 * 1, 9);
    expect(sampleValue(m, 'berth_live_instances')).toBe(2);
    expect(sampleValue(m, 'berth_live_instances_usd_per_hour')).toBeCloseTo(2.5, 9);

    // r1's instance is destroyed at 3 h and its run ends; later, retention deletes the run.
    s.attempts.destroyConfirmed('r1', 1, 1, 3 * HOUR);
    s.runs.setState('r1', 'cancelled', null, 3 * HOUR);
    at(4 * HOUR);
    m = await scrape();
    const total = 0.5 * 3 + 2 * 3;
    expect(sampleValue(m, 'berth_spend_usd_total')).toBeCloseTo(total, 9);
    expect(sampleValue(m, 'berth_live_instances')).toBe(1);
    expect(s.purge(3.5 * HOUR, 4 * HOUR).runs).toBe(1);
    expect(s.runs.get('r1')).toBeUndefined();
    m = await scrape();
    expect(sampleValue(m, 'berth_spend_usd_total')).toBeCloseTo(total, 9);
    expect(sampleValue(m, 'berth_runs', { state: 'cancelled' })).toBe(0);
    expect(sampleValue(m, 'berth_runs', { state: 'queued' })).toBe(1);
  });

  it("reports the limiter's 429s, pauses, paused time and queue per endpoint group", async () => {
    const { scrape } = setup({
      list: { rateLimited: 3, pauses: 2, pausedMs: 1500, queued: 4, paused: true },
      create: { rateLimited: 1, pauses: 1 },
    });
    const m = await scrape();
    expect(sampleValue(m, 'berth_service_rate_limited_total', { group: 'list' })).toBe(3);
    expect(sampleValue(m, 'berth_service_rate_limited_total', { group: 'create' })).toBe(1);
    expect(sampleValue(m, 'berth_service_rate_limited_total', { group: 'search' })).toBe(0);
    expect(sampleValue(m, 'berth_service_pauses_total', { group: 'list' })).toBe(2);
    expect(sampleValue(m, 'berth_service_paused_seconds_total', { group: 'list' })).toBe(1.5);
    expect(sampleValue(m, 'berth_limiter_queue_depth', { group: 'list' })).toBe(4);
    expect(sampleValue(m, 'berth_limiter_paused', { group: 'list' })).toBe(1);
    expect(sampleValue(m, 'berth_limiter_paused', { group: 'create' })).toBe(0);
  });

  it('counts requests by group and status, "error" when no answer came', async () => {
    const { metrics, scrape } = setup();
    metrics.clientEvent({ type: 'response', op: 'list', group: 'list', status: 200, ms: 12 });
    metrics.clientEvent({ type: 'response', op: 'list', group: 'list', status: 429, ms: 3 });
    metrics.clientEvent({ type: 'response', op: 'create', group: 'create', status: null, ms: 30_000 });
    const m = await scrape();
    expect(sampleValue(m, 'berth_service_requests_total', { group: 'list', status: '200' })).toBe(1);
    expect(sampleValue(m, 'berth_service_requests_total', { group: 'list', status: '429' })).toBe(1);
    expect(sampleValue(m, 'berth_service_requests_total', { group: 'create', status: 'error' })).toBe(1);
    expect(sampleValue(m, 'berth_service_request_duration_seconds_count', { group: 'list' })).toBe(2);
  });
});
