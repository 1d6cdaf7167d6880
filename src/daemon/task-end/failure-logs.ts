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
//
// The URL is another host's (S3 on the real service): it is fetched with a plain GET that carries no
// API key, no redirect is followed, and only its last MAX_FETCH_BYTES are kept (issue #29: a log's
// end is what matters, the task's end marker last of all; 200 lines of a chatty task pass 1 MiB).
import { request } from 'undici';
import type { AttemptOutcome } from '../../../machines/run-rules.js';
import type { DestroyInput } from '../../../machines/run-types.js';
import type { MarketClient } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { LogSecrets, Scrubber } from './log-secrets.js';

/** Outcomes whose container may say why: not a cancel or an expiry, nor a host gone offline (it cannot upload). */
const WANTS_LOGS: ReadonlySet<AttemptOutcome> = new Set(['exited', 'unreachable', 'boot_timeout', 'lost']);

/** Lines asked for; the kept tail is cut to MAX_TAIL_BYTES anyway. */
const TAIL_LINES = 200;
/** What is kept of a log: its last lines, at most this many UTF-8 bytes. */
export const MAX_TAIL_BYTES = 4096;
/** Longest the destroy waits for the service to answer the log request. */
export const REQUEST_WAIT_MS = 2_000;
/** How long the upload may take to appear at result_url. */
export const FETCH_WINDOW_MS = 30_000;
const FIRST_PAUSE_MS = 250;
const MAX_PAUSE_MS = 3_000;
const GET_TIMEOUT_MS = 5_000;
const MAX_FETCH_BYTES = 1024 * 1024;
/** Instance ids remembered as asked for (a destroy may be retried for a long time): the most recent. */
const ASKED_KEPT = 10_000;

export interface FetchedText {
  status: number;
  text: string;
  /** Bytes were dropped from the start of the body (it was longer than what is kept). */
  cut?: boolean;
}

/** A log as read from its upload: its last bytes, and whether earlier ones were dropped. */
export interface FetchedLog {
  text: string;
  cut: boolean;
}

/** The one write the log readers make: an attempt's kept tail. */
interface LogTailSink {
  logTail(runId: string, n: number, text: string): void;
}

export interface FailureLogsDeps {
  client: Pick<MarketClient, 'requestLogs'>;
  clock: Clock;
  /** Where an attempt's kept log tail is written (the attempt journal, ../runs/attempt-journal.ts). */
  journal: LogTailSink;
  log: Logger;
  /** Every secret the log may show, scrubbed from it (./log-secrets.ts). */
  secrets: Pick<LogSecrets, 'scrubberFor'>;
  /** GET without credentials (replaced in tests). */
  fetchText?(url: string, signal: AbortSignal): Promise<FetchedText>;
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
   * Called by the destroy actor before every destroy: for a failed attempt, asks for the container's
   * log (once per instance), waits at most REQUEST_WAIT_MS for the answer, and fetches the upload in
   * the background. Never throws.
   */
  async beforeDestroy(input: DestroyInput, signal: AbortSignal): Promise<void> {
    const { instanceId } = input;
    if (this.asked.has(instanceId)) return;
    this.asked.add(instanceId);
    if (this.asked.size > ASKED_KEPT) this.asked.delete(this.asked.values().next().value!);
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
      const text = (await this.poll(url, until, stop.signal))?.text ?? null;
      if (text === null) {
        this.deps.log.info(
          { runId, attempt: n, instanceId },
          `attempt #${n}: the log of instance ${instanceId} did not appear within ${FETCH_WINDOW_MS / 1000} s`,
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

  private poll(url: string, until: number, signal: AbortSignal): Promise<FetchedLog | null> {
    return pollUpload(this.deps, url, until, signal);
  }
}

/**
 * GETs a logs upload URL until it serves the text (404 while the upload is on its way), or gives up
 * at `until`; 403 (the URL expired or is refused) ends it at once. Failure logs and task logs both read so.
 */
export async function pollUpload(
  deps: Pick<FailureLogsDeps, 'clock' | 'fetchText'>,
  url: string,
  until: number,
  signal: AbortSignal,
): Promise<FetchedLog | null> {
  const get = deps.fetchText ?? fetchWithoutCredentials;
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    const got = await get(url, signal).catch(() => null);
    if (got?.status === 200) return got.cut ? { text: withoutFirstLine(got.text), cut: true } : { text: got.text, cut: false };
    if (got?.status === 403 || deps.clock.now() + pause > until) return null;
    await deps.clock.sleep(pause, signal);
    pause = Math.min(MAX_PAUSE_MS, pause * 2);
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

/** A text cut at its start: its first line is partial, so it goes (unless it is the only one). */
function withoutFirstLine(text: string): string {
  const nl = text.indexOf('\n');
  return nl === -1 || nl === text.length - 1 ? text : text.slice(nl + 1);
}

/**
 * A plain GET: no Authorization header, no redirects, a time limit, and the last MAX_FETCH_BYTES
 * of the body kept (read to its end, so memory stays bounded whatever the URL serves).
 */
export async function fetchWithoutCredentials(url: string, signal: AbortSignal, maxBytes = MAX_FETCH_BYTES): Promise<FetchedText> {
  const parsed = new URL(url);
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error(`not an http(s) URL: ${parsed.protocol}`);
  const res = await request(parsed, { method: 'GET', signal, headersTimeout: GET_TIMEOUT_MS, bodyTimeout: GET_TIMEOUT_MS });
  const tail = new TailBytes(maxBytes);
  for await (const chunk of res.body) tail.add(chunk as Buffer);
  return { status: res.statusCode, text: tail.text(), cut: tail.cut };
}

/** The last `max` bytes of a stream, in chunks, never more than about twice `max` held. */
class TailBytes {
  private chunks: Buffer[] = [];
  private size = 0;
  cut = false;

  constructor(private readonly max: number) {}

  add(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > 2 * this.max) this.trim();
  }

  text(): string {
    this.trim();
    // A cut inside a UTF-8 character leaves its continuation bytes: decoded as U+FFFD and dropped
    // with the partial first line by the reader.
    return Buffer.concat(this.chunks).toString('utf8');
  }

  private trim(): void {
    if (this.size <= this.max) return;
    const all = Buffer.concat(this.chunks);
    this.chunks = [all.subarray(all.length - this.max)];
    this.size = this.max;
    this.cut = true;
  }
}
