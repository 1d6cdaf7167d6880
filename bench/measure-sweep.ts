// Sweeps at the service's documented limits (issue #20): N runs submitted at once to a real
// `berth daemon` against a simulator whose limits are its defaults (search 10 a minute, create
// 4.5/s, v1 list 1/s with 25 a page: nothing raised), 20% of the machines faulty. berth keeps its
// default client limits. `share` false sets runs.search_share_s 0: every run searches for itself,
// as berth did before shared searches. What is counted comes from the simulator.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Run as RunView } from '../src/wire/control-api.js';
import { startSimulator } from '../src/sim/index.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';

export interface SweepPlan {
  runs: number;
  /** Distinct specs the runs are spread over (each its own search order). */
  specs: number;
  share: boolean;
  timeoutMs: number;
  seed: number;
}

export interface SweepResult {
  plan: SweepPlan;
  running: number;
  /** Wall ms from the first submission until the last run was seen running (or the timeout). */
  lastRunningMs: number;
  searches: number;
  calls: number;
  rateLimited: number;
}

const ORDERS: Array<[string, 'asc' | 'desc']> = [
  ['dph_total', 'asc'],
  ['dlperf_per_dphtotal', 'desc'],
  ['reliability', 'desc'],
  ['inet_down', 'desc'],
  ['total_flops', 'desc'],
];

function spec(i: number, plan: SweepPlan): Record<string, unknown> {
  return {
    name: `sweep-${i}`,
    image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
    disk_gb: 20,
    search: { filters: { num_gpus: { gte: 1 } }, order: [ORDERS[i % plan.specs]], limit: 64 },
    max_price_per_hour: 5,
    ready_when: 'status',
    max_attempts: 8,
    boot_timeout_s: 20,
    deadline_s: Math.ceil(plan.timeoutMs / 1000),
    relax: [],
  };
}

export async function runSweep(plan: SweepPlan): Promise<SweepResult> {
  const sim = await startSimulator({
    config: {
      seed: plan.seed,
      time_scale: 30,
      tick_ms: 20,
      catalog: { size: 2000 },
      // 20% of the machines faulty; the rate limits are the simulator's documented defaults.
      profile_rates: { exited: 0.08, unknown: 0.04, offline: 0.04, stuck_loading: 0.04 },
      rate_limits: { enabled: true },
    },
  });
  const home = mkdtempSync(join(tmpdir(), 'berth-sweep-'));
  let daemon: DaemonHandle | undefined;
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, {
      daemon: { listen: '127.0.0.1:0', max_active_runs: 1000 },
      polling: { interval_s: 1 },
      runs: { search_share_s: plan.share ? 30 : 0 },
    });
    const d = daemon;
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: plan.runs }, async (_, i) => {
        const res = await d.api<RunView>('POST', '/v1/runs', spec(i, plan));
        if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
      }),
    );
    let views: RunView[] = [];
    let lastRunningMs = plan.timeoutMs;
    while (Date.now() - t0 < plan.timeoutMs) {
      views = (await d.api<RunView[]>('GET', '/v1/runs?limit=10000')).body;
      if (views.every((v) => v.state === 'running' || v.state === 'failed' || v.state === 'cancelled' || v.state === 'expired')) {
        lastRunningMs = Date.now() - t0;
        break;
      }
      await sleep(250);
    }
    const stats = structuredClone(sim.stats());
    const sum = (m: Record<string, number>) => Object.values(m).reduce((s, x) => s + x, 0);
    return {
      plan,
      running: views.filter((v) => v.state === 'running').length,
      lastRunningMs,
      searches: stats.requests['POST /api/v0/bundles/'] ?? 0,
      calls: sum(stats.requests),
      rateLimited: sum(stats.rate_limited),
    };
  } finally {
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}
