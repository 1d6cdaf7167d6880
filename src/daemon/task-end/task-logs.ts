// A task's end, read from its container's log (issue #19). When a list shows a task's instance
// stopped or exited, or the task probe reads a running task's log (./task-probe.ts), or a limit is
// reached, the run machine asks here whether the log holds the end marker berth's task wrapper
// writes (src/job-spec/task-script.ts): one logs request (logs.yaml: `PUT
// /api/v0/instances/request_logs/{id}` → `result_url`), then GETs of that URL until the upload is
// there. The marker is the only evidence of a task's end: an outbid or a failed host stops an
// instance too, but leaves none.
//
// The last lines, scrubbed of every secret as failure logs are, are kept with the attempt
// (`attempts[].logs`), so `berth submit --wait` and `berth status` can show how the task ended.
//
// Waiting is not failing (issue #29): the request waits for its rate token however long the queue
// (many tasks ending at once share the `other` group's 0.9/s), and only the upload's wait after
// the service answered is bounded (UPLOAD_WINDOW_MS). A read that found no upload is tried again
// (REQUESTS in all) before its stop is judged as an outbid or a loss. Meanwhile a task that stopped
// itself bills only its disk. The exception is a read made at a run's limit while the instance may
// still bill its GPU (`withinMs`): it gives up in time, so the limit's destroy is not held back.
//
// Idempotent: a daemon killed while reading reads again once restarted (the instance is stopped,
// not destroyed, until the machine has recorded the end). Never throws but for an abort.
import type { TaskEndInput, TaskEndOutput } from '../../../machines/run-types.js';
import { toRunError } from '../../errors.js';
import { taskEndOf } from '../../job-spec/task-script.js';
import { keptTail, pollUpload, type FailureLogsDeps, type FetchedLog } from './failure-logs.js';

/** Lines asked for: the marker is the last line the wrapper writes, but a stop may log after it. */
const TAIL_LINES = 200;
/** How long an upload may take to appear once the service answered the request. */
const UPLOAD_WINDOW_MS = 60_000;
/** Requests made for one read before it counts as unreadable. */
const REQUESTS = 3;
const RETRY_PAUSE_MS = 5_000;

/** What reading a log needs: the same as for failure logs. */
export type TaskLogsDeps = FailureLogsDeps;

export class TaskLogs {
  constructor(private readonly deps: TaskLogsDeps) {}

  /** How attempt n's task ended by the end marker in its log; exitCode null when the log shows none. */
  async readEnd(input: TaskEndInput, signal: AbortSignal): Promise<TaskEndOutput> {
    if (input.withinMs === undefined) return this.readEndUnbounded(input, signal);
    // At a limit, with the GPU maybe billing: the read (its token's wait included) gives up in time.
    const bounded = new AbortController();
    const onAbort = () => bounded.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = this.deps.clock.setTimer(() => bounded.abort(), input.withinMs);
    try {
      return await this.readEndUnbounded(input, bounded.signal);
    } catch (err) {
      if (signal.aborted) throw err;
      this.deps.log.warn(
        { runId: input.runId, attempt: input.n, instanceId: input.instanceId },
        `attempt #${input.n}: the log of instance ${input.instanceId} was not read within ${input.withinMs / 1000} s of its run's limit; it goes without`,
      );
      return { exitCode: null, at: this.deps.clock.now() };
    } finally {
      timer.cancel();
      signal.removeEventListener('abort', onAbort);
    }
  }

  private async readEndUnbounded(input: TaskEndInput, signal: AbortSignal): Promise<TaskEndOutput> {
    const { runId, n, instanceId } = input;
    for (let i = 0; i < REQUESTS; i++) {
      if (i > 0) await this.deps.clock.sleep(RETRY_PAUSE_MS, signal);
      const got = await this.readOnce(input, signal, TAIL_LINES);
      if (got === null) continue;
      const end = taskEndOf(got.text, runId, n);
      // The tail kept is scrubbed; the marker is read from the text as served (a secret such as
      // an env value "0" would otherwise blot out the exit code).
      this.deps.journal.logTail(runId, n, keptTail(this.deps.secrets.scrubberFor(runId, n, instanceId).scrub(got.text), got.cut));
      return end
        ? { exitCode: end.exitCode, onstart: end.onstart, at: this.deps.clock.now() }
        : { exitCode: null, at: this.deps.clock.now() };
    }
    signal.throwIfAborted();
    this.deps.log.warn(
      { runId, attempt: n, instanceId },
      `attempt #${n}: the log of instance ${instanceId} could not be read (${REQUESTS} requests)`,
    );
    return { exitCode: null, at: this.deps.clock.now() };
  }

  /**
   * The last `tail` lines of the container's log, scrubbed of every secret (`berth logs`,
   * `GET /v1/runs/{id}/logs`), and whether its start was cut; null when the service could not give it.
   */
  async readLog(input: TaskEndInput, tail: number, signal: AbortSignal): Promise<FetchedLog | null> {
    const got = await this.readOnce(input, signal, tail);
    return got && { text: this.deps.secrets.scrubberFor(input.runId, input.n, input.instanceId).scrub(got.text), cut: got.cut };
  }

  /** One logs request (however long its rate token takes) and the GETs of its URL until the upload is there. */
  private async readOnce(input: TaskEndInput, signal: AbortSignal, tail: number): Promise<FetchedLog | null> {
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
    return pollUpload(this.deps, url, this.deps.clock.now() + UPLOAD_WINDOW_MS, signal);
  }
}
