// The control API's routes (the table src/http/router.ts matches), each a handler from a checked
// request to an answer or an HttpProblem. The guards that run before any of them (Host, Origin,
// token, content type) and the error envelope are ./control-api.ts's.
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../../clock.js';
import { SpecError } from '../../errors.js';
import { BodyTooLargeError, isJsonContent, readBody } from '../../http/body.js';
import { MAX_SPEC_BYTES } from '../../job-spec/spec-size.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import { jobSpecSchema } from '../../job-spec/schema.js';
import {
  CostsReportSchema,
  type CostsReport,
  EVENTS_PAGE_MAX,
  HealthSchema,
  ProofSchema,
  RotatedSchema,
  RunEventListSchema,
  RunLogsSchema,
  RunListSchema,
  RunSchema,
  RUNS_PAGE,
  type Health,
  type RunEvent,
} from '../../wire/control-api.js';
import { openApiDocument } from './control-openapi.js';
import type { RunFilter } from '../../store/runs.js';
import { RUN_STATES, type RunState } from '../../wire/run-states.js';
import { HttpProblem, wholeNumber, type Answer, type ControlRoute, type Request } from './route-types.js';
import { controlProof } from '../../wire/control-proof.js';
import { parseSince } from '../money/costs.js';
import type { EventStreams } from './event-stream.js';
import type { ClusterState, DaemonMetrics } from '../notify/metrics.js';
import { observeRoutes } from './observe-routes.js';
import { dashboardRoutes } from './dashboard/dashboard-routes.js';
import { accountRoutes, type AccountPort } from './account-routes.js';
import type { DashboardSessions } from './dashboard/sessions.js';
import { loadRunView, loadRunViews, toRunEvent, toRunView } from './run-view.js';
import type { Supervisor } from '../runs/supervisor.js';
import type { Submissions } from '../runs/submission.js';
import type { RunLogs } from '../runs/run-logs.js';
import type { RunCounts } from '../runs/shared-runs.js';

interface ControlTokens {
  current(): string;
  /** Makes, stores and switches to a new token; the old one stops working at once. */
  rotate(): string;
}

/**
 * What the routes ask of the runs being driven: the counts of /healthz, and a cancel or a resume.
 * The Supervisor for the runs of this daemon alone; on a store several daemons share, an object
 * that answers for every daemon's runs (../runs/shared-runs.ts).
 */
type ControlRuns = RunCounts & Pick<Supervisor, 'cancel' | 'resumeHeld'>;

export interface ControlApiDeps {
  store: Store;
  supervisor: ControlRuns;
  submissions: Pick<Submissions, 'submit'>;
  logs: Pick<RunLogs, 'logsOf'>;
  tokens: ControlTokens;
  log: Logger;
  clock: Pick<Clock, 'now'>;
  startedAt: number;
  /** False while the runs resume after a start: status works, submits are stored and wait. */
  ready(): boolean;
  /**
   * GET /v1/costs (`berth costs`): spend per run and instance since the given time (./costs.ts),
   * beside the service's charges when `service` (a call to the service).
   */
  costs?(sinceMs: number | undefined, service: boolean): Promise<CostsReport>;
  metrics: DaemonMetrics;
  streams: EventStreams;
  /** GET /v1/account and its checks (./account-routes.ts). */
  account?: AccountPort;
  /** The dashboard's sign-in codes and sessions; a token rotation ends them all. */
  sessions: DashboardSessions;
  /** Several daemons on one store: this daemon's part, shown by /healthz. */
  cluster?: () => ClusterState;
}

const limitParam = (page: { default: number; max: number }) => ({
  name: 'limit',
  description: `items per page (default ${page.default}, at most ${page.max}; 0 means the default)`,
  schema: { type: 'integer', minimum: 0 },
});

async function readJson(req: IncomingMessage): Promise<unknown> {
  let text: string;
  try {
    text = await readBody(req, MAX_SPEC_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError)
      throw new HttpProblem(413, 'too_large', `The job spec is larger than ${MAX_SPEC_BYTES / 1024} KiB.`);
    throw err;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SpecError([{ path: '$', message: `not valid JSON: ${(err as Error).message}` }]);
  }
}

/** A query number: absent or empty gives the default. */
const queryInt = (url: URL, name: string, fallback: number): number => wholeNumber(url.searchParams.get(name), name) ?? fallback;

/** `?limit`: the default when absent or 0, at most `max`. */
const pageLimit = (url: URL, page: { default: number; max: number }) =>
  Math.min(queryInt(url, 'limit', page.default) || page.default, page.max);

/** GET /v1/runs's `state` (comma-separated) and `name` filters. */
function runFilter(url: URL): RunFilter {
  const states = (url.searchParams.get('state') ?? '').split(',').filter((s) => s !== '');
  const unknown = states.find((s) => !(RUN_STATES as readonly string[]).includes(s));
  if (unknown !== undefined)
    throw new HttpProblem(400, 'bad_request', `state: "${unknown.slice(0, 40)}" is not a run state (${RUN_STATES.join(', ')}).`);
  const name = url.searchParams.get('name') ?? '';
  if (name.length > 200) throw new HttpProblem(400, 'bad_request', 'name: at most 200 characters.');
  return { states: states as RunState[], ...(name ? { name } : {}) };
}

export function controlRoutes(deps: ControlApiDeps): ControlRoute[] {
  const { store, supervisor, tokens, log } = deps;
  const runOf = (r: Request) => {
    const row = store.runs.get(r.params.id!);
    if (!row) throw new HttpProblem(404, 'not_found', `No run ${r.params.id}.`);
    return row;
  };
  const routes: ControlRoute[] = [
    {
      method: 'GET',
      path: '/healthz',
      auth: 'open',
      doc: {
        summary: 'Liveness and readiness; no token needed',
        responses: { 200: { description: 'the daemon serves', schema: HealthSchema } },
      },
      handle: (): Answer => {
        const body: Health = {
          ok: true,
          store_id: store.storeId,
          uptime_s: Math.max(0, Math.round((deps.clock.now() - deps.startedAt) / 1000)),
          live_runs: supervisor.liveCount,
          active_runs: supervisor.activeCount,
          ready: deps.ready(),
          held_runs: store.runs.heldCount(),
          ...(deps.cluster ? { cluster: deps.cluster() } : {}),
        };
        return { status: 200, body };
      },
    },
    {
      method: 'GET',
      path: '/v1/proof',
      auth: 'open',
      doc: {
        summary: 'Proof that this daemon holds the control token, checked by clients before they send it',
        description: 'proof = hex HMAC-SHA256 under the token of "berth-control-proof:v1\\n<Host>\\n<nonce>".',
        query: [{ name: 'nonce', description: '32 to 128 hex digits', schema: { type: 'string', pattern: '^[0-9a-f]{32,128}$' } }],
        responses: { 200: { description: 'the proof', schema: ProofSchema } },
      },
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
      auth: 'token',
      doc: {
        summary: 'Makes a new control token; the old one stops working at once, and every dashboard session ends',
        responses: { 200: { description: 'rotated', schema: RotatedSchema } },
      },
      handle: () => {
        tokens.rotate();
        deps.sessions.endAll();
        // The dashboard's open event streams end now, not at their next event.
        deps.streams.recheck();
        log.info('control token rotated; every dashboard session ended');
        return { status: 200, body: { rotated: true } };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs',
      doc: {
        summary: 'Submits a job spec',
        headers: [
          { name: 'Idempotency-Key', description: 'a repeat with the same key and spec returns the same run', schema: { type: 'string' } },
        ],
        body: jobSpecSchema,
        responses: {
          201: { description: 'the new run', schema: RunSchema },
          200: { description: 'the run an earlier submission with this Idempotency-Key made', schema: RunSchema },
        },
        errors: [409, 413, 415, 503],
      },
      handle: async ({ req }) => {
        if (!isJsonContent(req))
          throw new HttpProblem(
            415,
            'unsupported_media_type',
            'POST /v1/runs takes a JSON job spec with "Content-Type: application/json".',
          );
        const body = await readJson(req);
        const key = req.headers['idempotency-key'];
        const { row, created } = deps.submissions.submit(body, typeof key === 'string' && key ? key : undefined);
        return { status: created ? 201 : 200, body: toRunView(row, store.attempts.forRun(row.id), deps.clock.now()) };
      },
    },
    {
      method: 'GET',
      path: '/v1/runs',
      doc: {
        summary: 'Runs, newest first, a page at a time',
        query: [
          limitParam(RUNS_PAGE),
          { name: 'after', description: 'the last run id of the previous page', schema: { type: 'string' } },
          {
            name: 'state',
            description: 'only runs in one of these states (comma-separated)',
            schema: { type: 'string', pattern: `^(${RUN_STATES.join('|')})(,(${RUN_STATES.join('|')}))*$` },
          },
          { name: 'name', description: 'only runs whose name holds this text (any case)', schema: { type: 'string', maxLength: 200 } },
        ],
        responses: {
          200: {
            description: 'a page of runs; an empty one ends the list. The X-Total-Count header says how many runs the filters match.',
            schema: RunListSchema,
          },
        },
      },
      // Newest first; `after=RUN_ID` (the last of the previous page) pages on.
      handle: ({ url }) => {
        const afterId = url.searchParams.get('after');
        const after = afterId ? store.runs.get(afterId) : undefined;
        if (afterId && !after)
          throw new HttpProblem(
            400,
            'bad_request',
            `after: no run ${afterId.slice(0, 40)} to page on from (it may have been deleted by retention); start again without after.`,
          );
        const filter = runFilter(url);
        return {
          status: 200,
          body: loadRunViews(store, { limit: pageLimit(url, RUNS_PAGE), filter, ...(after ? { after } : {}) }, deps.clock.now()),
          headers: { 'x-total-count': String(store.runs.count(filter)) },
        };
      },
    },
    {
      method: 'GET',
      path: '/v1/runs/{id}',
      doc: { summary: 'One run', responses: { 200: { description: 'the run object', schema: RunSchema } }, errors: [404] },
      // The row read to tell a 404 is the one shown: one read, not a second.
      handle: (r) => {
        const row = runOf(r);
        return { status: 200, body: toRunView(row, store.attempts.forRun(row.id), deps.clock.now()) };
      },
    },
    {
      method: 'GET',
      path: '/v1/runs/{id}/events',
      doc: {
        summary: "A run's event log, oldest first, a page at a time",
        query: [
          { name: 'after', description: 'the last event id seen', schema: { type: 'integer', minimum: 0 } },
          limitParam({ default: EVENTS_PAGE_MAX, max: EVENTS_PAGE_MAX }),
        ],
        responses: { 200: { description: 'a page of events; an empty one ends the log', schema: RunEventListSchema } },
        errors: [404],
      },
      handle: (r) => {
        const { id } = runOf(r);
        const after = queryInt(r.url, 'after', 0);
        const events: RunEvent[] = store.events
          .list(id, after, pageLimit(r.url, { default: EVENTS_PAGE_MAX, max: EVENTS_PAGE_MAX }))
          .map(toRunEvent);
        return { status: 200, body: events };
      },
    },
    {
      method: 'GET',
      path: '/v1/runs/{id}/logs',
      doc: {
        summary:
          "A run's container log (a task's output): live from its instance through the service's logs endpoint, else the lines kept with its last attempt; every secret scrubbed",
        query: [
          {
            name: 'tail',
            description: 'lines from the end (default 200, at most 5000)',
            schema: { type: 'integer', minimum: 1, maximum: 5000 },
          },
        ],
        responses: { 200: { description: 'the log', schema: RunLogsSchema } },
        errors: [404],
      },
      handle: async (r) => {
        const { id } = runOf(r);
        const tail = Math.min(Math.max(1, queryInt(r.url, 'tail', 200) || 200), 5000);
        const logs = await deps.logs.logsOf(id, tail, AbortSignal.timeout(90_000));
        return { status: 200, body: { run_id: id, ...logs! } };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs/{id}/cancel',
      doc: {
        summary: 'Stops a run and destroys every instance it holds',
        responses: { 202: { description: 'the run, as it stands', schema: RunSchema } },
        errors: [404, 503],
      },
      handle: (r) => {
        const { id } = runOf(r);
        supervisor.cancel(id);
        return { status: 202, body: loadRunView(store, id, deps.clock.now()) };
      },
    },
    {
      method: 'GET',
      path: '/v1/costs',
      doc: {
        summary: "Spend per run and per instance (berth costs), beside the service's charges where the key may read billing",
        query: [
          {
            name: 'since',
            description: 'from 00:00 UTC of this day (YYYY-MM-DD, or an ISO time); default: every record kept',
            schema: { type: 'string' },
          },
          {
            name: 'service',
            description:
              "false: berth's own figures only, without reading the service's charges (the dashboard's refreshes: no call to the service); default true",
            schema: { type: 'string', enum: ['true', 'false'] },
          },
        ],
        responses: { 200: { description: 'the report', schema: CostsReportSchema } },
        errors: [400, 404],
      },
      handle: async ({ url }) => {
        if (!deps.costs) throw new HttpProblem(404, 'not_found', 'No route GET /v1/costs.');
        let since: number | undefined;
        try {
          since = parseSince(url.searchParams.get('since'), deps.clock.now());
        } catch (err) {
          throw new HttpProblem(400, 'bad_request', (err as Error).message);
        }
        const service = url.searchParams.get('service') ?? 'true';
        if (service !== 'true' && service !== 'false') throw new HttpProblem(400, 'bad_request', 'service must be true or false.');
        return { status: 200, body: await deps.costs(since, service === 'true') };
      },
    },
    {
      method: 'POST',
      path: '/v1/runs/{id}/resume',
      doc: {
        summary: 'Lets a run held after a restored backup go on',
        responses: { 202: { description: 'the run, as it stands', schema: RunSchema } },
        errors: [404, 409, 503],
      },
      handle: (r) => {
        const row = runOf(r);
        if (row.held_at === null || row.ended_at !== null) {
          throw new HttpProblem(
            409,
            'not_held',
            `Run ${row.id} is not held: only runs held after a restored backup need \`berth resume\`.`,
          );
        }
        supervisor.resumeHeld(row.id);
        return { status: 202, body: loadRunView(store, row.id, deps.clock.now()) };
      },
    },
    ...observeRoutes(deps),
    ...accountRoutes(deps.account),
    ...dashboardRoutes(deps),
  ];
  let document: Record<string, unknown> | undefined;
  routes.push({
    method: 'GET',
    path: '/v1/openapi.json',
    auth: 'open',
    doc: {
      summary: 'This document: OpenAPI 3.1, generated from the schemas the daemon answers with',
      responses: { 200: { description: 'the OpenAPI document' } },
    },
    handle: ({ host }) => {
      document ??= openApiDocument(routes);
      return { status: 200, body: { ...document, servers: [{ url: `http://${host}` }] } };
    },
  });
  return routes;
}
