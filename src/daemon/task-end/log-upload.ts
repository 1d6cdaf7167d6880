// A requested log's upload, read as the official client reads it. `request_logs` answers a
// `result_url` ("The logs will be uploaded to S3 and can be retrieved from a generated URL",
// logs.yaml); vast-cli's `_poll_result_url` (`vastai/api/instances.py`) sleeps 0.3 s before each
// GET, makes up to 30 of them, and takes every status but 200 as "not written yet". Users measured it on
// live instances: a GET before the upload lands answers 403 AccessDenied (S3 XML: the object is
// key-less), then 200 about a second later (service-facts.md, "Added 2026-11-27"). So here, within a
// read's window, any answer but 200 (403, 404, a 5xx) and a GET that fails are "not yet": the poll
// backs off (FIRST_PAUSE_MS, doubling to MAX_PAUSE_MS) and gives up at the window's end, which the
// caller sets. Giving up says only that no log was read, never how a task ended.
//
// Before its container exists and after a destroy, a container's log reads docker's own error,
// `Error response from daemon: No such container: C.<id>` (observed; service-facts.md, same
// section). That line is never the task's output: it is taken out here (`noContainer` says it was
// there), so no reader keeps it or reads an end in it.
//
// The URL is another host's (S3 on the real service): it is fetched with a plain GET that carries no
// API key, no redirect is followed, and only its last MAX_FETCH_BYTES are kept (issue #29: a log's
// end is what matters, the task's end marker last of all; 200 lines of a chatty task pass 1 MiB).
import { request } from 'undici';
import type { Clock } from '../../clock.js';

/** The first wait, before the first GET: the official client's 0.3 s. */
const FIRST_PAUSE_MS = 300;
/** The longest wait between two GETs of one upload. */
const MAX_PAUSE_MS = 3_000;
const GET_TIMEOUT_MS = 5_000;
const MAX_FETCH_BYTES = 1024 * 1024;
/** docker's answer for a container that does not exist (now or any more), as the host uploads it. */
const NO_CONTAINER = /^Error response from daemon: No such container: \S*\s*$/;

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
  /** The upload said the container does not exist (docker's error, taken out of `text`). */
  noContainer?: boolean;
}

/** What reading an upload needs: the clock, and a GET without credentials (replaced in tests). */
export interface UploadReaderDeps {
  clock: Clock;
  fetchText?(url: string, signal: AbortSignal): Promise<FetchedText>;
}

/**
 * GETs a logs upload URL until it serves the text, or gives up at `until` (null): every answer but
 * 200 is "not written yet" (see the top of this file). Failure logs and task logs both read so.
 */
export async function pollUpload(deps: UploadReaderDeps, url: string, until: number, signal: AbortSignal): Promise<FetchedLog | null> {
  const get = deps.fetchText ?? fetchWithoutCredentials;
  let pause = FIRST_PAUSE_MS;
  while (deps.clock.now() + pause <= until) {
    await deps.clock.sleep(pause, signal);
    const got = await get(url, signal).catch(() => null);
    if (got?.status === 200) return readable(got);
    pause = Math.min(MAX_PAUSE_MS, pause * 2);
  }
  return null;
}

/** The served text as a log: a cut start's partial line dropped, docker's "No such container" taken out. */
function readable(got: FetchedText): FetchedLog {
  const text = got.cut ? withoutFirstLine(got.text) : got.text;
  const lines = text.split('\n');
  const kept = lines.filter((line) => !NO_CONTAINER.test(line));
  if (kept.length === lines.length) return { text, cut: got.cut === true };
  return { text: kept.join('\n'), cut: got.cut === true, noContainer: true };
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
