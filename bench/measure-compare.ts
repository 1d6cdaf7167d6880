// Berth against the baseline loop: the same runs, against a fresh simulator each with the same
// seed, faults and rate limits. What is compared comes from the simulator (its request and 429
// counters, its instance history with exact status times), not from what either side says of itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DeepPartial } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import type { Run as RunView } from '../src/wire/control-api.js';
import { startSimulator, type SimConfigInput, type SimInstanceHistory, type SimStats } from '../src/sim/index.js';
import { BASELINE_LABEL_PREFIX, runBaseline, type BaselineJob } from './baseline.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';

export interface Scenario {
  runs: number;
  pollS: number;
  /** Each side's whole budget; also the runs' deadline. */
  timeoutMs: number;
  seed: number;
}

export interface SideResult {
  runs: number;
  reachedRunning: number;
  /** Every request the simulator received until the last run reached running (429s and 5xx included). */
  apiCalls: number;
  rateLimited: number;
  /** Wall ms from the start until the last run reached running (or the side gave up). */
  elapsedMs: number;
  /** The run's `running` in the client minus the instance's `running` in the simulator. */
  detectionMs: number[];
  /** From an instance's exited/unknown/offline in the simulator to the next create of that run. */
  failureToCreateMs: number[];
  requestsByRoute: Record<string, number>;
}

const FAILURES = new Set(['exited', 'unknown', 'offline']);
const IMAGE = 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime';
const MAX_PRICE = 5;
const MAX_ATTEMPTS = 8;
const BOOT_TIMEOUT_S = 20;
/** Several users' preferences, so that the runs do not all want the very same cheapest offers. */
const ORDERS: Array<[string, 'asc' | 'desc']> = [
  ['dph_total', 'asc'],
  ['dlperf_per_dphtotal', 'desc'],
  ['reliability', 'desc'],
  ['inet_down', 'desc'],
  ['total_flops', 'desc'],
  ['gpu_ram', 'desc'],
];

/**
 * The marketplace both sides meet: 30× time (boots of 60-180 sim s take 2-6 s), 15% of the
 * machines faulty (exited 6%, unknown 3%, offline 3%, stuck loading 3%), 2% of requests answered 5xx, and the service's rate limits, search raised from
 * 10/min to 5/s (burst 10) so that 100 runs can start within the bench's time.
 */
function compareSimConfig(seed: number): SimConfigInput {
  return {
    seed,
    time_scale: 30,
    tick_ms: 20,
    catalog: { size: 2000 },
    profile_rates: { exited: 0.06, unknown: 0.03, offline: 0.03, stuck_loading: 0.03 },
    faults: { error_5xx_rate: 0.02 },
    rate_limits: { enabled: true, groups: { search: { per_s: 5, burst: 10 } } },
  };
}

/** Berth's defaults for the service's thresholds, search scaled as the simulator's (90% of it). */
function compareBerthConfig(pollS: number): DeepPartial<Config> {
  return {
    daemon: { listen: '127.0.0.1:0', max_active_runs: 1000 },
    polling: { interval_s: pollS },
    rate_limits: { search: { per_s: 4.5, burst: 9 } },
  };
}

export function jobSpec(i: number, deadlineS: number, bootTimeoutS = BOOT_TIMEOUT_S): Record<string, unknown> {
  return {
    name: `bench-${i}`,
    image: IMAGE,
    disk_gb: 20,
    search: { filters: { num_gpus: { gte: 1 } }, order: [ORDERS[i % ORDERS.length]], limit: 16 },
    max_price_per_hour: MAX_PRICE,
    // Ready when the list says running, as the baseline's loop decides: the same detection on both
    // sides. Readiness by SSH and by the onstart callback is the readiness section's.
    ready_when: 'status',
    max_attempts: MAX_ATTEMPTS,
    boot_timeout_s: bootTimeoutS,
    deadline_s: deadlineS,
    relax: [],
  };
}

/** The same job as the baseline script would search for it (the body berth sends, written by hand). */
function baselineJob(i: number): BaselineJob {
  return {
    query: {
      num_gpus: { gte: 1 },
      dph_total: { lte: MAX_PRICE },
      direct_port_count: { gte: 1 },
      rentable: { eq: true },
      order: [ORDERS[i % ORDERS.length]],
      type: 'on-demand',
      limit: 16,
    },
    image: IMAGE,
    diskGb: 20,
    maxPricePerHour: MAX_PRICE,
  };
}

const sum = (m: Record<string, number>) => Object.values(m).reduce((s, x) => s + x, 0);

function countCalls(stats: SimStats) {
  return { apiCalls: sum(stats.requests), rateLimited: sum(stats.rate_limited), requestsByRoute: { ...stats.requests } };
}

/** Failure-to-next-create gaps, grouping instances into runs by their label without the attempt number. */
function failureGaps(history: SimInstanceHistory[]): number[] {
  const byRun = new Map<string, SimInstanceHistory[]>();
  for (const h of history) {
    if (!h.label) continue;
    const run = h.label.slice(0, h.label.lastIndexOf(':'));
    byRun.set(run, [...(byRun.get(run) ?? []), h]);
  }
  const gaps: number[] = [];
  for (const insts of byRun.values()) {
    insts.sort((a, b) => a.created_at.wall_ms - b.created_at.wall_ms);
    insts.forEach((h, i) => {
      const failed = h.statuses.find((s) => s.status !== null && FAILURES.has(s.status));
      const next = insts[i + 1];
      if (failed && next) gaps.push(next.created_at.wall_ms - failed.at.wall_ms);
    });
  }
  return gaps;
}

function runningAt(history: SimInstanceHistory[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const h of history) {
    const r = h.statuses.find((s) => s.status === 'running');
    if (r) out.set(h.id, r.at.wall_ms);
  }
  return out;
}

export async function runBerthSide(s: Scenario): Promise<SideResult> {
  const sim = await startSimulator({ config: compareSimConfig(s.seed) });
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-'));
  let daemon: DaemonHandle | undefined;
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, compareBerthConfig(s.pollS));
    const d = daemon;
    const t0 = Date.now();
    const ids = await Promise.all(
      Array.from({ length: s.runs }, async (_, i) => {
        const res = await d.api<RunView>('POST', '/v1/runs', jobSpec(i, s.timeoutMs / 1000));
        if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
        return res.body.id;
      }),
    );
    // Done when every run is running or ended; the counters are read at that moment.
    const until = t0 + s.timeoutMs + 10_000;
    let views: RunView[] = [];
    while (Date.now() < until) {
      views = (await d.api<RunView[]>('GET', '/v1/runs?limit=10000')).body;
      if (views.every((v) => v.state === 'running' || v.state === 'failed' || v.state === 'cancelled')) break;
      await sleep(200);
    }
    const counted = countCalls(structuredClone(sim.stats()));
    const simRunning = runningAt(sim.history());
    const detectionMs: number[] = [];
    let lastRunning = t0;
    for (const id of ids) {
      const events = (
        await d.api<Array<{ at: string; type: string; data: { instanceId?: number } | null }>>('GET', `/v1/runs/${id}/events`)
      ).body;
      for (const e of events) {
        if (e.type !== 'attempt.running' || e.data?.instanceId === undefined) continue;
        const at = Date.parse(e.at);
        lastRunning = Math.max(lastRunning, at);
        const inSim = simRunning.get(e.data.instanceId);
        if (inSim !== undefined) detectionMs.push(at - inSim);
      }
    }
    return {
      runs: s.runs,
      reachedRunning: views.filter((v) => v.state === 'running').length,
      ...counted,
      elapsedMs: lastRunning - t0,
      detectionMs,
      failureToCreateMs: failureGaps(sim.history()),
    };
  } finally {
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}

export async function runBaselineSide(s: Scenario): Promise<SideResult> {
  const sim = await startSimulator({ config: compareSimConfig(s.seed) });
  try {
    const t0 = Date.now();
    const results = await runBaseline({
      url: sim.url,
      apiKey: sim.apiKey,
      jobs: Array.from({ length: s.runs }, (_, i) => baselineJob(i)),
      pollIntervalMs: s.pollS * 1000,
      bootTimeoutMs: BOOT_TIMEOUT_S * 1000,
      maxAttempts: MAX_ATTEMPTS,
      deadlineMs: s.timeoutMs,
    });
    const counted = countCalls(structuredClone(sim.stats()));
    const history = sim.history().filter((h) => h.label?.startsWith(BASELINE_LABEL_PREFIX));
    const simRunning = runningAt(history);
    const detectionMs: number[] = [];
    let lastRunning = t0;
    for (const r of results) {
      if (r.runningAt === null || r.instanceId === null) continue;
      lastRunning = Math.max(lastRunning, r.runningAt);
      const inSim = simRunning.get(r.instanceId);
      if (inSim !== undefined) detectionMs.push(r.runningAt - inSim);
    }
    return {
      runs: s.runs,
      reachedRunning: results.filter((r) => r.runningAt !== null).length,
      ...counted,
      elapsedMs: lastRunning - t0,
      detectionMs,
      failureToCreateMs: failureGaps(history),
    };
  } finally {
    await sim.close();
  }
}
