// The readiness section of `npm run bench` (issue #12): how soon a run counts as running once its
// instance is up, by the three ways berth can learn it, side by side:
//   status   — ready_when "status": the first instance list that shows it running;
//   ssh      — ready_when "ssh" (the default): that list, then a TCP connection that reads the
//              SSH banner (the simulator's real loopback listeners);
//   callback — readiness.callback_url: the onstart's last line posts the attempt's token to the
//              daemon (the simulator runs the script as a local process); SSH never answers on
//              these machines, so nothing else can make the run ready.
// Each method runs on its own simulator and daemon process, the same seed and job otherwise.
// Times come from the simulator's history (the instance's `running`), the script itself (the
// moment before it calls back, printed by `date`) and the run's event log (its `attempt.running`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DeepPartial } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import type { Run as RunView } from '../src/wire/control-api.js';
import { startSimulator } from '../src/sim/index.js';
import { freePort } from './free-port.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import { median, quantile, type BenchSection } from './types.js';

type Method = 'status' | 'ssh' | 'callback';

interface MethodResult {
  runs: number;
  reached: number;
  /** Simulator `running` → the run's `attempt.running`, ms. */
  detectionMs: number[];
  /** The script's call (just before its last line runs) → the run's `attempt.running`, ms (callback only). */
  afterCallMs: number[];
  /** The list showing it running ("waiting for SSH") → the run's `attempt.running`, ms (ssh only). */
  probeMs: number[];
}

const POLL_S = 1;
/** The goal of issue #12: the run is running at most this long after the onstart called back. */
const CALLBACK_TARGET_MS = 50;
const CALL_MARK = 'berth-bench-call';

const ms = (n: number) => (Number.isFinite(n) ? `${Math.round(n).toLocaleString('en-US')} ms` : 'n/a');
const spread = (xs: number[]) => `median ${ms(median(xs))} · p99 ${ms(quantile(xs, 0.99))} · max ${ms(Math.max(...xs))}`;

export async function runReadinessBench(opts: { quick: boolean }): Promise<BenchSection> {
  const runs = opts.quick ? 8 : 20;
  const results: Partial<Record<Method, MethodResult>> = {};
  // One after the other: no method shares the machine's cores with another.
  for (const method of ['status', 'ssh', 'callback'] as const) results[method] = await measure(method, runs, 31);
  const { status, ssh, callback } = results as Record<Method, MethodResult>;
  const p99Call = quantile(callback.afterCallMs, 0.99);
  const reached = (r: MethodResult) => (r.reached < r.runs ? `; only ${r.reached}/${r.runs} runs reached running` : '');
  return {
    title: `Readiness: detection by status, by SSH probe and by callback (${runs} runs each, ${POLL_S} s poll interval${opts.quick ? ', quick' : ''})`,
    rows: [
      {
        metric: 'by status (ready_when "status"): instance running → run running',
        value: spread(status.detectionMs),
        note: `the first list that shows it running: on average half a poll interval${reached(status)}`,
      },
      {
        metric: 'by SSH probe (ready_when "ssh"): instance running → run running',
        value: spread(ssh.detectionMs),
        note: `that list, then a TCP connection to the proxy endpoint that reads "SSH-2.0-" (and one try of the direct endpoint, so that both are shown); from the list to ready (the probe and its commit): ${spread(ssh.probeMs)}${reached(ssh)}`,
      },
      {
        metric: 'by callback: instance running → run running',
        value: spread(callback.detectionMs),
        note: `no list needed: the simulator starts the onstart when the instance runs, the script's last line (curl) posts the token, the daemon sends the run READY; SSH never answers on these machines${reached(callback)}`,
      },
      {
        metric: 'by callback: the call → run running',
        value: spread(callback.afterCallMs),
        target: `p99 <= ${CALLBACK_TARGET_MS} ms`,
        met: callback.afterCallMs.length === callback.runs && p99Call <= CALLBACK_TARGET_MS,
        note: `from \`date +%s%3N\` printed by the script just before berth's line runs (curl's start-up included) to the run's attempt.running event: the listener checks the token, the machine moves and the transition is committed to SQLite`,
      },
    ],
  };
}

async function measure(method: Method, runs: number, seed: number): Promise<MethodResult> {
  const sim = await startSimulator({
    seed,
    config: {
      time_scale: 30,
      tick_ms: 20,
      catalog: { size: 2000 },
      rate_limits: { enabled: false },
      ssh_listeners: { enabled: true },
      ...(method === 'callback' ? { onstart_exec: { enabled: true, timeout_s: 60 }, profile_rates: { ssh_refused: 1 } } : {}),
    },
  });
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-ready-'));
  let daemon: DaemonHandle | undefined;
  try {
    const config: DeepPartial<Config> = {
      daemon: { listen: '127.0.0.1:0' },
      polling: { interval_s: POLL_S },
      rate_limits: {
        search: { per_s: 20, burst: 20 },
        create: { per_s: 20, burst: 20 },
        list: { per_s: 2, burst: 1 },
        destroy: { per_s: 20, burst: 5 },
      },
    };
    if (method === 'callback') {
      const port = await freePort();
      config.readiness = { callback_url: `http://127.0.0.1:${port}/ready`, callback_listen: `127.0.0.1:${port}` };
    }
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, config);
    const d = daemon;
    const spec = (i: number) => ({
      name: `ready-${method}-${i}`,
      image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
      search: { filters: { num_gpus: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 32 },
      max_price_per_hour: 5,
      boot_timeout_s: 60,
      deadline_s: 300,
      relax: [],
      ready_when: method === 'status' ? 'status' : 'ssh',
      ...(method === 'callback' ? { onstart: `echo "${CALL_MARK} $(date +%s%3N)"` } : {}),
    });
    const ids = await Promise.all(
      Array.from({ length: runs }, async (_, i) => {
        const res = await d.api<RunView>('POST', '/v1/runs', spec(i));
        if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
        return res.body.id;
      }),
    );
    const until = Date.now() + 120_000;
    let views: RunView[] = [];
    while (Date.now() < until) {
      views = (await d.api<RunView[]>('GET', '/v1/runs?limit=1000')).body;
      if (views.every((v) => v.state === 'running' || v.state === 'failed')) break;
      await sleep(200);
    }
    const history = new Map(sim.history().map((h) => [h.id, h]));
    const detectionMs: number[] = [];
    const afterCallMs: number[] = [];
    const probeMs: number[] = [];
    for (const id of ids) {
      const events = (
        await d.api<Array<{ at: string; type: string; data: { instanceId?: number; via?: string; status?: string } | null }>>(
          'GET',
          `/v1/runs/${id}/events`,
        )
      ).body;
      const readyIndex = events.findIndex((e) => e.type === 'attempt.running' && e.data?.instanceId !== undefined);
      const ready = events[readyIndex];
      if (!ready) continue;
      const at = Date.parse(ready.at);
      const listed = events.slice(0, readyIndex).findLast((e) => e.type === 'attempt.status' && e.data?.status === 'running');
      if (method === 'ssh' && listed) probeMs.push(at - Date.parse(listed.at));
      const h = history.get(ready.data!.instanceId!);
      const running = h?.statuses.find((s) => s.status === 'running');
      if (running) detectionMs.push(at - running.at.wall_ms);
      const called = new RegExp(`${CALL_MARK} (\\d+)`).exec(h?.onstart?.stdout ?? '');
      if (method === 'callback' && ready.data?.via === 'callback' && called) afterCallMs.push(at - Number(called[1]));
    }
    return { runs, reached: views.filter((v) => v.state === 'running').length, detectionMs, afterCallMs, probeMs };
  } finally {
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}
