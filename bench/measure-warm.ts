// Warm instances measured (issue #51, part 5): N tasks of one spec submitted one after another (each
// when berth reports the last one ended) to a real `berth daemon` at its default rate limits against
// a simulator at its documented limits, whose machines pull an image slowly the first time
// (`first_pull_s`) and fast once they have it (`cached_boot_s`). Run once with `warm` on and once
// with it off. Each task prints `task-<i>-start <epoch ms>` first, then sleeps a second and prints
// `done <epoch ms>`; the daemon follows it over SSH (a real sshd per instance, berth's key on the
// account, as a user has it), so the bench sees the first line as berth does, on the run's event
// stream (`output=1`), and reads the moment the container printed it from the line itself.
//
// Time: the simulator runs `timeScale` sim seconds a wall second, so that 20 cold boots fit in
// minutes; berth, its rate limits and the container's own commands run on the wall clock. A figure
// in "service seconds" puts each part on the clock it would run on at the real service: the
// simulator's phases (provisioning, a recycle's `recycling`, `loading`: the pull and the boot) in
// their sim seconds, everything else (berth's path, the rate limits' waits, the task) in wall
// seconds. Money the same way: the simulator's ledger bills sim time, so its raw total counts
// berth's wall-clock path `timeScale` times over; the service-seconds spend bills each status
// interval of each instance's history on its clock.
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CostsReport, Run as RunView } from '../src/wire/control-api.js';
import { startSimulator } from '../src/sim/index.js';
import type { SimInstanceHistory } from '../src/sim/instances.js';
import { loadLoginKey } from '../src/ssh/key-pair.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import { taskSpec } from './task-fleet.js';

export interface WarmPlan {
  tasks: number;
  warm: boolean;
  /** The spec's warm.idle_s (wall seconds: the daemon and the container's backstop run on the wall clock). */
  idleS: number;
  timeScale: number;
  /** Sim seconds of a machine's first pull of the image, on top of its drawn boot_s. */
  firstPullS: number;
  /** Sim seconds of loading on a machine that has the image. */
  cachedBootS: number;
  seed: number;
  timeoutMs: number;
}

interface WarmTask {
  runId: string;
  state: string;
  instanceId: number | null;
  /** Wall ms the bench submitted it. */
  submittedAt: number;
  /** Wall ms berth reports the run ended (its view's updated_at once it is final). */
  endedAt: number;
  /** Wall ms the container printed its first line (the line's own `date`); null if never seen. */
  printedAt: number | null;
  /** Wall ms the first line reached the bench on the run's event stream (berth following over SSH); null if it never came there. */
  seenAt: number | null;
  /** Wall ms the container printed its end marker (`done <ms>`), read from the run's log. */
  doneAt: number | null;
}

interface WarmGap {
  /** Task i (1-based, the second task on). */
  task: number;
  /** Wall ms from the previous run's end (berth's) to this task's first line printed. */
  wallMs: number;
  /** The same gap in service seconds (the sim's phases in sim s, the rest in wall s). */
  serviceS: number;
  /** Wall ms from the previous run's end to berth showing the first line (event stream), or null. */
  seenWallMs: number | null;
  /** Wall ms from the previous task's end marker to this task's first line printed, or null. */
  markerWallMs: number | null;
  /** The same in service seconds (berth's path from the marker to the run's end is on the wall clock), or null. */
  markerServiceS: number | null;
  /** How the container was made: `create` (first pull or cached) or `recycle`. */
  how: 'create, first pull' | 'create, image cached' | 'recycle';
}

export interface WarmResult {
  plan: WarmPlan;
  tasks: WarmTask[];
  gaps: WarmGap[];
  /** Instances created (the simulator's history). */
  creates: number;
  /** Recycles the simulator saw (PUT update_template with recycle, or PUT recycle). */
  recycles: number;
  /** Machines that pulled the image for the first time (creates whose load was not cached). */
  firstPulls: number;
  /** berth's GET /v1/costs total (wall-clock hours at the listed prices) and the service's charges it compared. */
  berthUsd: number;
  berthServiceUsd: number | null;
  /**
   * The service's charges for the same instances, each instance once: the report gives every row
   * that names an instance (a taker's attempt, a donor's warm hold) that instance's whole charge.
   */
  serviceChargesUsd: number | null;
  /** The simulator's ledger total: sim hours billed. */
  simUsd: number;
  /** The ledger's money on the service-seconds clock (see the top of this file). */
  serviceUsd: number;
  /** Instances billing once the last hold expired (must be none). */
  billingAfter: number;
  /** Wall s the mode took. */
  wallS: number;
}

const SIM_PHASES: ReadonlySet<string | null> = new Set([null, 'loading', 'recycling']);
/** Statuses the simulator bills compute in (src/sim/lifecycle.ts billsCompute; docs/simulator.md, "Billing"). */
const COMPUTE_BILLED: ReadonlySet<string | null> = new Set(['loading', 'running', 'rebooting', 'recycling']);

/** The one spec every task is (only its name differs): the run text is not part of the reuse key. */
function spec(i: number, plan: WarmPlan): Record<string, unknown> {
  const run = `echo "task-${i}-start $(date +%s%3N)"; sleep 1; echo "done $(date +%s%3N)"`;
  return { ...taskSpec(i, run, plan.timeoutMs), ...(plan.warm ? { warm: { idle_s: plan.idleS } } : {}) };
}

/** The first `task-<i>-start <ms>` line of the run's output stream (berth following over SSH): when it came, and its own time. */
function watchFirstLine(d: DaemonHandle, runId: string, signal: AbortSignal): Promise<{ seenAt: number; printedAt: number } | null> {
  return (async () => {
    const res = await fetch(`${d.url}/v1/events/stream?run=${runId}&output=1`, {
      headers: { authorization: `Bearer ${d.token}` },
      signal,
    });
    if (!res.ok || !res.body) return null;
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk as Uint8Array, { stream: true });
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const message = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        if (!message.startsWith('event: output')) continue;
        const data = /^data: (.*)$/m.exec(message)?.[1];
        if (!data) continue;
        for (const line of (JSON.parse(data) as { lines: string[] }).lines) {
          const m = /^task-\d+-start (\d+)$/.exec(line);
          if (m) return { seenAt: Date.now(), printedAt: Number(m[1]) };
        }
      }
    }
    return null;
  })().catch(() => null);
}

const isEnded = (v: RunView) => ['succeeded', 'failed', 'cancelled', 'expired'].includes(v.state);

async function view(d: DaemonHandle, runId: string): Promise<RunView> {
  for (let i = 0; ; i++) {
    try {
      return (await d.api<RunView>('GET', `/v1/runs/${runId}`)).body;
    } catch (err) {
      if (i >= 5) throw err;
      await sleep(250);
    }
  }
}

/** One task: submitted, its first line watched, waited for until berth reports it ended. */
async function oneTask(d: DaemonHandle, i: number, plan: WarmPlan, deadline: number): Promise<WarmTask> {
  const submittedAt = Date.now();
  const res = await d.api<RunView>('POST', '/v1/runs', spec(i, plan));
  if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
  const runId = res.body.id;
  const stop = new AbortController();
  const first = watchFirstLine(d, runId, stop.signal);
  let v: RunView;
  for (;;) {
    v = await view(d, runId);
    if (isEnded(v)) break;
    if (Date.now() > deadline) throw new Error(`task ${i} (${runId}) had not ended within the bench's time (${v.state})`);
    // The next task is submitted when this one ends: looked at 10 times a second, as a script polling berth would.
    await sleep(100);
  }
  // A line that came with the end: give the stream a moment, then stop it.
  const seen = await Promise.race([first, sleep(1_000).then(() => null)]);
  stop.abort();
  const log = (await d.api<{ text: string }>('GET', `/v1/runs/${runId}/logs`)).body.text;
  const printed = /^task-\d+-start (\d+)$/m.exec(log)?.[1];
  const done = /^done (\d+)$/m.exec(log)?.[1];
  return {
    runId,
    state: v.state,
    instanceId: v.attempts.at(-1)?.instance_id ?? null,
    submittedAt,
    endedAt: Date.parse(v.updated_at),
    printedAt: seen?.printedAt ?? (printed ? Number(printed) : null),
    seenAt: seen?.seenAt ?? null,
    doneAt: done ? Number(done) : null,
  };
}

/**
 * The container that printed task `t`'s first line: the last container start (a create's, or a
 * recycle's `recycling`) before the line, and its `running` after; its sim-clocked phases in wall ms
 * and in sim s.
 */
function containerStart(h: SimInstanceHistory, printedAt: number) {
  const starts = h.statuses
    .map((s, k) => ({ s, k }))
    .filter(({ s, k }) => s.at.wall_ms <= printedAt && (s.status === 'recycling' || k === 0));
  const start = starts.at(-1)!;
  const begin = start.k === 0 ? h.created_at : start.s.at;
  const running = h.statuses.slice(start.k).find((s) => s.status === 'running' && s.at.wall_ms <= printedAt + 50) ?? start.s;
  const loading = h.statuses.slice(start.k).find((s) => s.status === 'loading');
  const loadSimS = loading ? running.at.sim_s - loading.at.sim_s : 0;
  return {
    recycle: start.k !== 0,
    wallMs: running.at.wall_ms - begin.wall_ms,
    simS: running.at.sim_s - begin.sim_s,
    loadSimS,
  };
}

/** What `h` billed with its sim-clocked statuses in sim s and the others in wall s, until it was destroyed (or `nowWall`). */
function serviceDollars(h: SimInstanceHistory, now: { wall_ms: number; sim_s: number }): number {
  const end = h.destroyed_at ?? now;
  let computeS = 0;
  let lifeS = 0;
  const points = [
    { status: null as string | null, at: h.created_at },
    ...h.statuses.map((s) => ({ status: s.status as string | null, at: s.at })),
  ];
  for (let k = 0; k < points.length; k++) {
    const from = points[k]!.at;
    const to = points[k + 1]?.at ?? end;
    const status = points[k]!.status;
    const s = SIM_PHASES.has(status) ? to.sim_s - from.sim_s : (to.wall_ms - from.wall_ms) / 1000;
    lifeS += Math.max(0, s);
    if (COMPUTE_BILLED.has(status)) computeS += Math.max(0, s);
  }
  return (h.compute_dph * computeS + h.disk_dph * lifeS) / 3600;
}

/** The service's charges of each instance in the costs report, counted once however many rows name it. */
function chargesOnce(costs: CostsReport): number {
  const byInstance = new Map<number, number>();
  for (const run of costs.runs)
    for (const i of run.instances) if (i.instance_id !== null && i.service_usd !== null) byInstance.set(i.instance_id, i.service_usd);
  return [...byInstance.values()].reduce((a, b) => a + b, 0);
}

export async function runWarm(plan: WarmPlan): Promise<WarmResult> {
  const home = mkdtempSync(join(tmpdir(), 'berth-warm-'));
  const key = loadLoginKey({ home });
  const sim = await startSimulator({
    config: {
      seed: plan.seed,
      time_scale: plan.timeScale,
      tick_ms: 20,
      catalog: { size: 2000 },
      lifecycle: { first_pull_s: plan.firstPullS, cached_boot_s: plan.cachedBootS },
      onstart_exec: { enabled: true, timeout_s: Math.ceil(plan.timeoutMs / 1000) },
      // The real service's uploads take about a second (used only if the SSH follow falls back).
      logs: { upload_delay_s: plan.timeScale },
      // The simulator's documented limits (docs/simulator.md, "Rate limits"), nothing raised.
      rate_limits: { enabled: true },
      account: { ssh_keys: [key.publicLine] },
      ssh_listeners: { enabled: true },
    },
  });
  let daemon: DaemonHandle | undefined;
  const t0 = Date.now();
  try {
    // berth at its defaults (config/default.json: rate limits, the 10 s poll): nothing raised.
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, { daemon: { listen: '127.0.0.1:0' } });
    const deadline = t0 + plan.timeoutMs;
    const tasks: WarmTask[] = [];
    for (let i = 0; i < plan.tasks; i++) tasks.push(await oneTask(daemon, i, plan, deadline));
    // With warm on, the last task's instance is held for idle_s, then released and destroyed: that
    // tail is part of what warm costs, so the bench waits for it (and checks nothing is left billing).
    while (sim.billingNow().length > 0 && Date.now() < deadline + plan.idleS * 1000) await sleep(500);
    const costs = (await daemon.api<CostsReport>('GET', '/v1/costs')).body;
    const history = sim.history();
    const byId = new Map(history.map((h) => [h.id, h]));
    const gaps: WarmGap[] = [];
    for (let t = 1; t < tasks.length; t++) {
      const prev = tasks[t - 1]!;
      const cur = tasks[t]!;
      const h = cur.instanceId !== null ? byId.get(cur.instanceId) : undefined;
      if (cur.printedAt === null || !h) continue;
      const c = containerStart(h, cur.printedAt);
      const wallMs = cur.printedAt - prev.endedAt;
      const serviceS = (wallMs - c.wallMs) / 1000 + c.simS;
      gaps.push({
        task: t + 1,
        wallMs,
        serviceS,
        seenWallMs: cur.seenAt === null ? null : cur.seenAt - prev.endedAt,
        markerWallMs: prev.doneAt === null ? null : cur.printedAt - prev.doneAt,
        markerServiceS: prev.doneAt === null ? null : serviceS + (prev.endedAt - prev.doneAt) / 1000,
        how: c.recycle ? 'recycle' : c.loadSimS > plan.cachedBootS + 1 ? 'create, first pull' : 'create, image cached',
      });
    }
    const ledger = sim.ledger();
    const recycles = Object.entries(sim.stats().requests)
      .filter(([route]) => /^PUT \/api\/v0\/instances\/(update_template|recycle)\//.test(route))
      .reduce((n, [, calls]) => n + calls, 0);
    const firstPulls = history.filter((h) => {
      const loading = h.statuses.find((s) => s.status === 'loading');
      const running = h.statuses.find((s) => s.status === 'running');
      return loading && running && running.at.sim_s - loading.at.sim_s > plan.cachedBootS + 1;
    }).length;
    return {
      plan,
      tasks,
      gaps,
      creates: history.length,
      recycles,
      firstPulls,
      berthUsd: costs.total_usd,
      berthServiceUsd: costs.service.total_usd,
      serviceChargesUsd: costs.service.compared ? chargesOnce(costs) : null,
      simUsd: ledger.total_usd,
      serviceUsd: history.reduce((s, h) => s + serviceDollars(h, ledger.at), 0),
      billingAfter: sim.billingNow().length,
      wallS: (Date.now() - t0) / 1000,
    };
  } finally {
    await daemon?.stop();
    await sim.close();
    // BENCH_KEEP=DIR copies the daemon's log there, to read where the time went.
    if (process.env.BENCH_KEEP)
      cpSync(join(home, 'daemon.log'), join(process.env.BENCH_KEEP, `warm-${plan.warm ? 'on' : 'off'}-daemon.log`));
    rmSync(home, { recursive: true, force: true });
  }
}
