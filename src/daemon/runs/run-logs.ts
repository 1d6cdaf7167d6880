// A run's container log as `berth logs` and GET /v1/runs/{id}/logs show it: live, through the
// service's logs endpoint, while the run holds an instance; else the last lines kept with its latest
// attempt that has some. Scrubbed of every secret either way (the task logs and the journal scrub).
import type { Store } from '../../store/index.js';
import { CUT_LINE } from '../task-end/failure-logs.js';
import type { TaskLogs } from '../task-end/task-logs.js';

export interface RunLog {
  instance_id: number | null;
  source: 'live' | 'kept';
  text: string;
  /** Earlier lines were left out: the log's end was longer than what is read or kept. */
  cut: boolean;
}

export interface RunLogsDeps {
  store: Store;
  taskLogs: Pick<TaskLogs, 'readLog'>;
  /** The instance a live run holds now (the registry's word), or null. */
  instanceOf(runId: string): number | null;
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
    if (current) {
      const got = await this.deps.taskLogs.readLog({ runId, n: current.n, instanceId: instanceId! }, tail, signal);
      if (got !== null) return { instance_id: instanceId, source: 'live', text: got.text, cut: got.cut };
    }
    const kept = [...attempts].reverse().find((a) => a.log_tail);
    let all = kept?.log_tail ? kept.log_tail.split('\n') : [];
    // A kept task log says when its earlier lines were left out (failure-logs.ts keptTail).
    const keptCut = all[0] === CUT_LINE;
    if (keptCut) all = all.slice(1);
    return { instance_id: kept?.instance_id ?? null, source: 'kept', text: all.slice(-tail).join('\n'), cut: keptCut || all.length > tail };
  }
}
