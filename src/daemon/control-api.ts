// The control API (SPEC section 5): loopback only, every route but /healthz and the proof behind the
// bearer control token. Errors are `{"error": {"kind", "message"}}`; a spec error also lists its issues.
//
// A request is refused before routing when
// - its Host is not the daemon's own loopback address (a web page's DNS-rebinding request names its
//   own host), or it carries an Origin other than that address (any web page): 403;
// - it has a body that is not `application/json` (a no-preflight `text/plain` POST from a page): 415;
// - its target cannot be parsed: 400.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { BerthError, SpecError, StoreWriteError } from '../errors.js';
import { MAX_SPEC_BYTES } from '../job-spec/spec-size.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import { controlProof, isUsableToken } from './control-token.js';
import { parseSince, type CostsReport } from './costs.js';
import { loadRunView, toRunView } from './run-view.js';
import { IdempotencyConflictError, type Supervisor } from './supervisor.js';

/** Events per page of GET /v1/runs/{id}/events; `berth events` pages with `after`. */
export const EVENTS_PAGE_MAX = 10_000;

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
  /** False while the start-up reconcile runs: status works, submits are stored and wait. */
  ready(): boolean;
  /** GET /v1/costs (`berth costs`): spend per run and instance since the given time (./costs.ts). */
  costs?(sinceMs: number | undefined): Promise<CostsReport>;
}

class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
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

const hasBody = (req: IncomingMessage) =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

function isJson(req: IncomingMessage): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_SPEC_BYTES) throw new HttpProblem(413, 'too_large', `The job spec is larger than ${MAX_SPEC_BYTES / 1024} KiB.`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
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

export function createControlApi(deps: ControlApiDeps): Server {
  const { store, supervisor, tokens, log } = deps;

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const host = checkOrigin(req);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      throw new HttpProblem(400, 'bad_request', 'The request target cannot be parsed.');
    }
    const parts = url.pathname.split('/').filter(Boolean);
    const method = req.method ?? 'GET';
    if (hasBody(req) && !isJson(req)) {
      throw new HttpProblem(415, 'unsupported_media_type', 'A request body must be JSON with "Content-Type: application/json".');
    }

    if (method === 'GET' && url.pathname === '/healthz') {
      return send(res, 200, {
        ok: true,
        store_id: store.storeId,
        uptime_s: Math.round((deps.clock.now() - deps.startedAt) / 1000),
        live_runs: supervisor.liveCount,
        active_runs: supervisor.activeCount,
        ready: deps.ready(),
        held_runs: store.runs.heldCount(),
      });
    }
    if (method === 'GET' && url.pathname === '/v1/proof') {
      // No token: this is how a client checks it talks to the daemon before it sends the token.
      const nonce = url.searchParams.get('nonce') ?? '';
      if (!/^[0-9a-f]{32,128}$/.test(nonce)) throw new HttpProblem(400, 'bad_request', 'nonce must be 32 to 128 hex digits.');
      return send(res, 200, { proof: controlProof(tokens.current(), host, nonce) });
    }
    if (!tokenMatches(req.headers.authorization, tokens.current())) {
      throw new HttpProblem(401, 'unauthorized', 'Missing or wrong control token: send "Authorization: Bearer <BERTH_HOME/control.token>".');
    }
    if (method === 'POST' && url.pathname === '/v1/token/rotate') {
      tokens.rotate();
      log.info('control token rotated');
      return send(res, 200, { rotated: true });
    }
    if (method === 'GET' && url.pathname === '/v1/costs' && deps.costs) {
      let since: number | undefined;
      try {
        since = parseSince(url.searchParams.get('since'), deps.clock.now());
      } catch (err) {
        throw new HttpProblem(400, 'bad_request', (err as Error).message);
      }
      return send(res, 200, await deps.costs(since));
    }
    if (parts[0] !== 'v1' || parts[1] !== 'runs' || parts.length > 4) {
      throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
    }
    const runId = parts[2];
    if (runId === undefined) {
      if (method === 'POST') {
        if (!isJson(req)) throw new HttpProblem(415, 'unsupported_media_type', 'POST /v1/runs takes a JSON job spec with "Content-Type: application/json".');
        const body = await readJson(req);
        const key = req.headers['idempotency-key'];
        const { row, created } = supervisor.submit(body, typeof key === 'string' && key ? key : undefined);
        return send(res, created ? 201 : 200, toRunView(row, store.attempts.forRun(row.id), deps.clock.now()));
      }
      if (method === 'GET') {
        const limit = Math.min(queryInt(url, 'limit', 1000) || 1000, 10_000);
        return send(res, 200, store.runs.list(limit).map((r) => toRunView(r, store.attempts.forRun(r.id), deps.clock.now())));
      }
      throw new HttpProblem(405, 'method_not_allowed', `${method} is not allowed on /v1/runs.`);
    }
    if (!store.runs.get(runId)) throw new HttpProblem(404, 'not_found', `No run ${runId}.`);
    const action = parts[3];
    if (action === undefined && method === 'GET') return send(res, 200, loadRunView(store, runId, deps.clock.now()));
    if (action === 'events' && method === 'GET') {
      const after = queryInt(url, 'after', 0);
      const limit = Math.min(queryInt(url, 'limit', EVENTS_PAGE_MAX) || EVENTS_PAGE_MAX, EVENTS_PAGE_MAX);
      return send(
        res,
        200,
        store.events.list(runId, after, limit).map((e) => ({
          id: e.id,
          at: new Date(e.at).toISOString(),
          type: e.type,
          message: e.message,
          data: e.data_json ? JSON.parse(e.data_json) : null,
          count: e.count,
          first_at: e.first_at === null ? null : new Date(e.first_at).toISOString(),
        })),
      );
    }
    if (action === 'cancel' && method === 'POST') {
      supervisor.cancel(runId);
      return send(res, 202, loadRunView(store, runId, deps.clock.now()));
    }
    if (action === 'resume' && method === 'POST') {
      const row = store.runs.get(runId)!;
      if (row.held_at === null || row.ended_at !== null) {
        throw new HttpProblem(409, 'not_held', `Run ${runId} is not held: only runs held after a restored backup need \`berth resume\`.`);
      }
      supervisor.resumeHeld(runId);
      return send(res, 202, loadRunView(store, runId, deps.clock.now()));
    }
    throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
  }

  return createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (err instanceof HttpProblem) return send(res, err.status, { error: { kind: err.kind, message: err.message, ...err.extra } });
      if (err instanceof SpecError) {
        return send(res, 400, { error: { kind: 'spec', message: err.message, issues: err.issues } });
      }
      if (err instanceof IdempotencyConflictError) {
        return send(res, 409, { error: { kind: 'idempotency_conflict', message: err.message, run_id: err.runId } });
      }
      if (err instanceof StoreWriteError) {
        log.warn({ code: err.sqliteCode }, 'a request could not be stored: the store cannot be written now');
        return send(res, 503, { error: { kind: 'store_unavailable', message: err.message } });
      }
      if (err instanceof BerthError) {
        return send(res, err.code === 'daemon_stopping' ? 503 : 500, { error: err.toJSON() });
      }
      log.error({ err }, 'control API error');
      send(res, 500, { error: { kind: 'internal', message: 'Internal error; see the daemon log.' } });
    });
  });
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
