// The control API's routes that read runs: the list (paged, filtered by state and name), one run,
// its event log, its container log.
import type { Clock } from '../../clock.js';
import type { Store } from '../../store/index.js';
import type { RunFilter } from '../../store/runs.js';
import {
  EVENTS_PAGE_MAX,
  RunEventListSchema,
  RunListSchema,
  RunLogsSchema,
  RunSchema,
  RUNS_PAGE,
  type RunEvent,
} from '../../wire/control-api.js';
import { RUN_STATES, type RunState } from '../../wire/run-states.js';
import type { RunLogs } from '../runs/run-logs.js';
import { HttpProblem, runOf, wholeNumber, type ControlRoute, type Request } from './route-types.js';
import { createReadStream, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { loadRunView, loadRunViews, toRunEvent } from './run-view.js';
import { keptFileShownAs } from './output-names.js';

export interface RunRoutesDeps {
  store: Store;
  logs: Pick<RunLogs, 'logsOf'>;
  clock: Pick<Clock, 'now'>;
}

const limitParam = (page: { default: number; max: number }) => ({
  name: 'limit',
  description: `items per page (default ${page.default}, at most ${page.max}; 0 means the default)`,
  schema: { type: 'integer', minimum: 0 },
});

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

export function runRoutes(deps: RunRoutesDeps): ControlRoute[] {
  const { store } = deps;
  return [
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
        const row = runOf(store, r);
        return { status: 200, body: loadRunView(store, row.id, deps.clock.now())! };
      },
    },
    {
      method: 'GET',
      path: '/v1/runs/{id}/outputs',
      doc: {
        summary: "One file of a task's outputs, as kept (the run object lists them under `outputs`; `berth outputs` copies them all)",
        query: [
          { name: 'attempt', description: 'the attempt that took them', schema: { type: 'integer', minimum: 1 } },
          { name: 'name', description: "the file's name in the list", schema: { type: 'string' } },
        ],
        responses: { 200: { description: "the file's bytes", contentType: 'application/octet-stream' } },
        errors: [400, 404, 409],
      },
      handle: (r) => outputFile(store, r),
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
        const { id } = runOf(store, r);
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
        const { id } = runOf(store, r);
        const tail = Math.min(Math.max(1, queryInt(r.url, 'tail', 200) || 200), 5000);
        const logs = await deps.logs.logsOf(id, tail, AbortSignal.timeout(90_000));
        return { status: 200, body: { run_id: id, ...logs! } };
      },
    },
  ];
}

/**
 * Streams one kept output file. The files are on the host of the daemon that took them: another
 * daemon of a shared store says which (409 outputs_elsewhere). Only a name of the stored manifest
 * is served, so no request names a path of its own; asked by the name the run object shows
 * (scrubbed of the run's secrets, ./output-names.ts).
 */
function outputFile(store: Store, r: Request): { streamed: true } {
  const row = runOf(store, r);
  const attempt = wholeNumber(r.url.searchParams.get('attempt'), 'attempt');
  const name = r.url.searchParams.get('name');
  if (attempt === undefined || !name) throw new HttpProblem(400, 'bad_request', 'attempt and name are both needed.');
  const kept = store.outputs.get(row.id, attempt);
  const file = kept && keptFileShownAs(row.spec_json, kept.files, name);
  if (!kept || !file) throw new HttpProblem(404, 'not_found', `Run ${row.id} kept no output ${name.slice(0, 200)} of attempt ${attempt}.`);
  if (kept.host !== hostname() || kept.dir === null)
    throw new HttpProblem(
      409,
      'outputs_elsewhere',
      `The outputs of run ${row.id} are kept on host ${kept.host}${kept.dir ? ` (in ${kept.dir})` : ''}: run berth outputs against the daemon there.`,
      { host: kept.host },
    );
  const path = join(kept.dir, file.name);
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    throw new HttpProblem(404, 'not_found', `Output ${file.name} of run ${row.id} is no longer in ${kept.dir}.`);
  }
  r.res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
  // A client that goes away ends the stream; nothing to tell anyone.
  pipeline(createReadStream(path), r.res).catch(() => undefined);
  return { streamed: true };
}
