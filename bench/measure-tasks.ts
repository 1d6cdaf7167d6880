// Tasks that end (issue #19): N runs with a task, all running, whose tasks end together; per
// instance, the wall time from the container stopping itself (the wrapper's own stop, after it wrote
// the end marker) to berth's destroy reaching the simulator, read from the simulator's history. A real
// `berth daemon` process against the simulator, which runs each task as a local `sh` (onstart_exec).
// The tasks wait for a file that the bench creates once every run is running, so they end within a
// few hundred ms of each other. `documented`: the simulator's own rate limits (v1 list 1/s, destroy
// 3/s, logs 1/s) and berth's defaults; else both raised, so that berth's own path is what is timed.
// `noHttp` (issue #29): the tasks run with a PATH that has neither curl nor wget, as in a CUDA base
// image, so the wrapper cannot stop its instance and the end is found by berth's task probe; the end
// is then timed from the moment the bench told the tasks to end (each ends within 0.2 s of it).
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DeepPartial } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { startSimulator } from '../src/sim/index.js';
import { spawnDaemon, type DaemonHandle } from './measure-daemon.js';
import { TaskFleet, taskSpec } from './task-fleet.js';

export interface TasksPlan {
  tasks: number;
  documented: boolean;
  pollS: number;
  timeoutMs: number;
  /** The image has neither curl nor wget: the end is found by the task probe. */
  noHttp?: boolean;
  /** Wall seconds a log upload takes to appear at its URL (the real service's is about one); 0 by default. */
  uploadS?: number;
}

export interface TasksResult {
  plan: TasksPlan;
  succeeded: number;
  /** Wall ms from each task's own end (its instance's stop; with noHttp, the bench's go) to its destroy, for the tasks that succeeded. */
  stopToDestroyMs: number[];
  /** Runs whose task ran on more than one instance (a finished task judged lost and run again): must be none. */
  runAgain: number;
  /** Attempts that never got an instance (a create refused or of unknown outcome), by outcome: no task ran in them. */
  noInstance: Record<string, number>;
  /** Instances created in all (one per task when none was run again). */
  instances: number;
  /** Instances still billing once every run ended (must be none). */
  billingAfter: number;
}

const RAISED = { per_s: 50, burst: 50 };

function daemonConfig(plan: TasksPlan): DeepPartial<Config> {
  return {
    daemon: { listen: '127.0.0.1:0', max_active_runs: 1000 },
    polling: { interval_s: plan.pollS },
    ...(plan.documented
      ? {}
      : {
          rate_limits: {
            search: RAISED,
            create: RAISED,
            list: { per_s: 20, burst: 20 },
            destroy: RAISED,
            // Destroys that would wait go in bulk calls (#39): raised too, or a bulk call's 0.9/s would be timed.
            destroy_bulk: RAISED,
            other: RAISED,
          },
          // The probe spaces its reads by the `other` rate: raised to 50/s it would read 100 tasks'
          // logs 25 times a second, load that the real rate never allows. Its cost is its own row.
          runs: { task_probe_interval_s: 30 },
        }),
  };
}

export async function runTasks(plan: TasksPlan): Promise<TasksResult> {
  const home = mkdtempSync(join(tmpdir(), 'berth-tasks-'));
  const timeScale = 30;
  const sim = await startSimulator({
    config: {
      seed: 19,
      time_scale: timeScale,
      tick_ms: 20,
      catalog: { size: 2000 },
      onstart_exec: {
        enabled: true,
        timeout_s: Math.ceil(plan.timeoutMs / 1000),
        ...(plan.noHttp ? { no_http_client_images: ['.'] } : {}),
      },
      // The simulator counts the upload's delay in its own seconds.
      logs: { upload_delay_s: (plan.uploadS ?? 0) * timeScale },
      rate_limits: { enabled: plan.documented },
    },
  });
  // The tasks run as an unprivileged user (the simulator drops root): the file they wait for is in a
  // directory of its own that every user can read, not in the private home.
  const goDir = mkdtempSync(join(tmpdir(), 'berth-tasks-go-'));
  chmodSync(goDir, 0o755);
  const go = join(goDir, 'go');
  let daemon: DaemonHandle | undefined;
  try {
    daemon = await spawnDaemon(home, sim.url, sim.apiKey, daemonConfig(plan));
    const fleet = new TaskFleet(daemon, plan.timeoutMs);
    // One sleep at a time (not a busy loop): 100 of these on 2 cores must not be what is measured.
    await fleet.submit(plan.tasks, (i) => taskSpec(i, `while [ ! -e ${go} ]; do sleep 0.2; done; echo "task ${i} done"`, plan.timeoutMs));
    // Every task under way first, then all of them told to end at once.
    await fleet.allRunning();
    writeFileSync(go, '');
    const goAt = Date.now();
    const views = await fleet.allEnded();
    const succeededInstances = new Set(views.filter((v) => v.state === 'succeeded').map((v) => v.attempts.at(-1)!.instance_id));
    const stopToDestroyMs = sim
      .history()
      .filter((h) => succeededInstances.has(h.id))
      .map((h) => h.destroyed_at!.wall_ms - (plan.noHttp ? goAt : h.statuses.find((s) => s.status === 'stopped')!.at.wall_ms));
    return {
      plan,
      succeeded: succeededInstances.size,
      stopToDestroyMs,
      billingAfter: sim.billingNow().length,
      runAgain: views.filter((v) => v.attempts.filter((a) => a.instance_id !== null).length > 1).length,
      noInstance: views
        .flatMap((v) => v.attempts.filter((a) => a.instance_id === null))
        .reduce<Record<string, number>>((n, a) => ({ ...n, [a.outcome ?? 'open']: (n[a.outcome ?? 'open'] ?? 0) + 1 }), {}),
      instances: sim.history().length,
    };
  } finally {
    await daemon?.stop();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(goDir, { recursive: true, force: true });
  }
}
