// Berth at scale, one real daemon process at a time on one store:
//   1. N runs at once (1,000) until all are running: peak memory, and detection latency at this
//      size with no faults (it shows the poll loop itself);
//   2. submissions per second accepted (POST /v1/runs from 16 connections; the runs queue behind
//      `max_active_runs`, so the simulator is not asked for anything), then those runs cancelled,
//      which leaves a store of 10,000 runs: N live and running, the rest ended;
//   3. restarts on that store (spawn to /healthz: the daemon resumes every live run, the poller
//      sweeps afterwards), then CPU and calls in steady polling at the
//      default 10 s interval and, after one more restart, at the benchmark's interval.
// The simulator's rate limits are off here (and berth's search and create raised while the runs
// start): 1,000 creates at the service's 4.5/s would take minutes; the point is the daemon's cost.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DeepPartial } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import type { Run as RunView } from '../src/wire/control-api.js';
import { startSimulator, type RunningSimulator } from '../src/sim/index.js';
import { jobSpec } from './measure-compare.js';
import { cpuSeconds, memoryMb, spawnDaemon, type DaemonHandle } from './measure-daemon.js';

export interface ScalePlan {
  runs: number;
  /** Runs in the store for the restarts (live ones included). */
  storeRuns: number;
  /** Poll interval while the runs start and in the first steady window. */
  pollS: number;
  steadyS: number;
  /** Steady window after the restarts, at the default 10 s interval. */
  steadyDefaultS: number;
  restarts: number;
  seed: number;
  /** A notify target on (a receiver in this process, signed POSTs, every event). */
  notify?: boolean;
}

interface NotifyFigures {
  /** POSTs the receiver got, and distinct notification ids among them. */
  posts: number;
  unique: number;
  /** run.running notifications received once every run was running, and how long after that the last arrived. */
  runRunning: number;
  lastRunningAfterMs: number;
  /** From the end of the cancels of the queued runs until their notifications were all delivered (three restarts in between). */
  cancelledDrainMs: number;
  /** The outbox at the end: every state. */
  outbox: { pending: number; delivered: number; dead: number };
}

export interface Steady {
  pollS: number;
  seconds: number;
  cpuPctOfCore: number;
  callsPerMin: number;
  rssMb: number;
}

export interface ScaleResult {
  runs: number;
  reachedRunning: number;
  rampMs: number;
  detectionMs: number[];
  peakMb: number;
  steady: Steady;
  steadyDefault: Steady;
  peakMbAfterRestart: number;
  /** Peak with the extra runs queued as well (before they were cancelled). */
  peakMbQueued: number;
  /** Resident memory just before the extra runs were submitted, and with them queued. */
  rssBeforeQueuedMb: number;
  rssQueuedMb: number;
  /** CPU seconds the daemon used from its spawn until every run was running. */
  startCpuS: number;
  submissions: { count: number; batchRates: number[] };
  restart: { storeRuns: number; liveRuns: number; readyMs: number[] };
  notify?: NotifyFigures;
}

/** A receiver that answers every POST 204 at once, counting them. */
async function notifyReceiver(): Promise<{
  server: Server;
  url: string;
  posts: () => number;
  ids: Set<string>;
  running: () => number;
  lastAt: () => number;
}> {
  const ids = new Set<string>();
  let posts = 0;
  let running = 0;
  let lastAt = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posts++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; type: string };
      if (!ids.has(body.id) && body.type === 'run.running') {
        running++;
        lastAt = Date.now();
      }
      ids.add(body.id);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/berth-hook`,
    posts: () => posts,
    ids,
    running: () => running,
    lastAt: () => lastAt,
  };
}

const NOTIFY_SECRET_ENV = 'BERTH_BENCH_NOTIFY_KEY';

/**
 * The runs here start 50 creates/s (the service allows 4.5/s) while berth's list keeps the service's
 * 1 call/s of 25 instances, and the simulator runs 30× fast: hundreds of instances reach running in
 * the same few seconds, more than one list budget can report in 20 s. A boot timeout that short would
 * replace instances berth has not yet been able to see (a start no real account can make), and the
 * section would measure replacements instead of the daemon's cost with N runs running.
 */
const SCALE_BOOT_TIMEOUT_S = 600;

/**
 * Daemon settings. `fast`: search and create raised to 50/s so that N runs start in seconds (the
 * simulator's limits are off); every other group, and every restart, keeps berth's defaults, since
 * the limiter's refill timer ticks faster for a faster group and would be charged to steady polling.
 * `maxActive` = the N runs: later submissions queue behind them instead of reaching the simulator.
 */
function scaleConfig(pollS: number, maxActive: number, fast: boolean, notifyUrl?: string): DeepPartial<Config> {
  const raised = { per_s: 50, burst: 50 };
  return {
    daemon: { listen: '127.0.0.1:0', max_active_runs: maxActive },
    polling: { interval_s: pollS },
    ...(fast ? { rate_limits: { search: raised, create: raised } } : {}),
    ...(notifyUrl ? { notify: [{ url: notifyUrl, secret_env: NOTIFY_SECRET_ENV, format: 'json' as const }] } : {}),
  };
}

const totalCalls = (sim: RunningSimulator) => Object.values(sim.stats().requests).reduce((s, x) => s + x, 0);

async function steadyWindow(d: DaemonHandle, sim: RunningSimulator, pollS: number, seconds: number): Promise<Steady> {
  const cpu0 = cpuSeconds(d.pid);
  const calls0 = totalCalls(sim);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const wallS = (performance.now() - t0) / 1000;
  return {
    pollS,
    seconds: wallS,
    cpuPctOfCore: ((cpuSeconds(d.pid) - cpu0) / wallS) * 100,
    callsPerMin: ((totalCalls(sim) - calls0) / wallS) * 60,
    rssMb: memoryMb(d.pid).now,
  };
}

/** `count` POSTs from `workers` connections; returns the ids and the rate of each batch of `batch`. */
async function submitMany(d: DaemonHandle, count: number, workers: number, batch: number): Promise<{ ids: string[]; rates: number[] }> {
  const ids: string[] = [];
  const rates: number[] = [];
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (next < n) {
          const i = done + next++;
          const res = await d.api<RunView>('POST', '/v1/runs', jobSpec(i, 7200, SCALE_BOOT_TIMEOUT_S));
          if (res.status !== 201) throw new Error(`submit answered ${res.status}`);
          ids.push(res.body.id);
        }
      }),
    );
    rates.push(n / ((performance.now() - t0) / 1000));
  }
  return { ids, rates };
}

async function forEachLimited<T>(items: T[], workers: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

const scaleSimulator = (seed: number) =>
  startSimulator({ seed, config: { time_scale: 30, tick_ms: 50, catalog: { size: 4000 }, rate_limits: { enabled: false } } });

/** Submits `runs` at once and waits until every one is running (or has ended). */
async function startRuns(d: DaemonHandle, runs: number): Promise<{ ids: string[]; running: number; rampMs: number }> {
  const t0 = Date.now();
  const { ids } = await submitMany(d, runs, 16, runs);
  let running = 0;
  while (Date.now() - t0 < 180_000) {
    const views = (await d.api<RunView[]>('GET', '/v1/runs?limit=10000')).body;
    running = views.filter((v) => v.state === 'running').length;
    if (running === runs || views.every((v) => ['running', 'failed', 'cancelled'].includes(v.state))) break;
    await sleep(1000);
  }
  return { ids, running, rampMs: Date.now() - t0 };
}

/**
 * The same start in a daemon on V8's default heap tuning (`berth daemon` turns on
 * --optimize-for-size unless told otherwise): its peak memory and the CPU the start took, next to
 * the CPU of the measured start.
 */
export async function startWithV8Defaults(plan: ScalePlan): Promise<{ peakMb: number; cpuS: number }> {
  const sim = await scaleSimulator(plan.seed);
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-scale-v8-'));
  let daemon: DaemonHandle | undefined;
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, scaleConfig(plan.pollS, plan.runs, true), 60_000, ['--no-optimize-for-size']);
    await startRuns(daemon, plan.runs);
    await sleep(plan.pollS * 1000);
    return { peakMb: memoryMb(daemon.pid).peak, cpuS: cpuSeconds(daemon.pid) };
  } finally {
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}

export async function runScale(plan: ScalePlan): Promise<ScaleResult> {
  const sim = await scaleSimulator(plan.seed);
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-scale-'));
  const rx = plan.notify ? await notifyReceiver() : undefined;
  const env: Record<string, string> = rx ? { [NOTIFY_SECRET_ENV]: 'bench-signing-key' } : {};
  const config = (pollS: number, fast: boolean) => scaleConfig(pollS, plan.runs, fast, rx?.url);
  let daemon: DaemonHandle | undefined;
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, config(plan.pollS, true), 60_000, [], env);
    const d = daemon;

    // 1. N runs until all are running.
    const { ids, running, rampMs } = await startRuns(d, plan.runs);
    const allRunningAt = Date.now();
    await sleep(plan.pollS * 1000); // let the last transitions settle
    if (rx) {
      for (const end = Date.now() + 60_000; rx.running() < running && Date.now() < end;) await sleep(100);
    }
    const runRunning = rx?.running() ?? 0;
    const lastRunningAfterMs = rx ? Math.max(0, rx.lastAt() - allRunningAt) : 0;
    const startCpuS = cpuSeconds(d.pid);
    const detectionMs = await detection(d, sim, ids);
    const peakMb = memoryMb(d.pid).peak;

    // 2. Submissions that queue (every slot is taken by a running run), then cancelled.
    const extra = plan.storeRuns - plan.runs;
    const rssBeforeQueuedMb = memoryMb(d.pid).now;
    const subs = await submitMany(d, extra, 16, Math.ceil(extra / 5));
    const peakMbQueued = memoryMb(d.pid).peak;
    const rssQueuedMb = memoryMb(d.pid).now;
    await forEachLimited(subs.ids, 16, async (id) => {
      const res = await d.api('POST', `/v1/runs/${id}/cancel`);
      if (res.status !== 202) throw new Error(`cancel answered ${res.status}`);
    });
    const cancelsDoneAt = Date.now();
    await d.stop();
    daemon = undefined;

    // 3. Restarts on the full store with berth's defaults (10 s polling), the last one measured in
    // steady polling; then one more at the benchmark's poll interval for steady polling at that rate.
    const readyMs: number[] = [];
    for (let i = 0; i < plan.restarts; i++) {
      daemon = await spawnDaemon(home, sim.url, sim.apiKey, config(10, false), 60_000, [], env);
      readyMs.push(daemon.readyMs);
      if (i < plan.restarts - 1) {
        await daemon.stop();
        daemon = undefined;
      }
    }
    const health = (await daemon!.api<{ live_runs: number }>('GET', '/healthz')).body;
    // The burst of run.cancelled notifications goes out first, so that steady polling is measured alone.
    let cancelledDrainMs = 0;
    if (rx) {
      for (const end = Date.now() + 300_000; (await outboxCounts(daemon!)).pending > 0 && Date.now() < end;) await sleep(200);
      cancelledDrainMs = Date.now() - cancelsDoneAt;
    }
    await sleep(2000); // past the startup work
    const steadyDefault = await steadyWindow(daemon!, sim, 10, plan.steadyDefaultS);
    const peakMbAfterRestart = memoryMb(daemon!.pid).peak;
    await daemon!.stop();
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, config(plan.pollS, false), 60_000, [], env);
    await sleep(2000);
    const steady = await steadyWindow(daemon, sim, plan.pollS, plan.steadyS);
    const notify: NotifyFigures | undefined = rx
      ? {
          posts: rx.posts(),
          unique: rx.ids.size,
          runRunning,
          lastRunningAfterMs,
          cancelledDrainMs,
          outbox: await outboxCounts(daemon),
        }
      : undefined;
    return {
      ...(notify ? { notify } : {}),
      runs: plan.runs,
      reachedRunning: running,
      rampMs,
      detectionMs,
      peakMb,
      steady,
      steadyDefault,
      peakMbAfterRestart,
      peakMbQueued,
      rssBeforeQueuedMb,
      rssQueuedMb,
      startCpuS,
      submissions: { count: extra, batchRates: subs.rates },
      restart: { storeRuns: plan.storeRuns, liveRuns: health.live_runs, readyMs },
    };
  } finally {
    await daemon?.stop();
    await sim.close();
    if (rx) await new Promise((r) => rx.server.close(r));
    rmSync(home, { recursive: true, force: true });
  }
}

async function outboxCounts(d: DaemonHandle): Promise<NotifyFigures['outbox']> {
  const counts = { pending: 0, delivered: 0, dead: 0 };
  for (let before: number | undefined; ;) {
    const page = (
      await d.api<Array<{ seq: number; state: keyof typeof counts }>>(
        'GET',
        `/v1/notifications?limit=10000${before === undefined ? '' : `&before=${before}`}`,
      )
    ).body;
    if (page.length === 0) return counts;
    for (const n of page) counts[n.state]++;
    before = page.at(-1)!.seq;
  }
}

/** The run's `running` event in berth minus the instance's `running` in the simulator. */
async function detection(d: DaemonHandle, sim: RunningSimulator, ids: string[]): Promise<number[]> {
  const simRunning = new Map<number, number>();
  for (const h of sim.history()) {
    const r = h.statuses.find((s) => s.status === 'running');
    if (r) simRunning.set(h.id, r.at.wall_ms);
  }
  const out: number[] = [];
  await forEachLimited(ids, 8, async (id) => {
    const events = (await d.api<Array<{ at: string; type: string; data: { instanceId?: number } | null }>>('GET', `/v1/runs/${id}/events`))
      .body;
    for (const e of events) {
      const inSim = e.type === 'attempt.running' && e.data?.instanceId !== undefined ? simRunning.get(e.data.instanceId) : undefined;
      if (inSim !== undefined) out.push(Date.parse(e.at) - inSim);
    }
  });
  return out;
}
