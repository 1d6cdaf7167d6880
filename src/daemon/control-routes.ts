// The control API's routes (the table src/http/router.ts matches), each a handler from a checked
// request to an answer or an HttpProblem. The guards that run before any of them (Host, Origin,
// token, content type) and the error envelope are ./control-api.ts's.
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../clock.js';
import { SpecError } from '../errors.js';
import { BodyTooLargeError, isJsonContent, readBody } from '../http/body.js';
import { MAX_SPEC_BYTES } from '../job-spec/spec-size.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import { EVENTS_PAGE_MAX, RUNS_PAGE, type ErrorKind, type Health, type RunEvent } from '../wire/control-api.js';
import { controlProof } from './control-token.js';
import { parseSince, type CostsReport } from './costs.js';
import { loadRunView, loadRunViews, toRunView } from './run-view.js';
import type { Supervisor } from './supervisor.js';

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
  /** GET /v1/costs (`berth costs`): spend per run and instance since the given time (./costs.ts). */
  costs?(sinceMs: number | undefined): Promise<CostsReport>;
}

/** An answer other than 2xx, in the envelope's words. */
export class HttpProblem extends Error {
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

export interface Request {
  req: IncomingMessage;
  url: URL;
  /** The Host it was sent to (one of the daemon's own). */
  host: string;
  params: Record<string, string>;
}

export interface Answer {
  status: number;
  body: unknown;
}

export interface ControlRoute {
  method: 'GET' | 'POST';
  path: string;
  /** 'open': answered without the token (health, and the proof a client checks before sending it). */
  auth?: 'open';
  handle(r: Request): Answer | Promise<Answer>;
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

export function controlRoutes(deps: ControlApiDeps): ControlRoute[] {
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
        return { status: created ? 201 : 200, body: toRunView(row, store.attempts.forRun(row.id), deps.clock.now()) };
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
        return { status: 200, body: loadRunViews(store, { limit: pageLimit(url, RUNS_PAGE), ...(after ? { after } : {}) }, deps.clock.now()) };
      },
    },
    { method: 'GET', path: '/v1/runs/{id}', handle: (r) => ({ status: 200, body: loadRunView(store, runOf(r).id, deps.clock.now()) }) },
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
        return { status: 202, body: loadRunView(store, id, deps.clock.now()) };
      },
    },
    {
      method: 'GET',
      path: '/v1/costs',
      // `berth costs`: berth's own figures, and the service's charges where the key may read them.
      handle: async ({ url }) => {
        if (!deps.costs) throw new HttpProblem(404, 'not_found', 'No route GET /v1/costs.');
        let since: number | undefined;
        try {
          since = parseSince(url.searchParams.get('since'), deps.clock.now());
        } catch (err) {
          throw new HttpProblem(400, 'bad_request', (err as Error).message);
        }
        return { status: 200, body: await deps.costs(since) };
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
        return { status: 202, body: loadRunView(store, row.id, deps.clock.now()) };
      },
    },
  ];
}

