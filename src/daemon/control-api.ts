// The control API (SPEC section 5; its wire contract is src/wire/control-api.ts): loopback only,
// every route but /healthz and the proof behind the bearer control token, on the router the
// simulator uses too (src/http/router.ts). Errors are `{"error": {"kind", "message"}}`; a spec
// error also lists its issues.
//
// A request is refused before routing when
// - its Host is not the daemon's own loopback address (a web page's DNS-rebinding request names its
//   own host), or it carries an Origin other than that address (any web page): 403;
// - its target cannot be parsed: 400;
// - it has a body that is not `application/json` (a no-preflight `text/plain` POST from a page): 415.
// Then: an unknown path 404 and a known path with another method 405 (after the token check, so
// nothing but the two open routes answers without the token), a body over 1 MiB 413.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../clock.js';
import { BerthError, SpecError, StoreWriteError } from '../errors.js';
import { BodyTooLargeError, hasBody, isJsonContent, readBody, sendJson } from '../http/body.js';
import { BadPathError, Router } from '../http/router.js';
import { MAX_SPEC_BYTES } from '../job-spec/spec-size.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import { EVENTS_PAGE_MAX, RUNS_PAGE, type ErrorKind, type Health, type RunEvent } from '../wire/control-api.js';
import { controlProof, isUsableToken } from './control-token.js';
import { loadRunView, loadRunViews, toRunView } from './run-view.js';
import { IdempotencyConflictError, type Supervisor } from './supervisor.js';

export interface ControlTokens {
  current(): string;
  /** Makes, stores and switches to a new token; the old one stops working at once. */
  rotate(): string;
}

export interface ControlApiDeps {
  store: Store;
  supervisor: Supervisor;
  tokens: ControlTokens;
  log: Logger;
  clock: Pick<Clock, 'now'>;
  startedAt: number;
  /** False while the runs resume after a start: status works, submits are stored and wait. */
  ready(): boolean;
}

/** An answer other than 2xx, in the envelope's words. */
class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly kind: ErrorKind,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

interface Request {
  req: IncomingMessage;
  url: URL;
  /** The Host it was sent to (one of the daemon's own). */
  host: string;
  params: Record<string, string>;
}

interface Answer {
  status: number;
  body: unknown;
}

interface ControlRoute {
  method: 'GET' | 'POST';
  path: string;
  /** 'open': answered without the token (health, and the proof a client checks before sending it). */
  auth?: 'open';
  handle(r: Request): Answer | Promise<Answer>;
}

function tokenMatches(header: string | undefined, token: string): boolean {
  if (!isUsableToken(token)) return false; // never "no token means no check"
  const given = Buffer.from(header?.startsWith('Bearer ') ? header.slice(7) : '');
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** The Host values that name this daemon: the address and port the request arrived on, or localhost. */
function ownHosts(req: IncomingMessage): string[] {
  const { localAddress, localPort } = req.socket;
  if (!localAddress || !localPort) return [];
  const ip = localAddress.includes(':') ? `[${localAddress}]` : localAddress;
  return [`${ip}:${localPort}`, `localhost:${localPort}`];
}

function checkOrigin(req: IncomingMessage): string {
  const hosts = ownHosts(req);
  const host = req.headers.host?.toLowerCase();
  if (!host || !hosts.includes(host)) {
    throw new HttpProblem(403, 'forbidden', `Host "${host ?? ''}" is not this daemon's address; call it as http://${hosts[0] ?? '127.0.0.1'}.`);
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !hosts.some((h) => origin.toLowerCase() === `http://${h}`)) {
    throw new HttpProblem(403, 'forbidden', 'Requests from web pages are refused.');
  }
  return host;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  let text: string;
  try {
    text = await readBody(req, MAX_SPEC_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw new HttpProblem(413, 'too_large', `The job spec is larger than ${MAX_SPEC_BYTES / 1024} KiB.`);
    throw err;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SpecError([{ path: '$', message: `not valid JSON: ${(err as Error).message}` }]);
  }
}

/** A query number: absent or empty gives the default; anything else must be a whole number ≥ 0. */
function queryInt(url: URL, name: string, fallback: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new HttpProblem(400, 'bad_request', `${name} must be a whole number ≥ 0, got "${raw.slice(0, 40)}".`);
  return n;
}

/** `?limit`: the default when absent or 0, at most `max`. */
const pageLimit = (url: URL, page: { default: number; max: number }) => Math.min(queryInt(url, 'limit', page.default) || page.default, page.max);

function routes(deps: ControlApiDeps): ControlRoute[] {
  const { store, supervisor, tokens, log } = deps;
  const runOf = (r: Request) => {
    const row = store.runs.get(r.params.id!);
    if (!row) throw new HttpProblem(404, 'not_found', `No run ${r.params.id}.`);
    return row;
  };
  return [
    {
      method: 'GET',
      path: '/healthz',
      auth: 'open',
      handle: (): Answer => {
        const body: Health = {
          ok: true,
          store_id: store.storeId,
          uptime_s: Math.max(0, Math.round((deps.clock.now() - deps.startedAt) / 1000)),
          live_runs: supervisor.liveCount,
          active_runs: supervisor.activeCount,
          ready: deps.ready(),
          held_runs: store.runs.heldCount(),
        };
        return { status: 200, body };
      },
    },
    {
      method: 'GET',
      path: '/v1/proof',
      auth: 'open',
      // How a client checks it talks to the daemon before it sends the token.
      handle: ({ url, host }) => {
        const nonce = url.searchParams.get('nonce') ?? '';
        if (!/^[0-9a-f]{32,128}$/.test(nonce)) throw new HttpProblem(400, 'bad_request', 'nonce must be 32 to 128 hex digits.');
        return { status: 200, body: { proof: controlProof(tokens.current(), host, nonce) } };
      },
    },
    {
      method: 'POST',
      path: '/v1/token/rotate',
      handle: () => {
        tokens.rotate();
        log.info('control token rotated');
        return { status: 200, body: { rotated: true } };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs',
      handle: async ({ req }) => {
        if (!isJsonContent(req)) throw new HttpProblem(415, 'unsupported_media_type', 'POST /v1/runs takes a JSON job spec with "Content-Type: application/json".');
        const body = await readJson(req);
        const key = req.headers['idempotency-key'];
        const { row, created } = supervisor.submit(body, typeof key === 'string' && key ? key : undefined);
        return { status: created ? 201 : 200, body: toRunView(row, store.attempts.forRun(row.id)) };
      },
    },
    {
      method: 'GET',
      path: '/v1/runs',
      // Newest first; `after=RUN_ID` (the last of the previous page) pages on.
      handle: ({ url }) => {
        const afterId = url.searchParams.get('after');
        const after = afterId ? store.runs.get(afterId) : undefined;
        if (afterId && !after) throw new HttpProblem(400, 'bad_request', `after: no run ${afterId.slice(0, 40)} to page on from (it may have been deleted by retention); start again without after.`);
        return { status: 200, body: loadRunViews(store, { limit: pageLimit(url, RUNS_PAGE), ...(after ? { after } : {}) }) };
      },
    },
    { method: 'GET', path: '/v1/runs/{id}', handle: (r) => ({ status: 200, body: loadRunView(store, runOf(r).id) }) },
    {
      method: 'GET',
      path: '/v1/runs/{id}/events',
      handle: (r) => {
        const { id } = runOf(r);
        const after = queryInt(r.url, 'after', 0);
        const events: RunEvent[] = store.events.list(id, after, pageLimit(r.url, { default: EVENTS_PAGE_MAX, max: EVENTS_PAGE_MAX })).map((e) => ({
          id: e.id,
          at: new Date(e.at).toISOString(),
          type: e.type,
          message: e.message,
          data: e.data_json ? JSON.parse(e.data_json) : null,
          count: e.count,
          first_at: e.first_at === null ? null : new Date(e.first_at).toISOString(),
        }));
        return { status: 200, body: events };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs/{id}/cancel',
      handle: (r) => {
        const { id } = runOf(r);
        supervisor.cancel(id);
        return { status: 202, body: loadRunView(store, id) };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs/{id}/resume',
      handle: (r) => {
        const row = runOf(r);
        if (row.held_at === null || row.ended_at !== null) {
          throw new HttpProblem(409, 'not_held', `Run ${row.id} is not held: only runs held after a restored backup need \`berth resume\`.`);
        }
        supervisor.resumeHeld(row.id);
        return { status: 202, body: loadRunView(store, row.id) };
      },
    },
  ];
}

export function createControlApi(deps: ControlApiDeps): Server {
  const { tokens, log } = deps;
  const router = new Router<ControlRoute>(routes(deps));

  async function handle(req: IncomingMessage): Promise<Answer> {
    const host = checkOrigin(req);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      throw new HttpProblem(400, 'bad_request', 'The request target cannot be parsed.');
    }
    if (hasBody(req) && !isJsonContent(req)) {
      throw new HttpProblem(415, 'unsupported_media_type', 'A request body must be JSON with "Content-Type: application/json".');
    }
    const method = req.method ?? 'GET';
    let match;
    try {
      match = router.match(method, url.pathname);
    } catch (err) {
      if (err instanceof BadPathError) throw new HttpProblem(400, 'bad_request', err.message);
      throw err;
    }
    const open = match.kind === 'found' && match.route.auth === 'open';
    if (!open && !tokenMatches(req.headers.authorization, tokens.current())) {
      throw new HttpProblem(401, 'unauthorized', 'Missing or wrong control token: send "Authorization: Bearer <BERTH_HOME/control.token>".');
    }
    if (match.kind === 'none') throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
    if (match.kind === 'method') {
      const allow = match.allow.join(', ');
      throw new HttpProblem(405, 'method_not_allowed', `${method} is not allowed on ${url.pathname} (allowed: ${allow}).`, {}, { allow });
    }
    return match.route.handle({ req, url, host, params: match.params });
  }

  return createServer((req, res) => {
    handle(req)
      .then((answer) => sendJson(res, answer.status, answer.body))
      .catch((err: unknown) => answerError(res, err, log));
  });
}

function answerError(res: ServerResponse, err: unknown, log: Logger): void {
  const problem = toProblem(err, log);
  sendJson(res, problem.status, { error: { kind: problem.kind, message: problem.message, ...problem.extra } }, problem.headers);
}

/** Every failure in the envelope's words; only a bug is logged as an error. */
function toProblem(err: unknown, log: Logger): HttpProblem {
  if (err instanceof HttpProblem) return err;
  if (err instanceof SpecError) return new HttpProblem(400, 'spec', err.message, { issues: err.issues });
  if (err instanceof IdempotencyConflictError) return new HttpProblem(409, 'idempotency_conflict', err.message, { run_id: err.runId });
  if (err instanceof StoreWriteError) {
    log.warn({ code: err.sqliteCode }, 'a request could not be stored: the store cannot be written now');
    return new HttpProblem(503, 'store_unavailable', err.message);
  }
  if (err instanceof BerthError && err.code === 'daemon_stopping') return new HttpProblem(503, 'daemon_stopping', err.message);
  log.error({ err }, 'control API error');
  return new HttpProblem(500, 'internal', 'Internal error; see the daemon log.');
}

export async function listen(server: Server, hostPort: string): Promise<string> {
  const i = hostPort.lastIndexOf(':');
  const host = hostPort.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(hostPort.slice(i + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${shownHost}:${addr.port}`;
}
