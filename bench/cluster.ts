// Several daemons on one Postgres store (issue #21), the `cluster` part (`--only cluster`): the
// take-over of a killed daemon's runs, one API key shared by three daemons against one daemon, and
// the store's throughput on Postgres against SQLite. It starts a Postgres server of its own
// (./pg-server.ts). Measurements are in measure-cluster.ts and measure-store.ts; this file sets the
// sizes and turns results into rows.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/index.js';
import { measureSharedKey, measureTakeover, type SharedKeyResult, type TakeoverResult } from './measure-cluster.js';
import { measureStore, type StoreFigures } from './measure-store.js';
import { startBenchPg, type BenchPg } from './pg-server.js';
import { median, quantile, type BenchRow, type BenchSection } from './types.js';

/** cluster.lease_s's default, which the daemons here keep. */
const LEASE_S = 15;
const POLL_S = 1;

interface Sizes {
  takeoverRuns: number;
  kills: number;
  sharedRuns: number;
  sharedTimeoutMs: number;
}

const FULL: Sizes = { takeoverRuns: 300, kills: 5, sharedRuns: 1000, sharedTimeoutMs: 600_000 };
const QUICK: Sizes = { takeoverRuns: 60, kills: 3, sharedRuns: 60, sharedTimeoutMs: 90_000 };

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const dec = (n: number, d = 1) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }) : 'n/a';
const ms = (n: number) => (Number.isFinite(n) ? `${int(n)} ms` : 'n/a');

/**
 * `only`: one part alone: `shared`, the one-key comparison (`--only cluster-shared`), the part that
 * says how several daemons spend one key's calls; `takeover`, the kills (`--only cluster-takeover`).
 */
export async function runClusterBench(opts: { quick: boolean; only?: 'shared' | 'takeover' }): Promise<BenchSection[]> {
  const sizes = opts.quick ? QUICK : FULL;
  const server = await startBenchPg();
  const quick = opts.quick ? ' (quick)' : '';
  try {
    // One after the other, so that no part shares the machine's cores with another; a part that
    // fails is one failed row, and the others still run.
    const shared = () =>
      section(`one API key: ${int(sizes.sharedRuns)} runs through 3 daemons vs 1${quick}`, async () => {
        const plan = { runs: sizes.sharedRuns, pollS: POLL_S, seed: 22, timeoutMs: sizes.sharedTimeoutMs };
        const one = await measureSharedKey(server, { ...plan, daemons: 1 });
        return sharedRows(one, await measureSharedKey(server, { ...plan, daemons: 3 }));
      });
    const takeover = () =>
      section(`take-over: ${int(sizes.takeoverRuns)} runs over 3 daemons, ${sizes.kills} kill -9s, ${LEASE_S} s lease${quick}`, async () =>
        takeoverRows(await measureTakeover(server, { runs: sizes.takeoverRuns, kills: sizes.kills, pollS: POLL_S, seed: 21 }, LEASE_S)),
      );
    if (opts.only === 'shared') return [await shared()];
    if (opts.only === 'takeover') return [await takeover()];
    return [
      await takeover(),
      await shared(),
      await section('store throughput: Postgres vs SQLite', async () => storeRows(await storeThroughput(server))),
    ];
  } finally {
    await server.stop();
  }
}

async function section(title: string, rows: () => Promise<BenchRow[]>): Promise<BenchSection> {
  try {
    return { title, rows: await rows() };
  } catch (err) {
    return { title, rows: [{ metric: 'section failed', value: err instanceof Error ? err.message : String(err), met: false }] };
  }
}

function takeoverRows(r: TakeoverResult): BenchRow[] {
  const polled = r.kills.map((k) => k.polledMs);
  const targetMs = (LEASE_S + 5) * 1000;
  const p99 = quantile(polled, 0.99);
  const missed = r.kills.reduce((s, k) => s + k.missed, 0);
  const perRun = r.kills.flatMap((k) => k.perRunMs);
  return [
    {
      metric: 'runs that reached running',
      value: `${int(r.reachedRunning)}/${int(r.runs)} in ${dec(r.rampMs / 1000)} s`,
      note: `submitted to the three daemons in turn; simulator at 30×, no faults, its rate limits off, berth's search and create raised to 50/s (as the scale section), ${POLL_S} s poll interval`,
    },
    {
      metric: `take-over: kill -9 → every run of the victim owned and polled again, median / p99 of ${r.kills.length}`,
      value: `${ms(median(polled))} / ${ms(p99)}`,
      target: `<= ${int(targetMs)} ms (lease + 5 s)`,
      met: p99 <= targetMs && missed === 0,
      note:
        `each time the daemon holding the most leases (run_leases) is killed; a run is owned again when its new owner took its lease (its run.taken event), polled once an answer of the service listed after that answered for its instance to its new owner (a list that reported it, or a list filtered on its id answered to its end), or to the leader, whose lists every daemon reads from the store (counted one poll interval later); a pass-through in front of the simulator per daemon sees the answers; the victim is started again before the next kill. Per kill (victim's runs, whether it led: all owned / all polled): ` +
        r.kills
          .map(
            (k) =>
              `${int(k.victimRuns)}${k.victimLed ? ' (led)' : ''}: ${ms(k.ownedMs)} / ${ms(k.polledMs)}${k.missed ? ` (${k.missed} not within the wait)` : ''}`,
          )
          .join('; ') +
        `. Per run, kill → owned and polled: median ${ms(median(perRun))}, p99 ${ms(quantile(perRun, 0.99))} (${perRun.length} runs)` +
        (p99 <= targetMs
          ? ''
          : ". The lease is most of it (15 s); what is left is the new owner's next round and its list call at its share of the list budget"),
    },
    {
      metric: 'after the kills: runs running, duplicate creates, instances billing without a live run',
      value: `${int(r.runningAtEnd)}/${int(r.reachedRunning)} · ${r.duplicateCreates} · ${r.ownerless}`,
      target: `all · 0 · 0`,
      met: r.runningAtEnd === r.reachedRunning && r.duplicateCreates === 0 && r.ownerless === 0,
      note: "the simulator's instance history (labels made twice) and what bills now against the runs' instances",
    },
    {
      metric: 'peak memory per daemon',
      value: r.peakMb.map((m) => `${dec(m, 0)} MB`).join(' · '),
      note: 'VmHWM of each daemon process at the end (a restarted one: since its last start)',
    },
  ];
}

function sharedRows(one: SharedKeyResult, three: SharedKeyResult): BenchRow[] {
  const side = (a: string, b: string) => `3 daemons ${a} · 1 daemon ${b}`;
  const perRun = (s: SharedKeyResult) => (s.reachedRunning > 0 ? s.calls / s.reachedRunning : Number.NaN);
  const routes = (s: SharedKeyResult) =>
    Object.entries(s.rateLimitedByRoute)
      .map(([route, n]) => `${int(n)} ${route}`)
      .join(', ') || 'none';
  return [
    {
      metric: 'runs that reached running',
      value: side(
        `${int(three.reachedRunning)}/${int(three.runs)} in ${dec(three.rampMs / 1000)} s`,
        `${int(one.reachedRunning)}/${int(one.runs)} in ${dec(one.rampMs / 1000)} s`,
      ),
      note: `the same runs submitted to the daemons in turn; simulator at 30× with the service's documented rate limits (search raised to 5/s, burst 10, as in the berth-vs-baseline section), no faults; berth's default rate limits (search 4.5/s), ${POLL_S} s poll interval; a fresh simulator and database for each side`,
    },
    {
      metric: '429s received',
      value: side(int(three.rateLimited), int(one.rateLimited)),
      target: '3 daemons <= 1 daemon',
      met: three.rateLimited <= one.rateLimited,
      note:
        `the simulator's count of 429 answers until the last run was running (or the wait ended): 3 daemons ${routes(three)}; 1 daemon ${routes(one)}` +
        (three.rateLimited <= one.rateLimited
          ? ''
          : ". Missed: each 429 is a call that reached the service within the threshold of the key's previous call of its group (a refused create also starts the key's 12 s penalty). The daemons claim their calls' moments in the store (rate_slots) and write a 429's pause there; these few are left over, as a claimed moment is not the moment the request reaches the service"),
    },
    {
      metric: 'API calls per run that reached running',
      value: side(dec(perRun(three)), dec(perRun(one))),
      note: `every request the simulator received until the last run was running: ${int(three.calls)} and ${int(one.calls)}. By endpoint and answer: 3 daemons ${breakdown(three)}; 1 daemon ${breakdown(one)}`,
    },
    {
      metric: 'peak memory per daemon',
      value: side(three.peakMb.map((m) => `${dec(m, 0)} MB`).join(', '), `${dec(one.peakMb[0] ?? Number.NaN, 0)} MB`),
      note: 'VmHWM of each daemon process once every run was running',
    },
    {
      metric: 'duplicate creates, instances billing without a live run',
      value: side(`${three.duplicateCreates}, ${three.ownerless}`, `${one.duplicateCreates}, ${one.ownerless}`),
      target: '0, 0',
      met: three.duplicateCreates + three.ownerless + one.duplicateCreates + one.ownerless === 0,
    },
  ];
}

/** Calls per endpoint, most first, each with its answers: "1,010 PUT /api/v0/asks/{id}/ (995 200, 15 410)". */
function breakdown(s: SharedKeyResult): string {
  const total = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0);
  return Object.entries(s.answers)
    .sort((a, b) => total(b[1]) - total(a[1]))
    .map(([route, by]) => {
      const statuses = Object.entries(by)
        .sort((a, b) => b[1] - a[1])
        .map(([status, n]) => `${int(n)} ${status}`);
      return `${int(total(by))} ${route} (${statuses.join(', ')})`;
    })
    .join(', ');
}

interface StoreThroughput {
  sqlite: StoreFigures;
  postgres: StoreFigures;
}

async function storeThroughput(server: BenchPg): Promise<StoreThroughput> {
  const url = await server.createDatabase('berth_store_calls');
  const home = mkdtempSync(join(tmpdir(), 'berth-bench-store-'));
  try {
    const sqlite = openStore({ home });
    const pgStore = openStore({ home, pg: { url } });
    try {
      return { sqlite: measureStore(sqlite, 2_000), postgres: measureStore(pgStore, 2_000) };
    } finally {
      sqlite.close();
      pgStore.close();
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

function storeRows(s: StoreThroughput): BenchRow[] {
  const how =
    "one after another on one thread, as a daemon makes them; SQLite is berth.db (synchronous=FULL), Postgres the bench's server on loopback with its defaults (fsync on), through berth's store (its worker-thread bridge)";
  return [
    {
      metric: 'submissions/s (a run and its first event, one transaction each)',
      value: `Postgres ${int(s.postgres.submissionsPerS)} /s · SQLite ${int(s.sqlite.submissionsPerS)} /s`,
      note: `1,000 of them, ${how}`,
    },
    {
      metric: 'transitions/s (a progress save and an event, one transaction each)',
      value: `Postgres ${int(s.postgres.transitionsPerS)} /s · SQLite ${int(s.sqlite.transitionsPerS)} /s`,
      note: `1,000 of them, ${how}`,
    },
    {
      metric: 'a progress save and an event, median / p99',
      value: `Postgres ${dec(s.postgres.save.median, 3)} / ${dec(s.postgres.save.p99, 3)} ms · SQLite ${dec(s.sqlite.save.median, 3)} / ${dec(s.sqlite.save.p99, 3)} ms`,
      note: '500 of them after a warm-up',
    },
    {
      metric: 'a read of one run (runs.get), median / p99',
      value: `Postgres ${dec(s.postgres.read.median, 3)} / ${dec(s.postgres.read.p99, 3)} ms · SQLite ${dec(s.sqlite.read.median, 3)} / ${dec(s.sqlite.read.p99, 3)} ms`,
      note: '2,000 of them after a warm-up',
    },
  ];
}
