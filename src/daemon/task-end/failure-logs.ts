// Failures that say why: when an attempt fails (exited, OCI error, unreachable, boot timeout, or a
// running instance lost), berth asks the service for the container's last log lines (logs.yaml:
// `PUT /api/v0/instances/request_logs/{id}` → `result_url`), fetches that URL, and keeps the last
// lines, at most 4 KB with every secret removed, with the attempt (`attempts[].logs`).
//
// The order with the destroy matters: a destroyed container has no log to upload. So the destroy
// actor calls `beforeDestroy`, which sends the request first and waits for its answer for at most
// REQUEST_WAIT_MS (one call; a failed or slow request only costs that bound), then lets the destroy
// go. Fetching the URL (the upload takes a while) happens afterwards, in the background, bounded by
// FETCH_WINDOW_MS: it never delays the destroy, and its failure only leaves the attempt without logs.
// The URL is read as task logs read theirs (./log-upload.ts): every answer but 200 (an upload not
// written yet answers 403) is "not yet" until the window ends.
import type { AttemptOutcome } from '../../../machines/run-rules.js';
import type { DestroyInput } from '../../../machines/run-types.js';
import type { MarketClient } from '../../client/types.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { LogSecrets, Scrubber } from './log-secrets.js';
import { pollUpload, type UploadReaderDeps } from './log-upload.js';

/** Outcomes whose container may say why: not a cancel or an expiry, nor a host gone offline (it cannot upload). */
const WANTS_LOGS: ReadonlySet<AttemptOutcome> = new Set(['exited', 'unreachable', 'boot_timeout', 'lost']);

/** Lines asked for; the kept tail is cut to MAX_TAIL_BYTES anyway. */
const TAIL_LINES = 200;
/** What is kept of a log: its last lines, at most this many UTF-8 bytes. */
export const MAX_TAIL_BYTES = 4096;
/** Longest the destroy waits for the service to answer the log request. */
export const REQUEST_WAIT_MS = 2_000;
/**
 * How long the upload may take to appear at result_url (docs/tasks.md states it: 30 s; the official
 * client waits about 9 s, users measured about 1 s).
 */
export const FETCH_WINDOW_MS = 30_000;
/** Instance ids remembered as asked for (a destroy may be retried for a long time): the most recent. */
const ASKED_KEPT = 10_000;

/** The one write the log readers make: an attempt's kept tail. */
interface LogTailSink {
  logTail(runId: string, n: number, text: string): void;
}

export interface FailureLogsDeps extends UploadReaderDeps {
  client: Pick<MarketClient, 'requestLogs'>;
  /** Where an attempt's kept log tail is written (the attempt journal, ../runs/attempt-journal.ts). */
  journal: LogTailSink;
  log: Logger;
  /** Every secret the log may show, scrubbed from it (./log-secrets.ts). */
  secrets: Pick<LogSecrets, 'scrubberFor'>;
}

function wantsLogs(outcome: AttemptOutcome | null): boolean {
  return outcome !== null && WANTS_LOGS.has(outcome);
}

export class FailureLogs {
  /** Instances whose logs were asked for already (a destroy is retried; the logs are asked once). */
  private readonly asked = new Set<number>();
  private readonly fetches = new Set<AbortController>();

  constructor(private readonly deps: FailureLogsDeps) {}

  /**
   * A run resumed while destroying `instanceId` (a restart or a take-over): its destroy goes first,
   * with no log asked for. A daemon killed over and over (every few seconds) would otherwise spend
   * each life's first REQUEST_WAIT_MS on the log and die before the destroy, while the instance bills
   * (the chaos test saw a destroy land 46 s late, past a run's budget). The log was asked for by the
   * daemon that decided the destroy, if it lived long enough; money comes before diagnostics.
   */
  forgo(instanceId: number): void {
    this.remember(instanceId);
  }

  private remember(instanceId: number): void {
    this.asked.add(instanceId);
    if (this.asked.size > ASKED_KEPT) this.asked.delete(this.asked.values().next().value!);
  }

  /**
   * Called by the destroy actor before every destroy: for a failed attempt, asks for the container's
   * log (once per instance), waits at most REQUEST_WAIT_MS for the answer, and fetches the upload in
   * the background. Never throws.
   */
  async beforeDestroy(input: DestroyInput, signal: AbortSignal): Promise<void> {
    const { instanceId } = input;
    if (this.asked.has(instanceId)) return;
    this.remember(instanceId);
    if (!wantsLogs(input.outcome)) return;
    // Taken now, while the run is live: the fetch may finish after the run has ended. A log that
    // could not be scrubbed (its run's secrets unreadable) is not asked for: the destroy goes on.
    let scrubber: Scrubber;
    try {
      scrubber = this.deps.secrets.scrubberFor(input.runId, input.n, instanceId);
    } catch (err) {
      this.deps.log.info(
        { runId: input.runId, attempt: input.n, instanceId, err: toRunError(err) },
        'no container log asked for: its secrets could not be read to scrub it',
      );
      return;
    }
    const bounded = new AbortController();
    const timer = this.deps.clock.setTimer(() => bounded.abort(), REQUEST_WAIT_MS);
    const onAbort = () => bounded.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let resultUrl: string;
    try {
      ({ resultUrl } = await this.deps.client.requestLogs(instanceId, { tail: TAIL_LINES }, { signal: bounded.signal }));
    } catch (err) {
      this.deps.log.info(
        { runId: input.runId, attempt: input.n, instanceId, err: toRunError(err) },
        `attempt #${input.n}: the logs of instance ${instanceId} could not be requested; destroying it without them`,
      );
      return;
    } finally {
      timer.cancel();
      signal.removeEventListener('abort', onAbort);
    }
    void this.fetchInBackground(input, resultUrl, scrubber);
  }

  /** Stops every background fetch (daemon shutdown). */
  close(): void {
    for (const c of this.fetches) c.abort();
    this.fetches.clear();
  }

  private async fetchInBackground(input: DestroyInput, url: string, scrubber: Scrubber): Promise<void> {
    const { runId, n, instanceId } = input;
    const stop = new AbortController();
    this.fetches.add(stop);
    const until = this.deps.clock.now() + FETCH_WINDOW_MS;
    try {
      const got = await pollUpload(this.deps, url, until, stop.signal);
      if (got === null) {
        this.deps.log.info(
          { runId, attempt: n, instanceId },
          `attempt #${n}: the log of instance ${instanceId} did not appear within ${FETCH_WINDOW_MS / 1000} s`,
        );
        return;
      }
      const { text } = got;
      if (text.trim() === '') {
        this.deps.log.info(
          { runId, attempt: n, instanceId },
          got.noContainer
            ? `attempt #${n}: instance ${instanceId} had no container to log (docker: No such container)`
            : `attempt #${n}: the log of instance ${instanceId} was empty`,
        );
        return;
      }
      const tail = lastBytes(scrubber.scrub(text), MAX_TAIL_BYTES);
      this.deps.journal.logTail(runId, n, tail);
      this.deps.log.info(
        { runId, attempt: n, instanceId, lines: tail === '' ? 0 : tail.split('\n').length },
        `attempt #${n}: kept the last lines of instance ${instanceId}'s log`,
      );
    } catch (err) {
      if (!stop.signal.aborted) {
        this.deps.log.warn(
          { runId, attempt: n, instanceId, err: toRunError(err) },
          `attempt #${n}: the log of instance ${instanceId} could not be kept`,
        );
      }
    } finally {
      this.fetches.delete(stop);
    }
  }
}

/** The first line of a kept log whose earlier lines were left out (`berth logs` says so, and drops it). */
export const CUT_LINE = '[berth: earlier lines left out]';

/**
 * What is kept of a task's log: its last lines within MAX_TAIL_BYTES, led by CUT_LINE when lines
 * were left out (here, or already when the upload was read: `cutBefore`).
 */
export function keptTail(text: string, cutBefore: boolean): string {
  const tail = lastBytes(text, MAX_TAIL_BYTES - CUT_LINE.length - 1);
  const whole = text.replace(/\r\n?/g, '\n').replace(/\n+$/, '');
  return cutBefore || tail.length < whole.length ? `${CUT_LINE}\n${tail}` : tail;
}

/** The last lines of `text` within `max` UTF-8 bytes (a longer last line keeps its end). Line ends normalised. */
export function lastBytes(text: string, max: number): string {
  const lines = text.replace(/\r\n?/g, '\n').replace(/\n+$/, '').split('\n');
  const kept: string[] = [];
  let size = 0;
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    const bytes = Buffer.byteLength(line, 'utf8') + (kept.length > 0 ? 1 : 0);
    if (size + bytes > max) {
      if (kept.length === 0) kept.push(endOf(line, max));
      break;
    }
    kept.push(line);
    size += bytes;
  }
  return kept.reverse().join('\n');
}

/** The end of `line` within `max` UTF-8 bytes, never splitting a character. */
function endOf(line: string, max: number): string {
  let out = '';
  let size = 0;
  for (const ch of [...line].reverse()) {
    const b = Buffer.byteLength(ch, 'utf8');
    if (size + b > max) break;
    out = ch + out;
    size += b;
  }
  return out;
}
