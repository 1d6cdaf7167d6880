// Names as handles at scale (#50 item 5): submissions per second through a real daemon's POST
// /v1/runs (16 keep-alive connections, each answered 201 with the stored run), while its store
// fills with 10,000 live runs of ONE spec (so one name: `names`, `names-2`, ... `names-10000`),
// then with those 10,000 stored: the same spec again, and specs of names of their own. The runs
// queue behind max_active_runs 1, so the simulator is asked for one rental only. Before the name
// index, each submit read every live run and tried `name-2`, `name-3`, ... one by one: the rate fell
// batch after batch (385/s to 149/s over 1,800 submissions). The target: >= 300/s with 10,000 stored,
// and no fall from the first batch to the last (the last at least 80% of the first).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FAST_SIM, startSimulator } from '../src/sim/index.js';
import type { Run as RunView } from '../src/wire/control-api.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import { median, type BenchSection } from './types.js';

const WORKERS = 16;
const spec = (name: string) => ({
  name,
  image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
  disk_gb: 20,
  search: { filters: { num_gpus: { eq: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
  max_price_per_hour: 5,
  boot_timeout_s: 600,
});

/** `count` submissions in batches of `batch`, from WORKERS connections; the rate of each batch, per second. */
async function submitBatches(
  d: DaemonHandle,
  count: number,
  batch: number,
  nameOf: (i: number) => string,
): Promise<{ rates: number[]; lastName: string }> {
  const rates: number[] = [];
  let lastName = '?';
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (next < n) {
          const i = done + next++;
          const res = await d.api<RunView>('POST', '/v1/runs', spec(nameOf(i)));
          if (res.status !== 201) throw new Error(`submit answered ${res.status}`);
          lastName = res.body.name;
        }
      }),
    );
    rates.push(n / ((performance.now() - t0) / 1000));
  }
  return { rates, lastName };
}

const int = (x: number) => Math.round(x).toLocaleString('en-US');
const list = (xs: number[]) => xs.map(int).join(', ');
/** Not falling: the last batch at least 80% of the first (load on a shared machine moves each by some). */
const steady = (xs: number[]) => xs.at(-1)! >= 0.8 * xs[0]!;

export async function runNamesBench(opts: { quick: boolean }): Promise<BenchSection> {
  const stored = opts.quick ? 2_000 : 10_000;
  const measured = opts.quick ? 1_000 : 2_000;
  const sim = await startSimulator({ seed: 50, config: { ...FAST_SIM, rate_limits: { enabled: false } } });
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-names-'));
  const daemon = await spawnDaemon(home, sim.url, sim.apiKey, { daemon: { listen: '127.0.0.1:0', max_active_runs: 1 } });
  try {
    const { rates: fill } = await submitBatches(daemon, stored, stored / 10, () => 'names');
    // The name the last answer gave (runs submitted together may share a millisecond, so the
    // newest in a list is any of them).
    const { rates: same, lastName } = await submitBatches(daemon, measured, measured / 4, () => 'names');
    const { rates: own } = await submitBatches(daemon, measured, measured / 4, (i) => `names-own-${i}`);
    const at = `${int(stored)} live runs of one spec stored`;
    return {
      title: 'names as handles at scale (#50)',
      rows: [
        {
          metric: `submissions/s of one spec, ${at}`,
          value: `${int(median(same))} /s (batches: ${list(same)})`,
          target: '>= 300 /s, not falling',
          met: Math.min(...same) >= 300 && steady(same),
          note: `${int(measured)} POST /v1/runs of the same spec (one name, so each takes the next suffix: the last was "${lastName}") from ${WORKERS} keep-alive connections to a spawned daemon on SQLite, the runs queued behind max_active_runs 1; in ${int(measured / 4)}-submission batches`,
        },
        {
          metric: `submissions/s of names of their own, ${at}`,
          value: `${int(median(own))} /s (batches: ${list(own)})`,
          target: '>= 300 /s, not falling',
          met: Math.min(...own) >= 300 && steady(own),
          note: `${int(measured)} specs each with a name no run has, the same way`,
        },
        {
          metric: `submissions/s while the store fills from 0 to ${int(stored)} runs of one spec`,
          value: `${int(median(fill))} /s (batches: ${list(fill)})`,
          target: 'not falling',
          met: steady(fill),
          note: `the ${int(stored)} runs above, in ${int(stored / 10)}-submission batches: before the name index the rate fell batch after batch (385/s to 149/s over 1,800 submissions)`,
        },
      ],
    };
  } finally {
    await daemon.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}
