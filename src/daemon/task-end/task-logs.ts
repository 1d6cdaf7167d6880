// A task's end, read from its container's log (issue #19). When a list shows a task's instance
// stopped or exited, or the task probe reads a running task's log (./task-probe.ts), or a limit is
// reached, the run machine asks here whether the log holds the end marker berth's task wrapper
// writes (src/job-spec/task-script.ts). The marker is the only evidence of a task's end: an outbid
// or a failed host stops an instance too, but leaves none.
//
// The marker is asked for by itself (issue #37): logs.yaml's `request_logs` takes `filter`, "Grep
// filter to apply to log entries", applied on the host, so the answer is the marker lines alone
// however much else the container logged after it (an onstart's service started with `&`, sshd's
// lines). The pattern is MARKER_PREFIX, letters and a dash only: the same in every grep dialect and
// with no character a shell on the host could split. `tail` goes with it, large (MARKER_TAIL_LINES),
// in case the host cuts the log before it greps: logs.yaml states no maximum. Once the marker is
// found the last TAIL_LINES lines are asked for too and kept with the attempt (`attempts[].logs`),
// scrubbed of every secret as failure logs are, so `berth submit --wait` and `berth status` show
// how the task ended. A read that finds no marker keeps nothing (a failed attempt's destroy keeps
// its log: ./failure-logs.ts).
//
// Each request's upload is read as the official client reads it (./log-upload.ts): any answer but
// 200 is "not yet" for UPLOAD_WINDOW_MS. Waiting is not failing (issue #29): the request waits for
// its rate token however long the queue (many tasks ending at once share the `other` group's
// 0.9/s). How long a read goes on when no upload comes depends on what may bill meanwhile:
//   - an instance its own task stopped (`stoppedByTask`: listed with intended_status stopped, which
//     berth never sets) bills only its disk: its log is read again and again, backing off, for up
//     to STOPPED_READ_MS; if none comes, the read says so (`unread`), and the run ends with the
//     task's exit code unknown rather than running the task again (the machine decides);
//   - any other read (the probe's, a stop by the market or a host) makes REQUESTS requests;
//   - a read made at a run's limit while the instance may still bill its GPU (`withinMs`) gives up
//     in time, so the limit's destroy is not held back.
//
// Idempotent: a daemon killed while reading reads again once restarted (the instance is stopped,
// not destroyed, until the machine has recorded the end). Never throws but for an abort.
import type { TaskEndInput, TaskEndOutput } from '../../../machines/run-types.js';
import { toRunError } from '../../errors.js';
import { MARKER_PREFIX, taskEndOf } from '../../job-spec/task-script.js';
import { keptTail, type FailureLogsDeps } from './failure-logs.js';
import { pollUpload, type FetchedLog } from './log-upload.js';

/** Lines kept as the task's output: the marker is the last line the wrapper writes, but a stop may log after it. */
const TAIL_LINES = 200;
/** Lines the host greps for the marker, should it cut the log before its grep (no documented maximum). */
const MARKER_TAIL_LINES = 100_000;
/** How long one request's upload may take to appear once the service answered it. */
const UPLOAD_WINDOW_MS = 30_000;
/** Requests made for one read of an instance that may bill more than its disk, before it counts as unreadable. */
const REQUESTS = 3;
const RETRY_PAUSE_MS = 5_000;
/** How long the log of an instance its own task stopped (disk only) is read before its exit code is unknown (docs/tasks.md). */
const STOPPED_READ_MS = 15 * 60_000;
/** The longest pause between two requests of such a read. */
const STOPPED_PAUSE_MAX_MS = 60_000;

/** What reading a log needs: the same as for failure logs. */
export type TaskLogsDeps = FailureLogsDeps;

export class TaskLogs {
  constructor(private readonly deps: TaskLogsDeps) {}

  /**
   * How attempt n's task ended by the end marker in its log; exitCode null when the log shows none,
   * and `unread` too when no log could be read at all.
   */
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
    const patient = input.stoppedByTask === true;
    const giveUpAt = this.deps.clock.now() + STOPPED_READ_MS;
    let requests = 0;
    for (;;) {
      if (requests > 0) {
        const pause = patient ? Math.min(STOPPED_PAUSE_MAX_MS, RETRY_PAUSE_MS * 2 ** (requests - 1)) : RETRY_PAUSE_MS;
        if (patient ? this.deps.clock.now() + pause >= giveUpAt : requests >= REQUESTS) break;
        await this.deps.clock.sleep(pause, signal);
      }
      requests++;
      // Stopped by its task, its log almost surely ends with the marker: its output is asked for
      // at once beside it, so the end is recorded one upload sooner.
      const [got, tail] = await Promise.all([
        this.readOnce(input, signal, { tail: MARKER_TAIL_LINES, filter: MARKER_PREFIX }),
        patient ? this.readOnce(input, signal, { tail: TAIL_LINES }) : undefined,
      ]);
      const marker = hasLog(got) ? got : null;
      const end = (marker && taskEndOf(marker.text, runId, n)) ?? (hasLog(tail) ? taskEndOf(tail.text, runId, n) : null);
      // No upload, or no container to log: nothing was read.
      if (!end && !marker) continue;
      if (!end) return { exitCode: null, at: this.deps.clock.now() };
      const output = tail === undefined ? await this.readOnce(input, signal, { tail: TAIL_LINES }) : tail;
      this.keepTail(input, hasLog(output) && output.text.trim() !== '' ? output : (marker ?? output!));
      return { exitCode: end.exitCode, onstart: end.onstart, ...(end.workdir ? { workdir: true } : {}), at: this.deps.clock.now() };
    }
    signal.throwIfAborted();
    this.deps.log.warn(
      { runId, attempt: n, instanceId },
      patient
        ? `attempt #${n}: the log of instance ${instanceId}, stopped by its task, could not be read within ${STOPPED_READ_MS / 60_000} min (${requests} requests)`
        : `attempt #${n}: the log of instance ${instanceId} could not be read (${requests} requests)`,
    );
    return { exitCode: null, unread: true, at: this.deps.clock.now() };
  }

  /**
   * Keeps the task's last lines with the attempt, scrubbed (the marker's own lines when the output
   * could not be read). The marker was read from the text as served (a secret such as an env value
   * "0" would otherwise blot out the exit code).
   */
  private keepTail(input: TaskEndInput, got: FetchedLog): void {
    const scrubber = this.deps.secrets.scrubberFor(input.runId, input.n, input.instanceId);
    this.deps.journal.logTail(input.runId, input.n, keptTail(scrubber.scrub(got.text), got.cut));
  }

  /**
   * The last `tail` lines of the container's log, scrubbed of every secret (`berth logs`,
   * `GET /v1/runs/{id}/logs`), and whether its start was cut; null when the service could not give it.
   */
  async readLog(input: TaskEndInput, tail: number, signal: AbortSignal): Promise<FetchedLog | null> {
    const got = await this.readOnce(input, signal, { tail });
    return got && { text: this.deps.secrets.scrubberFor(input.runId, input.n, input.instanceId).scrub(got.text), cut: got.cut };
  }

  /** One logs request (however long its rate token takes) and the GETs of its URL until the upload is there. */
  private async readOnce(input: TaskEndInput, signal: AbortSignal, request: { tail: number; filter?: string }): Promise<FetchedLog | null> {
    let url: string;
    try {
      ({ resultUrl: url } = await this.deps.client.requestLogs(input.instanceId, request, { signal }));
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

/** A log was read: an upload came, and it was not docker's "No such container". */
function hasLog(got: FetchedLog | null | undefined): got is FetchedLog {
  return got != null && got.noContainer !== true;
}
