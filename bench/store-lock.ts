// The control API while another program holds berth.db's write lock (a sqlite3 shell in a
// transaction): the speed half of the e2e test "a store that refuses writes" (test/e2e/
// store-lifecycle.test.ts), which asserts no duration (#38 item 7b). A real `berth daemon` with one
// booting run; /healthz and a submit, timed with the lock free, then held. Ratios, not limits: a
// store that waited for the busy lock, or an event loop frozen by it, shows as a ratio far above 1.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { FAST_SIM, startSimulator } from '../src/sim/index.js';
import { spawnDaemon } from './measure-daemon.js';
import { median, quantile, type BenchSection } from './types.js';

const HEALTH_CALLS = 50;
const SUBMITS = 10;
const SPEC = {
  name: 'bench-lock',
  image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
  disk_gb: 20,
  search: { filters: { num_gpus: { eq: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
  max_price_per_hour: 5,
  boot_timeout_s: 600,
};

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t = performance.now();
  const value = await fn();
  return { ms: performance.now() - t, value };
}

export async function runStoreLockBench(): Promise<BenchSection> {
  // Boots that last (600 sim-s at 100×: 6 s) so that transitions come while the lock is held.
  const sim = await startSimulator({ seed: 23, config: { ...FAST_SIM, lifecycle: { provision_s: 5, boot_s: { min: 600, max: 600 } } } });
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-lock-'));
  const daemon = await spawnDaemon(home, sim.url, sim.apiKey, { daemon: { listen: '127.0.0.1:0' }, polling: { interval_s: 0.5 } });
  try {
    const sample = async () => {
      const health: number[] = [];
      for (let i = 0; i < HEALTH_CALLS; i++) health.push((await timed(() => daemon.api('GET', '/healthz'))).ms);
      const submits: Array<{ ms: number; status: number }> = [];
      for (let i = 0; i < SUBMITS; i++) {
        const { ms, value } = await timed(() => daemon.api('POST', '/v1/runs', SPEC));
        submits.push({ ms, status: value.status });
      }
      return { health, submits };
    };
    const free = await sample();
    const other = new Database(join(home, 'berth.db'));
    other.exec('BEGIN IMMEDIATE');
    let locked: Awaited<ReturnType<typeof sample>>;
    try {
      locked = await sample();
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
    const p99 = (xs: number[]) => quantile(xs, 0.99);
    const ms = (n: number) => `${n.toFixed(1)} ms`;
    const submitMs = (s: typeof free.submits) => median(s.map((x) => x.ms));
    const statuses = (s: typeof free.submits) => [...new Set(s.map((x) => x.status))].join(', ');
    return {
      title: 'the control API while another program holds berth.db',
      rows: [
        {
          metric: '/healthz p99, lock held / free',
          value: `${ratio(p99(locked.health), p99(free.health))} (${ms(p99(locked.health))} / ${ms(p99(free.health))})`,
          note: `${HEALTH_CALLS} calls one after another each way; a real berth daemon with runs booting, a better-sqlite3 connection holding BEGIN IMMEDIATE on its berth.db meanwhile`,
        },
        {
          metric: 'submit median, refused (lock held) / stored (free)',
          value: `${ratio(submitMs(locked.submits), submitMs(free.submits))} (${ms(submitMs(locked.submits))} / ${ms(submitMs(free.submits))})`,
          note: `${SUBMITS} POST /v1/runs each way; answered ${statuses(locked.submits)} with the lock held, ${statuses(free.submits)} with it free`,
        },
      ],
    };
  } finally {
    await daemon.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}
