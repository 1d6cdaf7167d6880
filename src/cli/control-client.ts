// The CLI's client for the daemon's control API. It finds the daemon through
// $BERTH_HOME/daemon.json and authenticates with $BERTH_HOME/control.token, so the CLI and the
// daemon only need to agree on BERTH_HOME. Before it sends the token, it makes whatever listens at
// that address prove that it holds the token (the HMAC of a fresh nonce, see
// src/wire/control-proof.ts): a program squatting the port of a stopped daemon never gets it.
// Every failure becomes a typed error: "cannot reach the daemon" (exit 3 with a hint) or a
// ControlApiError carrying the API's error kind.
//
// It speaks HTTP with node:http, not undici: `berth status` must start in a few tens of ms.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { berthHome } from '../config/home.js';
import { readControlToken } from '../config/control-token.js';
import { proofMatches } from '../wire/control-proof.js';
import { BerthError, type SpecIssue } from '../errors.js';
import type {
  AccountChecks,
  Blob,
  CostsReport,
  OffersReport,
  Notification,
  Run,
  RunEvent,
  RunLogs,
  SignInCode,
  StreamEvent,
  StreamOutput,
} from '../wire/control-api.js';
import { SseParser } from './sse.js';

const START_HINT = 'start it with `berth daemon`';

/** How long the daemon may take to answer a call (it never should take long). */
const CALL_TIMEOUT_MS = 30_000;

interface HttpAnswer {
  statusCode: number;
  text: string;
}

/** One HTTP exchange; rejects with the socket's error (its `code`: ECONNREFUSED...) or a timeout. */
function exchange(url: URL, method: string, headers: Record<string, string>, body?: string | Buffer): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.setTimeout(CALL_TIMEOUT_MS, () =>
      req.destroy(Object.assign(new Error(`no answer within ${CALL_TIMEOUT_MS / 1000} s`), { code: 'ETIMEDOUT' })),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** An error answer of the control API: `{"error": {"kind", "message", "issues"?}}`. */
export class ControlApiError extends BerthError {
  readonly status: number;
  readonly kind: string;
  readonly issues: SpecIssue[];
  constructor(status: number, kind: string, message: string, issues: SpecIssue[] = []) {
    // A daemon that is shutting down (503) is not the request's fault: try again once it is back.
    super(status === 503 && kind === 'daemon_stopping' ? 'daemon_stopping' : 'control_rejected', message);
    this.status = status;
    this.kind = kind;
    this.issues = issues;
  }
}

export interface DaemonAddress {
  url: string;
  token: string;
}

/** Reads where the daemon listens and its token; throws `daemon_unreachable` when it never started here. */
export function readDaemonAddress(home: string): DaemonAddress {
  const infoPath = join(home, 'daemon.json');
  let url: unknown;
  try {
    url = (JSON.parse(readFileSync(infoPath, 'utf8')) as { url?: unknown }).url;
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? `no ${infoPath}` : `${infoPath} is unreadable`;
    throw new BerthError('daemon_unreachable', `The berth daemon is not running for ${home} (${why}): ${START_HINT}.`, { cause: err });
  }
  if (typeof url !== 'string') {
    throw new BerthError('daemon_unreachable', `${infoPath} holds no daemon address: ${START_HINT}.`);
  }
  const token = readControlToken(home);
  if (!token) {
    throw new BerthError('daemon_unreachable', `Cannot read a control token in ${home}: ${START_HINT}, or run as the user who did.`);
  }
  return { url, token };
}

export interface ControlClientOptions {
  /**
   * How long a call answered `503 store_unavailable` (the daemon is up, its store is not: a
   * Postgres restart, a locked berth.db) is tried again before its error is thrown, ms; 0 (the
   * default) throws at once. Only for calls that may be repeated: reads, a cancel.
   */
  storeWaitMs?: number;
  /** Told, with the daemon's message, each time a call waits for the store. */
  onStoreWait?: (message: string) => void;
}

/** The first wait after a store_unavailable, doubled each time up to the last, ms. */
const STORE_RETRY_MS = { first: 250, max: 2000 };

const isStoreUnavailable = (err: unknown): err is ControlApiError =>
  err instanceof ControlApiError && err.status === 503 && err.kind === 'store_unavailable';

export class ControlClient {
  private verified: Promise<void> | undefined;

  constructor(
    private readonly address: DaemonAddress,
    private readonly options: ControlClientOptions = {},
  ) {}

  /** Makes the daemon prove it holds the token, once, before the token is ever sent. */
  verify(): Promise<void> {
    return (this.verified ??= this.challenge());
  }

  private async challenge(): Promise<void> {
    const { url } = this.address;
    const nonce = randomBytes(16).toString('hex');
    let res;
    try {
      res = await exchange(new URL(`/v1/proof?nonce=${nonce}`, url), 'GET', {});
    } catch (err) {
      this.verified = undefined;
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new BerthError('daemon_unreachable', `The berth daemon at ${url} is not reachable (${why}): ${START_HINT}.`, { cause: err });
    }
    const body = parseJson(res.text) as { proof?: unknown } | undefined;
    if (res.statusCode !== 200 || !proofMatches(this.address.token, new URL(url).host, nonce, body?.proof)) {
      throw new BerthError(
        'daemon_unreachable',
        `Something answers at ${url}, but it is not this BERTH_HOME's berth daemon (it could not prove it holds the control token), so the token was not sent: daemon.json is probably stale; ${START_HINT}.`,
      );
    }
  }

  /** Switches the daemon to a new control token (it writes control.token itself). */
  rotateToken(): Promise<{ rotated: boolean }> {
    return this.call('POST', '/v1/token/rotate');
  }

  /** A one-time sign-in URL of the web dashboard (`berth ui`). */
  signInCode(): Promise<SignInCode> {
    return this.call<SignInCode>('POST', '/v1/ui/codes');
  }

  /** Lets a run held after a restore go on. */
  resume(id: string): Promise<Run> {
    return this.call<Run>('POST', `/v1/runs/${encodeURIComponent(id)}/resume`);
  }

  /** Keeps `data` in the daemon's store under its sha256 (a task's packed workdir): the raw bytes, not JSON. */
  putBlob(sha256: string, data: Buffer): Promise<Blob> {
    return this.call<Blob>('POST', `/v1/blobs/${sha256}`, data, { 'content-type': 'application/octet-stream' });
  }

  submit(spec: unknown, idempotencyKey?: string): Promise<Run> {
    return this.call<Run>('POST', '/v1/runs', spec, idempotencyKey ? { 'idempotency-key': idempotencyKey } : {});
  }

  listRuns(): Promise<Run[]> {
    return this.call<Run[]>('GET', '/v1/runs');
  }

  getRun(id: string): Promise<Run> {
    return this.call<Run>('GET', `/v1/runs/${encodeURIComponent(id)}`);
  }

  /** The run's container log: its last `tail` lines, scrubbed. */
  logs(id: string, tail: number): Promise<RunLogs> {
    return this.call<RunLogs>('GET', `/v1/runs/${encodeURIComponent(id)}/logs?tail=${tail}`);
  }

  /** One page of events (at most 10,000), after `afterId`. */
  events(id: string, afterId?: number): Promise<RunEvent[]> {
    const after = afterId === undefined ? '' : `?after=${afterId}`;
    return this.call<RunEvent[]>('GET', `/v1/runs/${encodeURIComponent(id)}/events${after}`);
  }

  /** Every event after `afterId`, page by page until an empty one. */
  async allEvents(id: string, afterId?: number): Promise<RunEvent[]> {
    const all: RunEvent[] = [];
    for (let after = afterId; ;) {
      const page = await this.events(id, after);
      if (page.length === 0) return all;
      all.push(...page);
      after = page.at(-1)!.id;
    }
  }

  /** What a run of `spec` would find now: the daemon's searches, relax steps included (POST /v1/offers). */
  offers(spec: unknown): Promise<OffersReport> {
    return this.call<OffersReport>('POST', '/v1/offers', spec);
  }

  /** `berth doctor`'s checks, made by the daemon with its own key (GET /v1/account/checks). */
  accountChecks(): Promise<AccountChecks> {
    return this.call<AccountChecks>('GET', '/v1/account/checks');
  }

  /** Spend per run and instance since `since` (a date or ISO time), with the service's charges where the key may read them. */
  costs(since?: string): Promise<CostsReport> {
    return this.call<CostsReport>('GET', `/v1/costs${since ? `?since=${encodeURIComponent(since)}` : ''}`);
  }

  /**
   * One kept output file (GET /v1/runs/{id}/outputs), streamed into `out` (the caller's temporary,
   * ./outputs-dest.ts); its size and sha256 as they came, for the caller to check before it keeps
   * the file. Not tried again: a copy is safe to run again.
   */
  async downloadOutput(id: string, attempt: number, name: string, out: Writable): Promise<{ size: number; sha256: string }> {
    await this.verify();
    const q = new URLSearchParams({ attempt: String(attempt), name });
    const url = new URL(`/v1/runs/${encodeURIComponent(id)}/outputs?${q.toString()}`, this.address.url);
    const hash = createHash('sha256');
    let size = 0;
    await new Promise<void>((resolve, reject) => {
      const req = request(url, { method: 'GET', headers: { authorization: `Bearer ${this.address.token}` } }, (res) => {
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => reject(toControlError(res.statusCode ?? 0, parseJson(Buffer.concat(chunks).toString('utf8')))));
          return;
        }
        res.on('data', (c: Buffer) => {
          hash.update(c);
          size += c.length;
        });
        pipeline(res, out).then(resolve, reject);
      });
      req.on('error', (err) => {
        const why = (err as NodeJS.ErrnoException).code ?? err.message;
        reject(
          new BerthError('daemon_unreachable', `The berth daemon at ${this.address.url} is not reachable (${why}): ${START_HINT}.`, {
            cause: err,
          }),
        );
      });
      req.end();
    });
    return { size, sha256: hash.digest('hex') };
  }

  /** `noOutputs`: destroy at once, without taking a task's outputs first. */
  cancel(id: string, options: { noOutputs?: boolean } = {}): Promise<Run> {
    const path = `/v1/runs/${encodeURIComponent(id)}/cancel`;
    return options.noOutputs ? this.call<Run>('POST', path, { no_outputs: true }) : this.call<Run>('POST', path);
  }

  /** One page of notification deliveries, newest first (`before`: the last seq of the previous page). */
  notifications(query: { before?: number; state?: string } = {}): Promise<Notification[]> {
    const params = new URLSearchParams();
    if (query.before !== undefined) params.set('before', String(query.before));
    if (query.state !== undefined) params.set('state', query.state);
    const q = params.toString();
    return this.call<Notification[]>('GET', `/v1/notifications${q ? `?${q}` : ''}`);
  }

  /**
   * Follows GET /v1/events/stream for one run, from after `afterId` (from its first event without
   * one): each event goes to `onEvent` as it is stored. Resolves 'end' once the daemon said the run
   * has ended and sent its last event, 'closed' when the stream stopped short (a daemon stopping:
   * reconnect with the last id), 'aborted' when `signal` fired. With `onOutput`, the run's task
   * output too (`output=1`: while the daemon follows the task over SSH); `onOpen` is called once the
   * daemon answered, so once every later output message will come.
   */
  async streamEvents(
    id: string,
    afterId: number | undefined,
    onEvent: (e: StreamEvent) => void,
    signal: AbortSignal,
    extra: { onOutput?: (o: StreamOutput) => void; onOpen?: () => void } = {},
  ): Promise<'end' | 'closed' | 'aborted'> {
    await this.verify();
    const url = new URL(`/v1/events/stream?run=${encodeURIComponent(id)}${extra.onOutput ? '&output=1' : ''}`, this.address.url);
    const headers: Record<string, string> = { authorization: `Bearer ${this.address.token}`, accept: 'text/event-stream' };
    if (afterId !== undefined) headers['last-event-id'] = String(afterId);
    return new Promise((resolve, reject) => {
      let ended = false;
      const parser = new SseParser((m) => {
        if (m.event === 'end') ended = true;
        else if (m.event === 'message') onEvent(JSON.parse(m.data) as StreamEvent);
        else if (m.event === 'output') extra.onOutput?.(JSON.parse(m.data) as StreamOutput);
      });
      const req = request(url, { method: 'GET', headers, signal }, (res) => {
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => reject(toControlError(res.statusCode ?? 0, parseJson(Buffer.concat(chunks).toString('utf8')))));
          return;
        }
        res.setEncoding('utf8');
        extra.onOpen?.();
        res.on('data', (chunk: string) => {
          try {
            parser.push(chunk);
          } catch (err) {
            req.destroy(err as Error);
          }
        });
        res.on('end', () => resolve(ended ? 'end' : 'closed'));
        res.on('error', () => resolve(signal.aborted ? 'aborted' : 'closed'));
        res.on('aborted', () => resolve(signal.aborted ? 'aborted' : 'closed'));
      });
      req.on('error', (err) => {
        if (signal.aborted) return resolve('aborted');
        const why = (err as NodeJS.ErrnoException).code ?? err.message;
        reject(
          new BerthError('daemon_unreachable', `The berth daemon at ${this.address.url} is not reachable (${why}): ${START_HINT}.`, {
            cause: err,
          }),
        );
      });
      req.end();
    });
  }

  /** One call, tried again while the daemon's store is briefly away (options.storeWaitMs). */
  private async call<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const until = Date.now() + (this.options.storeWaitMs ?? 0);
    for (let wait = STORE_RETRY_MS.first; ; wait = Math.min(wait * 2, STORE_RETRY_MS.max)) {
      try {
        return await this.callOnce<T>(method, path, body, headers);
      } catch (err) {
        if (!isStoreUnavailable(err) || Date.now() + wait > until) throw err;
        this.options.onStoreWait?.(err.message);
        await sleep(wait);
      }
    }
  }

  private async callOnce<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    await this.verify();
    let res;
    try {
      res = await exchange(
        new URL(path, this.address.url),
        method,
        {
          authorization: `Bearer ${this.address.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
      );
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new BerthError('daemon_unreachable', `The berth daemon at ${this.address.url} is not reachable (${why}): ${START_HINT}.`, {
        cause: err,
      });
    }
    const parsed = parseJson(res.text);
    if (res.statusCode >= 200 && res.statusCode < 300) {
      if (parsed === undefined)
        throw new ControlApiError(res.statusCode, 'bad_response', `The daemon answered ${method} ${path} with a body that is not JSON.`);
      return parsed as T;
    }
    throw toControlError(res.statusCode, parsed);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function toControlError(status: number, body: unknown): ControlApiError {
  const error = (body as { error?: { kind?: unknown; message?: unknown; issues?: unknown } } | undefined)?.error;
  const kind = typeof error?.kind === 'string' ? error.kind : `http_${status}`;
  if (kind === 'unauthorized') {
    return new ControlApiError(status, kind, 'The daemon rejected the control token: run berth with the same BERTH_HOME as the daemon.');
  }
  const message = typeof error?.message === 'string' ? error.message : `The daemon answered with HTTP ${status}.`;
  const issues = Array.isArray(error?.issues) ? (error.issues as SpecIssue[]) : [];
  return new ControlApiError(status, kind, message, issues);
}

/** The client for the daemon serving this BERTH_HOME. */
export function connectToDaemon(env: NodeJS.ProcessEnv = process.env, options: ControlClientOptions = {}): ControlClient {
  return new ControlClient(readDaemonAddress(berthHome(env)), options);
}
