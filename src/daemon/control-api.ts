// The control API (SPEC section 5): loopback only, every route but /healthz behind the bearer
// control token. Errors are `{"error": {"kind", "message"}}`; a spec error also lists its issues.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BerthError, SpecError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import { loadRunView, toRunView } from './run-view.js';
import type { Supervisor } from './supervisor.js';

const MAX_BODY_BYTES = 1 << 20;

export interface ControlApiDeps {
  store: Store;
  supervisor: Supervisor;
  token: string;
  log: Logger;
  startedAt: number;
}

class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string,
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
  const given = Buffer.from(header?.startsWith('Bearer ') ? header.slice(7) : '');
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpProblem(413, 'too_large', 'The job spec is larger than 1 MiB.');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SpecError([{ path: '$', message: `not valid JSON: ${(err as Error).message}` }]);
  }
}

export function createControlApi(deps: ControlApiDeps): Server {
  const { store, supervisor, token, log } = deps;

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const parts = url.pathname.split('/').filter(Boolean);
    const method = req.method ?? 'GET';

    if (method === 'GET' && url.pathname === '/healthz') {
      return send(res, 200, {
        ok: true,
        store_id: store.storeId,
        uptime_s: Math.round((Date.now() - deps.startedAt) / 1000),
        live_runs: supervisor.liveCount,
        active_runs: supervisor.activeCount,
      });
    }
    if (!tokenMatches(req.headers.authorization, token)) {
      throw new HttpProblem(401, 'unauthorized', 'Missing or wrong control token: send "Authorization: Bearer <BERTH_HOME/control.token>".');
    }
    if (parts[0] !== 'v1' || parts[1] !== 'runs' || parts.length > 4) {
      throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
    }
    const runId = parts[2];
    if (runId === undefined) {
      if (method === 'POST') {
        const body = await readJson(req);
        const key = req.headers['idempotency-key'];
        const { row, created } = supervisor.submit(body, typeof key === 'string' && key ? key : undefined);
        return send(res, created ? 201 : 200, toRunView(row, store.attempts.forRun(row.id)));
      }
      if (method === 'GET') {
        const limit = Math.min(Number(url.searchParams.get('limit') ?? 1000) || 1000, 10_000);
        return send(res, 200, store.runs.list(limit).map((r) => toRunView(r, store.attempts.forRun(r.id))));
      }
      throw new HttpProblem(405, 'method_not_allowed', `${method} is not allowed on /v1/runs.`);
    }
    if (!store.runs.get(runId)) throw new HttpProblem(404, 'not_found', `No run ${runId}.`);
    const action = parts[3];
    if (action === undefined && method === 'GET') return send(res, 200, loadRunView(store, runId));
    if (action === 'events' && method === 'GET') {
      const after = Number(url.searchParams.get('after') ?? 0) || 0;
      return send(
        res,
        200,
        store.events.list(runId, after).map((e) => ({
          id: e.id,
          at: new Date(e.at).toISOString(),
          type: e.type,
          message: e.message,
          data: e.data_json ? JSON.parse(e.data_json) : null,
        })),
      );
    }
    if (action === 'cancel' && method === 'POST') {
      supervisor.cancel(runId);
      return send(res, 202, loadRunView(store, runId));
    }
    throw new HttpProblem(404, 'not_found', `No route ${method} ${url.pathname}.`);
  }

  return createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (err instanceof HttpProblem) return send(res, err.status, { error: { kind: err.kind, message: err.message } });
      if (err instanceof SpecError) {
        return send(res, 400, { error: { kind: 'spec', message: err.message, issues: err.issues } });
      }
      if (err instanceof BerthError) {
        return send(res, err.code === 'control' ? 503 : 500, { error: err.toJSON() });
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
