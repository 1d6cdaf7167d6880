// A task's end, read from its container's log (issue #19). When a list shows a task's instance
// stopped or exited, the run machine asks here whether the log holds the end marker berth's task
// wrapper writes (src/job-spec/task-script.ts): one logs request (logs.yaml: `PUT
// /api/v0/instances/request_logs/{id}` → `result_url`), then GETs of that URL until the upload is
// there. The marker is the only evidence of a task's end: an outbid or a failed host stops an
// instance too, but leaves none.
//
// The last lines, scrubbed of every secret as failure logs are, are kept with the attempt
// (`attempts[].logs`), so `berth submit --wait` and `berth status` can show how the task ended.
//
// Idempotent: a daemon killed while reading reads again once restarted (the instance is stopped,
// not destroyed, until the machine has recorded the end). Never throws: a log that cannot be read
// answers "no marker" after READ_WINDOW_MS, and the stop is then judged as an outbid or a loss,
// which costs a restart of the task, never an instance left billing.
import type { TaskEndInput, TaskEndOutput } from '../../../machines/run-types.js';
import { toRunError } from '../../errors.js';
import { taskExitOf } from '../../job-spec/task-script.js';
import { lastBytes, pollUpload, MAX_TAIL_BYTES, type FailureLogsDeps } from './failure-logs.js';

/** Lines asked for: the marker is the last line the wrapper writes, but a stop may log after it. */
const TAIL_LINES = 200;
/** How long one read may take in all (requests and upload waits). */
const READ_WINDOW_MS = 60_000;
const FIRST_PAUSE_MS = 250;
const MAX_PAUSE_MS = 3_000;

/** What reading a log needs: the same as for failure logs. */
export type TaskLogsDeps = FailureLogsDeps;

export class TaskLogs {
  constructor(private readonly deps: TaskLogsDeps) {}

  /** The exit code in the end marker of attempt n's task, or null when its log shows none. */
  async readEnd(input: TaskEndInput, signal: AbortSignal): Promise<TaskEndOutput> {
    const { runId, n, instanceId } = input;
    const until = this.deps.clock.now() + READ_WINDOW_MS;
    let pause = FIRST_PAUSE_MS;
    while (!signal.aborted) {
      const text = await this.readOnce(input, until, signal);
      if (text !== null) {
        const exitCode = taskExitOf(text, runId, n);
        // The tail kept is scrubbed; the marker is read from the text as served (a secret such as
        // an env value "0" would otherwise blot out the exit code).
        this.deps.journal.logTail(
          runId,
          n,
          lastBytes(this.deps.secrets.scrubberFor(input.runId, input.n, input.instanceId).scrub(text), MAX_TAIL_BYTES),
        );
        return { exitCode };
      }
      if (this.deps.clock.now() + pause > until) break;
      await this.deps.clock.sleep(pause, signal);
      pause = Math.min(MAX_PAUSE_MS, pause * 2);
    }
    this.deps.log.warn(
      { runId, attempt: n, instanceId },
      `attempt #${n}: the log of stopped instance ${instanceId} could not be read; its stop counts as an outbid or a loss`,
    );
    return { exitCode: null };
  }

  /**
   * The last `tail` lines of the container's log, scrubbed of every secret (`berth logs`,
   * `GET /v1/runs/{id}/logs`); null when the service could not give it within the read window.
   */
  async readLog(input: TaskEndInput, tail: number, signal: AbortSignal): Promise<string | null> {
    const text = await this.readOnce(input, this.deps.clock.now() + READ_WINDOW_MS, signal, tail);
    return text === null ? null : this.deps.secrets.scrubberFor(input.runId, input.n, input.instanceId).scrub(text);
  }

  /** One logs request and the GETs of its URL until the upload is there; null when it never came. */
  private async readOnce(input: TaskEndInput, until: number, signal: AbortSignal, tail = TAIL_LINES): Promise<string | null> {
    let url: string;
    try {
      ({ resultUrl: url } = await this.deps.client.requestLogs(input.instanceId, { tail }, { signal }));
    } catch (err) {
      if (signal.aborted) throw err;
      this.deps.log.info(
        { runId: input.runId, attempt: input.n, instanceId: input.instanceId, err: toRunError(err) },
        `attempt #${input.n}: the logs of instance ${input.instanceId} could not be requested`,
      );
      return null;
    }
    return pollUpload(this.deps, url, until, signal);
  }
}
