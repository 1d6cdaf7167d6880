// Tasks followed over SSH (issue #39's Done-when): N runs with a task on the simulator at its
// documented limits, each instance with a real sshd that takes berth's key (on the account), and a
// real `berth daemon` at its defaults, which follows every task over SSH. While the tasks wait for
// the bench's go file (the others look every second), the first `followers` of them print `tick <ms since epoch>` every 0.2 s, and
// as many `berth logs RUN --follow` processes print them: each tick's lag is the wall time from the
// task's `date` to the line on the CLI's stdout (one machine, one clock). Then every task is told to
// end at once (each ends within 1 s of the go), and the bench reads, per instance, the wall time
// from the go to its self-stop (the wrapper's wait for the daemon's `.ack`, plus its stop call) and
// to its destroy, and from the simulator how many logs-endpoint calls were made (the goal: none).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunEvent } from '../src/wire/control-api.js';
import { packagePath } from '../src/package-path.js';
import { startSimulator } from '../src/sim/index.js';
import { loadLoginKey } from '../src/ssh/key-pair.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import { TaskFleet, taskSpec } from './task-fleet.js';

export interface SshTasksPlan {
  tasks: number;
  /** Runs whose output a `berth logs --follow` process prints (each prints ticks meanwhile). */
  followers: number;
  pollS: number;
  /** How long the ticks are measured before the go, ms. */
  tickMs: number;
  timeoutMs: number;
}

export interface SshTasksResult {
  plan: SshTasksPlan;
  succeeded: number;
  /** Wall ms from the go (each task ended within 1 s of it) to its instance's destroy, per succeeded task. */
  goToDestroyMs: number[];
  /** Wall ms from the go to the task's end recorded by the daemon (its `task.ended` event). */
  goToEndedMs: number[];
  /** Wall ms from the go to the instance's self-stop: the wrapper's wait for the `.ack`, then its stop call. */
  goToStopMs: number[];
  /** Calls to the logs endpoint (PUT request_logs) while the tasks ran and ended. */
  logCalls: number;
  /** Tasks whose follow fell back to the logs path (`task.ssh_fallback` events). */
  fallbacks: number;
  /** Per tick printed after the followers were up: wall ms from the task's `date` to the CLI's stdout. */
  lineLagMs: number[];
  runAgain: number;
  billingAfter: number;
  /**
   * Event-loop utilisation of this process, which hosts the simulator and every instance's sshd,
   * from the go to the last run's end: near 1, the one simulator host is what the ends wait for.
   */
  simBusy: number;
}

/** A `berth logs RUN --follow` process: every `tick <ms>` line timed as it reaches its stdout. */
function follower(home: string, runId: string, lags: Array<{ at: number; lag: number }>): ChildProcess {
  const proc = spawn(process.execPath, [packagePath('bin', 'berth.js'), 'logs', runId, '--follow', '--tail', '1'], {
    env: { ...process.env, BERTH_HOME: home },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let rest = '';
  proc.stdout!.setEncoding('utf8');
  proc.stdout!.on('data', (chunk: string) => {
    const now = Date.now();
    const lines = (rest + chunk).split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      const m = /^tick (\d+)$/.exec(line);
      if (!m) continue;
      lags.push({ at: Number(m[1]), lag: now - Number(m[1]) });
    }
  });
  return proc;
}

export async function runSshTasks(plan: SshTasksPlan): Promise<SshTasksResult> {
  const home = mkdtempSync(join(tmpdir(), 'berth-tasks-ssh-'));
  // berth's own key, made where the daemon finds it, and put on the account as a user would.
  const key = loadLoginKey({ home });
  const timeScale = 30;
  const sim = await startSimulator({
    config: {
      seed: 39,
      time_scale: timeScale,
      tick_ms: 20,
      catalog: { size: 2000 },
      onstart_exec: { enabled: true, timeout_s: Math.ceil(plan.timeoutMs / 1000) },
      // The real service's uploads take about a second (unused while SSH works; counted if not).
      logs: { upload_delay_s: timeScale },
      rate_limits: { enabled: true },
      account: { ssh_keys: [key.publicLine] },
      ssh_listeners: { enabled: true },
    },
  });
  // Tasks run unprivileged in the simulator: the go file is in a directory every user can reach.
  const goDir = mkdtempSync(join(searchableTmp(), 'berth-tasks-ssh-go-'));
  chmodSync(goDir, 0o755);
  const go = join(goDir, 'go');
  // Opened read-write by every task and never written: a read on it waits out its timeout.
  const nap = join(goDir, 'nap');
  execFileSync('mkfifo', [nap]);
  chmodSync(nap, 0o666);
  let daemon: DaemonHandle | undefined;
  const followers: ChildProcess[] = [];
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, {
      daemon: { listen: '127.0.0.1:0', max_active_runs: 1000 },
      polling: { interval_s: plan.pollS },
    });
    const d = daemon;
    const fleet = new TaskFleet(d, plan.timeoutMs);
    // The waits start no process: bash's `read -t` on a FIFO nobody writes is the sleep and its
    // EPOCHREALTIME the clock. A hundred loops of `sleep` and `date` were hundreds of forks a
    // second on the one host all the simulated instances share, which loaded it far more than berth.
    const run = (i: number) =>
      `exec bash -c 'exec 3<>${nap}; ` +
      (i < plan.followers
        ? `while [ ! -e ${go} ]; do t=\${EPOCHREALTIME/./}; echo "tick \${t:0:13}"; read -t 0.2 -u 3 x; done; echo "task ${i} done"'`
        : `while [ ! -e ${go} ]; do read -t 1 -u 3 x; done; echo "task ${i} done"'`);
    await fleet.submit(plan.tasks, (i) => taskSpec(i, run(i), plan.timeoutMs));
    const ids = fleet.ids;
    await fleet.allRunning();
    // Every follow attached (its logs read from the store, `stream` set) before the ticks count.
    for (;;) {
      // One at a time, and a reset connection is "not yet": a loaded machine drops kept-alive sockets.
      let attached = true;
      for (const id of ids) {
        const read = await d.api<{ stream: unknown }>('GET', `/v1/runs/${id}/logs?tail=1`).catch(() => undefined);
        if (!read?.body.stream) {
          attached = false;
          break;
        }
      }
      if (attached) break;
      fleet.checkTime('not every task was followed over SSH');
      await sleep(500);
    }
    const callsBefore = sim.stats().requests['PUT /api/v0/instances/request_logs/{id}/'] ?? 0;
    const lags: Array<{ at: number; lag: number }> = [];
    for (let i = 0; i < plan.followers; i++) followers.push(follower(home, ids[i]!, lags));
    // The followers' first reads print the ticks kept so far: only ticks printed after they are up count.
    await sleep(3_000);
    const from = Date.now();
    await sleep(plan.tickMs);
    writeFileSync(go, '');
    const goAt = Date.now();
    const busyFrom = performance.eventLoopUtilization();
    const views = await fleet.allEnded();
    const simBusy = performance.eventLoopUtilization(busyFrom).utilization;
    const logCalls = (sim.stats().requests['PUT /api/v0/instances/request_logs/{id}/'] ?? 0) - callsBefore;
    const succeeded = views.filter((v) => v.state === 'succeeded');
    const instances = new Set(succeeded.map((v) => v.attempts.at(-1)!.instance_id));
    const history = sim.history().filter((h) => instances.has(h.id));
    const events = await Promise.all(ids.map(async (id) => (await d.api<RunEvent[]>('GET', `/v1/runs/${id}/events`)).body));
    const windowed = lags.filter((l) => l.at >= from && l.at < goAt - 500);
    return {
      plan,
      succeeded: succeeded.length,
      goToDestroyMs: history.map((h) => h.destroyed_at!.wall_ms - goAt),
      goToStopMs: history.flatMap((h) => h.statuses.filter((s) => s.status === 'stopped').map((s) => s.at.wall_ms - goAt)),
      goToEndedMs: events.flatMap((es) => es.filter((e) => e.type === 'task.ended').map((e) => Date.parse(e.at) - goAt)),
      logCalls,
      fallbacks: events.flat().filter((e) => e.type === 'task.ssh_fallback').length,
      lineLagMs: windowed.map((l) => l.lag),
      runAgain: views.filter((v) => v.attempts.filter((a) => a.instance_id !== null).length > 1).length,
      billingAfter: sim.billingNow().length,
      simBusy,
    };
  } finally {
    for (const f of followers) f.kill('SIGKILL');
    await daemon?.stop();
    await sim.close();
    // BENCH_KEEP=DIR copies the daemon's log there, to read where the time went.
    if (process.env.BENCH_KEEP) cpSync(join(home, 'daemon.log'), join(process.env.BENCH_KEEP, 'tasks-ssh-daemon.log'));
    rmSync(home, { recursive: true, force: true });
    rmSync(goDir, { recursive: true, force: true });
  }
}

/** The temp dir, or /tmp when the temp dir is private (the simulator's tasks run as another user). */
function searchableTmp(): string {
  const dir = tmpdir();
  return (statSync(dir).mode & 0o001) !== 0 ? dir : '/tmp';
}
