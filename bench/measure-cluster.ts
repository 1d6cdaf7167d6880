// Several berth daemons on one Postgres store (issue #21), real processes each with its own
// BERTH_HOME, against one simulator:
//   1. take-over: N runs running, spread over three daemons; the daemon owning the most is killed
//      with SIGKILL, and each of its runs is timed until a live daemon holds its lease and has
//      looked at its instance (an answer of the service to that daemon answered for it, or one to
//      the leader, whose lists reach it through the store, counted one poll interval later: the
//      run is polled again). The victim is started again before the next kill.
//   2. one API key shared: the same runs through one daemon and through three, until all are
//      running, against the service's documented rate limits: 429s, calls per run, memory.
// What is compared comes from the simulator (its counters and instance history), the store's
// lease table, and /proc, not from what the daemons say of themselves.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { DeepPartial } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import type { Run as RunView } from '../src/wire/control-api.js';
import { startSimulator, type RunningSimulator, type SimConfigInput } from '../src/sim/index.js';
import { jobSpec } from './measure-compare.js';
import { memoryMb, spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import type { BenchPg } from './pg-server.js';
import { startServiceTap, type ServiceTap } from './service-tap.js';

/** The boot timeout of the runs: long enough that no instance is replaced while the lists catch up. */
const BOOT_TIMEOUT_S = 600;
const DEADLINE_S = 7200;

interface ClusterHealth {
  ready?: boolean;
  cluster?: { daemon_id: string; leader: boolean; owned_runs: number };
}

/** One daemon of the cluster: its process, its home, and the tap its service calls go through. */
interface Member {
  index: number;
  home: string;
  tap: ServiceTap;
  handle: DaemonHandle;
  id: string;
}

/** Daemons on one store, each behind a tap of its own. */
class Cluster {
  readonly members: Member[] = [];
  constructor(
    private readonly sim: RunningSimulator,
    private readonly root: string,
    private readonly config: DeepPartial<Config>,
  ) {}

  async add(): Promise<Member> {
    const index = this.members.length;
    const home = join(this.root, `home-${index}`);
    mkdirSync(home);
    const tap = await startServiceTap(this.sim.url);
    let handle: DaemonHandle;
    try {
      handle = await this.spawn(home, tap);
    } catch (err) {
      await tap.close();
      throw err;
    }
    const member = { index, home, tap, handle, id: '' };
    this.members.push(member);
    member.id = await daemonId(handle);
    return member;
  }

  /** SIGKILL: no shutdown of any kind, its leases left to expire. */
  async kill(m: Member): Promise<void> {
    const exited = new Promise((resolve) => m.handle.proc.once('exit', resolve));
    m.handle.proc.kill('SIGKILL');
    await exited;
    await m.handle.stop(); // closes its control API client
  }

  /** The same home again: the same daemon id. */
  async restart(m: Member): Promise<void> {
    m.handle = await this.spawn(m.home, m.tap);
    const id = await daemonId(m.handle);
    if (id !== m.id) throw new Error(`daemon ${m.index} came back as ${id}, not ${m.id}: a daemon's id must be stable per home`);
  }

  private spawn(home: string, tap: ServiceTap): Promise<DaemonHandle> {
    return spawnDaemon(home, tap.url, this.sim.apiKey, this.config, 60_000);
  }

  async close(): Promise<void> {
    for (const m of this.members) {
      await m.handle.stop();
      await m.tap.close();
    }
  }
}

/** The daemon's id in the cluster ('' from a berth that has none). */
async function daemonId(d: DaemonHandle): Promise<string> {
  return (await d.api<ClusterHealth>('GET', '/healthz')).body.cluster?.daemon_id ?? '';
}

/** Submits `count` runs, each to the next daemon in turn, from 16 connections at once. */
async function submitSpread(daemons: DaemonHandle[], count: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        const i = next++;
        const res = await daemons[i % daemons.length]!.api<RunView>('POST', '/v1/runs', jobSpec(i, DEADLINE_S, BOOT_TIMEOUT_S));
        if (res.status !== 201) throw new Error(`submit answered ${res.status}`);
        ids.push(res.body.id);
      }
    }),
  );
  return ids;
}

const listRuns = async (d: DaemonHandle) => (await d.api<RunView[]>('GET', '/v1/runs?limit=10000')).body;

/** Waits until every run is running (or has ended); returns how many are running and when the last got there. */
async function untilRunning(d: DaemonHandle, runs: number, timeoutMs: number, t0: number): Promise<{ running: number; rampMs: number }> {
  let running = 0;
  while (Date.now() - t0 < timeoutMs) {
    const views = await listRuns(d);
    running = views.filter((v) => v.state === 'running').length;
    if (views.length >= runs && views.every((v) => ['running', 'failed', 'cancelled', 'expired'].includes(v.state))) break;
    await sleep(500);
  }
  return { running, rampMs: Date.now() - t0 };
}

async function query<T>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

/** The owner of every run's lease (daemon heartbeat rows, run_id "~...", left out). */
async function leaseOwners(url: string): Promise<Map<string, string>> {
  const rows = await query<{ run_id: string; owner: string }>(url, `SELECT run_id, owner FROM run_leases WHERE run_id NOT LIKE '~%'`);
  return new Map(rows.map((r) => [r.run_id, r.owner]));
}

/** What the simulator says: creates of one attempt made twice, and instances billing for no live run. */
function ledgerFaults(sim: RunningSimulator, runs: RunView[]): { duplicateCreates: number; ownerless: number } {
  const labels = new Map<string, number>();
  for (const h of sim.history()) if (h.label) labels.set(h.label, (labels.get(h.label) ?? 0) + 1);
  const held = new Set(runs.filter((r) => r.instance).map((r) => r.instance!.id));
  return {
    duplicateCreates: [...labels.values()].filter((n) => n > 1).length,
    ownerless: sim.billingNow().filter((h) => !held.has(h.id)).length,
  };
}

export interface TakeoverPlan {
  runs: number;
  kills: number;
  pollS: number;
  seed: number;
}

interface KillResult {
  /** Runs the victim held when it was killed. */
  victimRuns: number;
  /** The victim held the leader's lease (it alone swept the account). */
  victimLed: boolean;
  /** From the kill until its last run was leased by a live daemon, ms. */
  ownedMs: number;
  /** From the kill until its last run was owned again and polled by its new owner, ms. */
  polledMs: number;
  /** Per run, kill → owned and polled, ms. */
  perRunMs: number[];
  /** Runs not taken over within the wait. */
  missed: number;
}

export interface TakeoverResult {
  runs: number;
  reachedRunning: number;
  rampMs: number;
  kills: KillResult[];
  runningAtEnd: number;
  duplicateCreates: number;
  ownerless: number;
  peakMb: number[];
}

/** Rate limits off and berth's search and create raised: N runs start in seconds (as the scale bench). */
const RAMP_SIM: SimConfigInput = { time_scale: 30, tick_ms: 50, catalog: { size: 4000 }, rate_limits: { enabled: false } };

export async function measureTakeover(server: BenchPg, plan: TakeoverPlan, leaseS: number): Promise<TakeoverResult> {
  const sim = await startSimulator({ seed: plan.seed, config: RAMP_SIM });
  const root = mkdtempSync(join(tmpdir(), 'berth-bench-takeover-'));
  const url = await server.createDatabase('berth_takeover');
  const raised = { per_s: 50, burst: 50 };
  const cluster = new Cluster(sim, root, {
    daemon: { listen: '127.0.0.1:0', max_active_runs: plan.runs },
    polling: { interval_s: plan.pollS },
    rate_limits: { search: raised, create: raised },
    store: { url },
  });
  try {
    for (let i = 0; i < 3; i++) await cluster.add();
    if (cluster.members.some((m) => m.id === ''))
      throw new Error('/healthz reports no cluster: this berth cannot run several daemons on one store');
    const t0 = Date.now();
    await submitSpread(
      cluster.members.map((m) => m.handle),
      plan.runs,
    );
    const { running: reachedRunning, rampMs } = await untilRunning(cluster.members[0]!.handle, plan.runs, 300_000, t0);

    const kills: KillResult[] = [];
    for (let k = 0; k < plan.kills; k++) {
      const owners = await leaseOwners(url);
      const counts = new Map<string, number>();
      for (const owner of owners.values()) counts.set(owner, (counts.get(owner) ?? 0) + 1);
      const victim = cluster.members.reduce((a, b) => ((counts.get(b.id) ?? 0) > (counts.get(a.id) ?? 0) ? b : a));
      const instanceOf = new Map(
        (await listRuns(victim.handle)).filter((r) => r.state === 'running' && r.instance).map((r) => [r.id, r.instance!.id]),
      );
      const theirs = [...owners].filter(([runId, owner]) => owner === victim.id && instanceOf.has(runId)).map(([runId]) => runId);
      const [lead] = await query<{ owner: string }>(url, `SELECT owner FROM run_leases WHERE run_id = '~leader'`);
      const killedAt = Date.now();
      await cluster.kill(victim);
      const ownedAt = new Map<string, { at: number; by: Member }>();
      // The new owner's own answer, or the leader's (the lists only it makes, the sweeps, reach
      // every daemon through the store at its next round: counted one poll interval later).
      const polledAfter = (by: Member, instanceId: number, since: number): number | undefined => {
        const times = cluster.members
          .filter((m) => m !== victim)
          .map((m) => {
            const at = m.tap.seenAfter(instanceId, since);
            return at === undefined ? undefined : m === by ? at : at + plan.pollS * 1000;
          })
          .filter((t): t is number => t !== undefined);
        return times.length ? Math.min(...times) : undefined;
      };
      const doneAt = new Map<string, number>();
      const noticed = new Map<string, number>();
      const waitUntil = killedAt + (leaseS * 3 + 60) * 1000;
      while (doneAt.size < theirs.length && Date.now() < waitUntil) {
        const now = await leaseOwners(url);
        // When each run was taken, as its new owner wrote it (a run.taken event, on this machine's
        // clock): answers from then on count, even those that came before this loop noticed.
        const taken = new Map(
          (
            await query<{ run_id: string; at: string }>(
              url,
              `SELECT run_id, min(at) AS at FROM events WHERE type = 'run.taken' AND at >= $1 GROUP BY run_id`,
              [killedAt],
            )
          ).map((r) => [r.run_id, Number(r.at)]),
        );
        for (const runId of theirs) {
          const by = cluster.members.find((m) => m !== victim && m.id === now.get(runId));
          if (by && !noticed.has(runId)) noticed.set(runId, Date.now());
          // The event is written just after the lease: a run whose event has not come within 2 s counts from when its lease was seen.
          const seenAt = noticed.get(runId);
          if (by && !ownedAt.has(runId) && (taken.has(runId) || Date.now() - seenAt! > 2_000))
            ownedAt.set(runId, { at: taken.get(runId) ?? seenAt!, by });
          const owned = ownedAt.get(runId);
          const seen = owned ? polledAfter(owned.by, instanceOf.get(runId)!, owned.at) : undefined;
          if (seen !== undefined && !doneAt.has(runId)) doneAt.set(runId, seen);
        }
        await sleep(100);
      }
      const perRunMs = [...doneAt.values()].map((t) => t - killedAt);
      kills.push({
        victimRuns: theirs.length,
        victimLed: lead?.owner === victim.id,
        ownedMs: Math.max(0, ...[...ownedAt.values()].map((o) => o.at - killedAt)),
        polledMs: Math.max(0, ...perRunMs),
        perRunMs,
        missed: theirs.length - doneAt.size,
      });
      await cluster.restart(victim);
      await sleep(2_000);
    }

    const runs = await listRuns(cluster.members[0]!.handle);
    return {
      runs: plan.runs,
      reachedRunning,
      rampMs,
      kills,
      runningAtEnd: runs.filter((r) => r.state === 'running').length,
      ...ledgerFaults(sim, runs),
      peakMb: cluster.members.map((m) => memoryMb(m.handle.pid).peak),
    };
  } finally {
    await cluster.close();
    await sim.close();
    rmSync(root, { recursive: true, force: true });
  }
}

export interface SharedKeyPlan {
  daemons: number;
  runs: number;
  pollS: number;
  seed: number;
  timeoutMs: number;
}

export interface SharedKeyResult {
  daemons: number;
  runs: number;
  reachedRunning: number;
  rampMs: number;
  /** Every request the simulator received until the last run was running, 429s included. */
  calls: number;
  rateLimited: number;
  rateLimitedByRoute: Record<string, number>;
  /** The simulator's answers per route and status (where the calls went, and what came of them). */
  answers: Record<string, Record<string, number>>;
  /** Peak resident memory of each daemon (VmHWM), MB. */
  peakMb: number[];
  duplicateCreates: number;
  ownerless: number;
}

/**
 * The service's documented limits (the simulator's defaults), search raised from 10/min to 5/s
 * (burst 10) as in the berth-vs-baseline section so that the runs start within the bench's time;
 * no faults: what differs between the sides is the number of daemons alone.
 */
const LIMITED_SIM: SimConfigInput = {
  time_scale: 30,
  tick_ms: 50,
  catalog: { size: 4000 },
  rate_limits: { enabled: true, groups: { search: { per_s: 5, burst: 10 } } },
};

const sum = (m: Record<string, number>) => Object.values(m).reduce((s, x) => s + x, 0);

export async function measureSharedKey(server: BenchPg, plan: SharedKeyPlan): Promise<SharedKeyResult> {
  const sim = await startSimulator({ seed: plan.seed, config: LIMITED_SIM });
  const root = mkdtempSync(join(tmpdir(), `berth-bench-shared-${plan.daemons}-`));
  const url = await server.createDatabase(`berth_shared_${plan.daemons}`);
  // berth's defaults for the service's thresholds, search scaled as the simulator's (90% of it).
  const cluster = new Cluster(sim, root, {
    daemon: { listen: '127.0.0.1:0', max_active_runs: plan.runs },
    polling: { interval_s: plan.pollS },
    rate_limits: { search: { per_s: 4.5, burst: 9 } },
    store: { url },
  });
  try {
    for (let i = 0; i < plan.daemons; i++) await cluster.add();
    const t0 = Date.now();
    await submitSpread(
      cluster.members.map((m) => m.handle),
      plan.runs,
    );
    const { running, rampMs } = await untilRunning(cluster.members[0]!.handle, plan.runs, plan.timeoutMs, t0);
    const stats = sim.stats();
    const runs = await listRuns(cluster.members[0]!.handle);
    return {
      daemons: plan.daemons,
      runs: plan.runs,
      reachedRunning: running,
      rampMs,
      calls: sum(stats.requests),
      rateLimited: sum(stats.rate_limited),
      rateLimitedByRoute: { ...stats.rate_limited },
      answers: structuredClone(stats.answers),
      peakMb: cluster.members.map((m) => memoryMb(m.handle.pid).peak),
      ...ledgerFaults(sim, runs),
    };
  } finally {
    await cluster.close();
    await sim.close();
    rmSync(root, { recursive: true, force: true });
  }
}
