// A run's container log as `berth logs` and GET /v1/runs/{id}/logs show it: live, through the
// service's logs endpoint, while the run holds an instance (from the store, kept as it came, while
// its task is followed over SSH or once its follow read the task's end: ../task-end/task-follow.ts); else the last lines kept with its latest
// attempt that has some. Scrubbed of every secret either way (the task logs and the journal scrub).
import { taskEndOf } from '../../job-spec/task-script.js';
import type { AttemptRow, Store } from '../../store/index.js';
import { CUT_LINE } from '../task-end/failure-logs.js';
import type { TaskLogs } from '../task-end/task-logs.js';

export interface RunLog {
  instance_id: number | null;
  source: 'live' | 'kept';
  text: string;
  /** Earlier lines were left out: the log's end was longer than what is read or kept. */
  cut: boolean;
  /** Streamed over SSH by this daemon now: the attempt, and the out-file's byte after `text` (live output goes on from it). */
  stream: { n: number; offset: number } | null;
}

export interface RunLogsDeps {
  store: Store;
  taskLogs: Pick<TaskLogs, 'readLog'>;
  /** The instance a live run holds now (the registry's word), or null. */
  instanceOf(runId: string): number | null;
  /** Whether the attempt's output is streamed over SSH now (../task-end/task-follow.ts): live output goes on from what is kept. */
  streaming?(t: { runId: string; n: number }): boolean;
  /**
   * Whether berth is logged in to follow the attempt (or attaching for the first time), streaming
   * or not: between the end its watch saw and the last bytes its drain reads, the store is read,
   * not the service (a hundred tasks ending together were a logs-endpoint call each for every
   * `berth logs --follow` that asked in that window).
   */
  followed?(t: { runId: string; n: number }): boolean;
}

export class RunLogs {
  constructor(private readonly deps: RunLogsDeps) {}

  /** The last `tail` lines of a run's log; null for an unknown run. */
  async logsOf(runId: string, tail: number, signal: AbortSignal): Promise<RunLog | null> {
    const { store } = this.deps;
    if (!store.runs.get(runId)) return null;
    const attempts = store.attempts.forRun(runId);
    const instanceId = this.deps.instanceOf(runId);
    const current = instanceId === null ? undefined : attempts.find((a) => a.instance_id === instanceId);
    // Followed over SSH: its lines are kept as they come, and no logs-endpoint call is made for it.
    // The row's tail and offset are one write (task-follow.ts `save`): the live output a watcher
    // gets goes on from exactly that byte.
    if (current && this.deps.streaming?.({ runId, n: current.n }))
      return { ...tailOf(current, tail, 'live'), stream: { n: current.n, offset: current.follow_offset ?? 0 } };
    if (current && this.deps.followed?.({ runId, n: current.n })) return { ...tailOf(current, tail, 'live'), stream: null };
    // Its follow read the task's end (the marker kept after the output): all of it is kept, and a
    // read of the service (while the instance is destroyed) would add only sshd's lines.
    if (current && current.follow_offset !== null && current.log_tail && taskEndOf(current.log_tail, runId, current.n))
      return { ...tailOf(current, tail, 'kept'), stream: null };
    if (current) {
      const got = await this.deps.taskLogs.readLog({ runId, n: current.n, instanceId: instanceId! }, tail, signal);
      if (got !== null) return { instance_id: instanceId, source: 'live', text: got.text, cut: got.cut, stream: null };
    }
    return tailOf(
      [...attempts].reverse().find((a) => a.log_tail),
      tail,
      'kept',
    );
  }
}

/** The last `tail` lines kept with an attempt. */
function tailOf(kept: AttemptRow | undefined, tail: number, source: RunLog['source']): RunLog {
  let all = kept?.log_tail ? kept.log_tail.split('\n') : [];
  // A kept task log says when its earlier lines were left out (failure-logs.ts keptTail).
  const keptCut = all[0] === CUT_LINE;
  if (keptCut) all = all.slice(1);
  return {
    instance_id: kept?.instance_id ?? null,
    source,
    text: all.slice(-tail).join('\n'),
    cut: keptCut || all.length > tail,
    stream: null,
  };
}
