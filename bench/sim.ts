// Simulator benchmark: (1) requests per second it serves on loopback with 32 concurrent keep-alive
// connections (rate limits off, no faults), on a cheap read and on showing an instance; (2) offer
// search latency over the catalog, in process (the search itself) and over loopback (whole request).
import { Pool } from 'undici';
import { Catalog } from '../src/sim/catalog.js';
import { startSimulator, type RunningSimulator } from '../src/sim/index.js';
import { searchOffers } from '../src/sim/search.js';
import { median, quantile, type BenchRow, type BenchSection } from './types.js';

const CONNECTIONS = 32;
const RUN_MS = 2000;
const REQ_TARGET = 2000;
const SEARCH_TARGET_MS = 5;

/** A typical berth search: the CLI's default filters plus a GPU, best value first. */
const SEARCH_BODY = {
  verified: { eq: true },
  external: { eq: false },
  rentable: { eq: true },
  rented: { eq: false },
  num_gpus: { gte: '1' },
  direct_port_count: { gte: 1 },
  gpu_ram: { gte: 20000 },
  order: [['dlperf_per_dphtotal', 'desc']],
  type: 'on-demand',
  limit: 64,
};

export async function runSimBench(): Promise<BenchSection> {
  const sim = await startSimulator({ config: { rate_limits: { enabled: false } } });
  const pool = new Pool(sim.url, { connections: CONNECTIONS, pipelining: 1 });
  try {
    const instanceId = await createOne(sim, pool);
    const user = await throughput(pool, sim, '/api/v0/users/current/');
    const show = await throughput(pool, sim, `/api/v0/instances/${instanceId}/`);
    const inProcess = searchInProcess();
    const loopback = await searchLoopback(pool, sim);
    const rps = (r: { count: number; ms: number; errors: number }) => (r.count / r.ms) * 1000;
    const rows: BenchRow[] = [
      rateRow('GET /api/v0/users/current/', rps(user), user.errors),
      rateRow('GET /api/v0/instances/{id}/', rps(show), show.errors),
      latencyRow('search, in process (median)', median(inProcess), `${inProcess.length} searches over 1,000 offers`),
      latencyRow('search, in process (p99)', quantile(inProcess, 0.99), 'same sample'),
      latencyRow('search over loopback (median)', median(loopback), `${loopback.length} sequential requests, 600 offers, JSON included`),
      latencyRow('search over loopback (p99)', quantile(loopback, 0.99), 'same sample'),
    ];
    return { title: 'Simulator', rows };
  } finally {
    await pool.close();
    await sim.close();
  }
}

async function createOne(sim: RunningSimulator, pool: Pool): Promise<number> {
  const offer = sim.offers()[0]!;
  const res = await pool.request({
    method: 'PUT',
    path: `/api/v0/asks/${offer.id}/`,
    headers: { authorization: `Bearer ${sim.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ image: 'bench', disk: 10 }),
  });
  const body = (await res.body.json()) as { new_contract: number };
  return body.new_contract;
}

/** CONNECTIONS workers issue requests back to back for RUN_MS. */
async function throughput(pool: Pool, sim: RunningSimulator, path: string): Promise<{ count: number; ms: number; errors: number }> {
  const headers = { authorization: `Bearer ${sim.apiKey}` };
  // Warm up the JIT and the connections first.
  await Promise.all(Array.from({ length: CONNECTIONS }, () => pool.request({ method: 'GET', path, headers }).then((r) => r.body.text())));
  let count = 0;
  let errors = 0;
  const start = performance.now();
  const end = start + RUN_MS;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const res = await pool.request({ method: 'GET', path, headers });
        await res.body.text();
        if (res.statusCode === 200) count++;
        else errors++;
      }
    }),
  );
  return { count, ms: performance.now() - start, errors };
}

function searchInProcess(): number[] {
  const catalog = new Catalog(1, 1000);
  const limits = { default_limit: 64, max_limit: 1000 };
  const times: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const t = performance.now();
    searchOffers(catalog, SEARCH_BODY, limits);
    if (i >= 200) times.push(performance.now() - t); // the first ones warm the JIT
  }
  return times;
}

async function searchLoopback(pool: Pool, sim: RunningSimulator): Promise<number[]> {
  const headers = { authorization: `Bearer ${sim.apiKey}`, 'content-type': 'application/json' };
  const body = JSON.stringify(SEARCH_BODY);
  const times: number[] = [];
  for (let i = 0; i < 600; i++) {
    const t = performance.now();
    const res = await pool.request({ method: 'POST', path: '/api/v0/bundles/', headers, body });
    await res.body.text();
    if (i >= 100) times.push(performance.now() - t);
  }
  return times;
}

function rateRow(metric: string, perSecond: number, errors: number): BenchRow {
  return {
    metric: `${metric} throughput`,
    value: `${Math.round(perSecond).toLocaleString('en-US')} req/s`,
    target: `>= ${REQ_TARGET.toLocaleString('en-US')} req/s`,
    met: perSecond >= REQ_TARGET && errors === 0,
    note: `${CONNECTIONS} keep-alive connections (undici Pool), ${RUN_MS / 1000} s, rate limits off${errors ? `, ${errors} non-200 answers` : ''}`,
  };
}

function latencyRow(metric: string, ms: number, note: string): BenchRow {
  return { metric, value: `${ms.toFixed(3)} ms`, target: `< ${SEARCH_TARGET_MS} ms`, met: ms < SEARCH_TARGET_MS, note };
}
