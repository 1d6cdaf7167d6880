// The task probe (issue #29): the end of a task seen without anything from its image. The task
// wrapper stops its own instance when the task ends (src/job-spec/task-script.ts), which the lists
// show at once; but that needs curl or wget in the image and a way from the container to the
// service. Neither is needed here: every running task's log is read on a schedule of berth's own,
// through the logs endpoint berth already uses, and an end marker found there ends the task
// (TASK_END to its machine: the instance is destroyed, the run ends as its task did).
//
// Schedule: each task run's log is read every `intervalMs` (`runs.task_probe_interval_s`, default
// two poll intervals), spaced further when there are many tasks so that the probe takes at most
// PROBE_SHARE of the `other` rate group (log reads share it with credit reads and price increases):
// with N running tasks a task is read every max(intervalMs, N / (PROBE_SHARE × rate)) s. The bound
// on an end seen without the self-stop is that spacing plus one log read. The first read of a task
// comes within one spacing of the probe first seeing it, staggered so that tasks started together
// are not read in one burst. At most MAX_IN_FLIGHT reads at once.
//
// Driven by the poll rounds (./poll-router.ts hands it the running tasks every round): no timer of
// its own. Kept in memory: a restarted daemon starts every schedule afresh.
import type { TaskEndInput, TaskEndOutput } from '../../../machines/run-types.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';

/** Share of the `other` group's rate the probe may take. */
export const PROBE_SHARE = 0.5;
const MAX_IN_FLIGHT = 4;

export interface TaskProbeDeps {
  clock: Clock;
  log: Logger;
  readEnd(input: TaskEndInput, signal: AbortSignal): Promise<TaskEndOutput>;
  /** The probe found attempt n's end marker. */
  ended(runId: string, n: number, end: { exitCode: number; onstart: boolean }): void;
  /** How often each running task's log is read at least, ms. */
  intervalMs: number;
  /** The `other` rate group's calls per second (as configured; a daemon's share is applied by its limiter). */
  otherPerS: number;
}

interface Schedule {
  instanceId: number;
  dueAt: number;
}

export class TaskProbe {
  private readonly schedules = new Map<string, Schedule>();
  private readonly inFlight = new Map<string, AbortController>();

  constructor(private readonly deps: TaskProbeDeps) {}

  /** Seconds between two reads of one task's log with `count` tasks running: the bound's main part. */
  spacingMs(count: number): number {
    return Math.max(this.deps.intervalMs, (count / (PROBE_SHARE * this.deps.otherPerS)) * 1000);
  }

  /** A poll round: the task runs whose instance runs their task now. Starts the reads that are due. */
  round(tasks: TaskEndInput[]): void {
    const now = this.deps.clock.now();
    const spacing = this.spacingMs(tasks.length);
    const live = new Set<string>();
    tasks.forEach((t, i) => {
      const key = keyOf(t);
      live.add(key);
      const s = this.schedules.get(key);
      // A new task (or a new instance for it): its first read within one spacing, staggered by its
      // place so that tasks started together are not read in one burst.
      if (!s || s.instanceId !== t.instanceId) {
        this.schedules.set(key, { instanceId: t.instanceId, dueAt: now + (spacing * (i + 1)) / tasks.length });
      }
    });
    for (const [key, c] of this.inFlight) {
      if (live.has(key)) continue;
      c.abort();
      this.inFlight.delete(key);
    }
    for (const key of this.schedules.keys()) if (!live.has(key)) this.schedules.delete(key);
    for (const t of tasks) {
      if (this.inFlight.size >= MAX_IN_FLIGHT) break;
      const key = keyOf(t);
      const s = this.schedules.get(key)!;
      if (s.dueAt > now || this.inFlight.has(key)) continue;
      s.dueAt = now + spacing;
      this.read(key, t);
    }
  }

  /** The daemon stops: every read in flight is abandoned. */
  stop(): void {
    for (const c of this.inFlight.values()) c.abort();
    this.inFlight.clear();
    this.schedules.clear();
  }

  private read(key: string, t: TaskEndInput): void {
    const stop = new AbortController();
    this.inFlight.set(key, stop);
    this.deps
      .readEnd(t, stop.signal)
      .then((end) => {
        if (stop.signal.aborted || end.exitCode === null) return;
        this.deps.log.info(
          { runId: t.runId, attempt: t.n, instanceId: t.instanceId, exitCode: end.exitCode },
          `attempt #${t.n}: the task probe read the end marker of instance ${t.instanceId} (exit ${end.exitCode})`,
        );
        this.deps.ended(t.runId, t.n, { exitCode: end.exitCode, onstart: end.onstart ?? false });
      })
      .catch((err: unknown) => {
        if (!stop.signal.aborted) this.deps.log.info({ runId: t.runId, err: toRunError(err) }, 'the task probe could not read a log');
      })
      .finally(() => {
        if (this.inFlight.get(key) === stop) this.inFlight.delete(key);
      });
  }
}

function keyOf(t: TaskEndInput): string {
  return `${t.runId}:${t.n}`;
}
