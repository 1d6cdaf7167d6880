// The task probe (issue #29): the end of a task seen without anything from its image. The task
// wrapper stops its own instance when the task ends (src/job-spec/task-script.ts), which the lists
// show at once; but that needs curl or wget in the image and a way from the container to the
// service. Neither is needed here: every running task's log is read on a schedule of berth's own,
// through the logs endpoint berth already uses, and an end marker found there ends the task
// (TASK_END to its machine: the instance is destroyed, the run ends as its task did).
//
// Its own schedule (issue #37): one PeriodicLoop on the Clock, never a side effect of a query (fed
// by the poller's `waited()`, it stopped whenever a round swept the whole account in one page and
// skipped the targeted list). Each tick asks which tasks run (`tasks()`, a query on the runs) and
// starts at most one read: that of the most overdue task. Ticks are at least `gap` apart, gap = 1 /
// (PROBE_SHARE × r) with r this daemon's rate of the `other` group now (its share of the key's when
// several daemons share one, ../../client/limiter.ts setShare), so the probe starts at most
// PROBE_SHARE of r reads a second whatever the count of tasks or how long reads take; reads in
// flight are not capped otherwise (their upload waits cost no rate token). A task is due `interval`
// (`runs.task_probe_interval_s`, default two poll intervals) after its last read *ended*, and a task
// the probe has not read yet is due at once, so a slow read delays only its own task, and a task at
// the tail of the list is read as surely as the first. The reads' requests are `background` calls
// (../../client/limiter.ts): a failure log asked for before a destroy, or the end read of a task
// that stopped itself, never waits behind them.
//
// Bound: with N tasks running, interval I, gap g and reads that take at most R (the request's
// token and the upload), a task's end is seen within
//     I + (N + 1) × g + 2 × R
// without its self-stop: a read in flight when the task ends may have asked before the marker (it
// ends within R); the task is due I later (or, new to the probe, at its next tick, within max(I, g));
// a due task waits for its tick (g) and for at most N − 1 tasks due before it, one a tick, each
// then due again only after it (its read ends later); then its read takes R. This assumes the
// probe's background requests get their tokens: the rest of the `other` group (credit reads, price
// increases, end and failure log reads) leaves it PROBE_SHARE. Tested on the fake clock
// (test/unit/daemon/task-end/task-probe.test.ts: ten tasks, reads of 12 s, interval 0.4 s).
//
// Kept in memory: a restarted daemon reads every task again at once, then on the schedule above.
import type { TaskEndInput, TaskEndOutput } from '../../../machines/run-types.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';

/** Share of this daemon's `other` rate the probe's reads may take. */
export const PROBE_SHARE = 0.5;

export interface TaskProbeDeps {
  clock: Clock;
  log: Logger;
  /** The task runs whose instance runs their task now (a query, asked once a tick). */
  tasks(): TaskEndInput[];
  readEnd(input: TaskEndInput, signal: AbortSignal): Promise<TaskEndOutput>;
  /** The probe found attempt n's end marker. */
  ended(runId: string, n: number, end: { exitCode: number; onstart: boolean; workdir?: boolean }): void;
  /** How long after its last read ended a task is read again at least, ms. */
  intervalMs: number;
  /** This daemon's rate of the `other` group now, calls per second (its share of the key's when shared). */
  otherPerS(): number;
  /**
   * Whether the attempt's output is followed over SSH now (./task-follow.ts): then its log is not
   * read here, and a read in flight is abandoned; once the follow fails, it is read at the next tick.
   */
  followed?(t: TaskEndInput): boolean;
}

interface Schedule {
  input: TaskEndInput;
  /** When the task's log is due for a read (the clock's `now`). */
  dueAt: number;
}

/** The stated bound, ms: a task's end seen within this of it without its self-stop (see the header). */
export function probeBoundMs(p: { tasks: number; intervalMs: number; otherPerS: number; readMs: number }): number {
  return p.intervalMs + (p.tasks + 1) * gapMs(p.otherPerS) + 2 * p.readMs;
}

/** Least time between two reads the probe starts, ms: PROBE_SHARE of the rate. */
function gapMs(otherPerS: number): number {
  return 1000 / (PROBE_SHARE * otherPerS);
}

export class TaskProbe {
  private readonly schedules = new Map<string, Schedule>();
  private readonly inFlight = new Map<string, AbortController>();
  private readonly loop: PeriodicLoop;

  constructor(private readonly deps: TaskProbeDeps) {
    this.loop = new PeriodicLoop({
      clock: deps.clock,
      run: () => this.tick(),
      intervalMs: () => this.nextTickMs(),
      onError: (err) => deps.log.warn({ err: toRunError(err) }, 'a task probe round failed'),
    });
  }

  /** Starts the probe's own loop: its first tick at once. */
  start(): void {
    this.loop.start(0);
  }

  /** The daemon stops: no read is started again, and every read in flight is abandoned. */
  stop(): void {
    this.loop.stop();
    for (const c of this.inFlight.values()) c.abort();
    this.inFlight.clear();
    this.schedules.clear();
  }

  /** One tick: the running tasks learnt, then the most overdue one's read started. */
  private tick(): void {
    const now = this.deps.clock.now();
    const live = new Set<string>();
    for (const t of this.deps.tasks()) {
      if (this.deps.followed?.(t)) continue;
      const key = keyOf(t);
      live.add(key);
      const s = this.schedules.get(key);
      // A task new to the probe (or a new instance for it) is due at once.
      if (!s || s.input.instanceId !== t.instanceId) this.schedules.set(key, { input: t, dueAt: now });
    }
    for (const [key, c] of this.inFlight) {
      if (live.has(key)) continue;
      c.abort();
      this.inFlight.delete(key);
    }
    for (const key of this.schedules.keys()) if (!live.has(key)) this.schedules.delete(key);
    let next: [string, Schedule] | undefined;
    for (const entry of this.schedules) {
      const [key, s] = entry;
      if (s.dueAt > now || this.inFlight.has(key)) continue;
      if (!next || s.dueAt < next[1].dueAt) next = entry;
    }
    if (next) this.read(next[0], next[1]);
  }

  /** Ms to the next tick: one gap after a read started, else until the earliest due (at most the interval, to learn of new tasks). */
  private nextTickMs(): number {
    const now = this.deps.clock.now();
    let earliest = Number.POSITIVE_INFINITY;
    for (const [key, s] of this.schedules) if (!this.inFlight.has(key)) earliest = Math.min(earliest, s.dueAt);
    return Math.max(gapMs(this.deps.otherPerS()), Math.min(this.deps.intervalMs, earliest - now));
  }

  private read(key: string, s: Schedule): void {
    const t = s.input;
    const stop = new AbortController();
    this.inFlight.set(key, stop);
    this.deps.log.debug(
      { runId: t.runId, attempt: t.n, instanceId: t.instanceId },
      `attempt #${t.n}: the task probe reads the log of instance ${t.instanceId}`,
    );
    this.deps
      .readEnd(t, stop.signal)
      .then((end) => {
        if (stop.signal.aborted || end.exitCode === null) return;
        this.deps.log.info(
          { runId: t.runId, attempt: t.n, instanceId: t.instanceId, exitCode: end.exitCode },
          `attempt #${t.n}: the task probe read the end marker of instance ${t.instanceId} (exit ${end.exitCode})`,
        );
        this.deps.ended(t.runId, t.n, { exitCode: end.exitCode, onstart: end.onstart ?? false, ...(end.workdir ? { workdir: true } : {}) });
      })
      .catch((err: unknown) => {
        if (!stop.signal.aborted) this.deps.log.info({ runId: t.runId, err: toRunError(err) }, 'the task probe could not read a log');
      })
      .finally(() => {
        if (this.inFlight.get(key) !== stop) return;
        this.inFlight.delete(key);
        // Due again one interval after this read ended, not after it started: a slow read never
        // makes its task due before the tasks waiting behind it.
        s.dueAt = this.deps.clock.now() + this.deps.intervalMs;
      });
  }
}

function keyOf(t: TaskEndInput): string {
  return `${t.runId}:${t.n}`;
}
