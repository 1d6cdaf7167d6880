// The control API's routes for watching the daemon from other programs (issue #13): Prometheus
// metrics, the notification outbox, and the live event stream. The table and guards are
// ./control-routes.ts's and ./control-api.ts's.
import type { Store } from '../../store/index.js';
import type { OutboxRow } from '../../store/outbox.js';
import { NotificationListSchema, NOTIFICATIONS_PAGE, StreamEventSchema, type Notification } from '../../wire/control-api.js';
import { DELIVERY_STATES, type DeliveryState, type NotifyEvent } from '../../wire/notify-events.js';
import { HttpProblem, runOf, wholeNumber, type ControlRoute, type Request } from './route-types.js';
import type { EventStreams } from './event-stream.js';
import type { DaemonMetrics } from '../notify/metrics.js';
import type { DashboardSessions } from './dashboard/sessions.js';

export interface ObserveDeps {
  store: Store;
  metrics: DaemonMetrics;
  streams: EventStreams;
  /** A dashboard session's stream lives as long as the session. */
  sessions: Pick<DashboardSessions, 'isLive'>;
  /** A stream opened with the control token lives as long as that token (`berth token rotate` ends it). */
  tokens: { current(): string };
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function toNotification(row: OutboxRow): Notification {
  return {
    seq: row.seq,
    id: row.id,
    type: row.type as NotifyEvent,
    run_id: row.run_id,
    target: row.target,
    target_origin: new URL(row.target_url).origin,
    state: row.state,
    attempts: row.attempts,
    created_at: iso(row.created_at)!,
    next_at: row.state === 'pending' ? iso(row.next_at) : null,
    delivered_at: row.state === 'delivered' ? iso(row.finished_at) : null,
    last_error: row.last_error,
  };
}

export function observeRoutes(deps: ObserveDeps): ControlRoute[] {
  const { store, metrics, streams, sessions, tokens } = deps;
  return [
    {
      method: 'GET',
      path: '/metrics',
      auth: 'open',
      doc: {
        summary: 'Prometheus metrics (text exposition format); no token needed, like /healthz',
        responses: { 200: { description: 'the metrics', contentType: 'text/plain' } },
      },
      handle: async () => ({ status: 200, text: await metrics.text(), contentType: metrics.contentType }),
    },
    {
      method: 'GET',
      path: '/v1/notifications',
      doc: {
        summary: 'Notification deliveries, newest first, a page at a time',
        query: [
          { name: 'state', description: 'only deliveries in this state', schema: { type: 'string', enum: [...DELIVERY_STATES] } },
          {
            name: 'limit',
            description: `items per page (default ${NOTIFICATIONS_PAGE.default}, at most ${NOTIFICATIONS_PAGE.max}; 0 means the default)`,
            schema: { type: 'integer', minimum: 0 },
          },
          { name: 'before', description: 'the last seq of the previous page', schema: { type: 'integer', minimum: 0 } },
        ],
        responses: { 200: { description: 'a page of deliveries; an empty one ends the list', schema: NotificationListSchema } },
      },
      handle: ({ url }) => {
        const state = url.searchParams.get('state') ?? undefined;
        if (state !== undefined && !(DELIVERY_STATES as readonly string[]).includes(state)) {
          throw new HttpProblem(400, 'bad_request', `state must be one of ${DELIVERY_STATES.join(', ')}.`);
        }
        const limit = Math.min(wholeNumber(url.searchParams.get('limit'), 'limit') || NOTIFICATIONS_PAGE.default, NOTIFICATIONS_PAGE.max);
        const before = wholeNumber(url.searchParams.get('before'), 'before');
        return { status: 200, body: store.outbox.list(limit, before, state as DeliveryState | undefined).map(toNotification) };
      },
    },
    {
      method: 'GET',
      path: '/v1/events/stream',
      doc: {
        summary: 'Server-Sent Events: run events as they are stored, resumable with Last-Event-ID',
        description:
          "Each message: `id:` the event id, `data:` a StreamEvent. Without Last-Event-ID (or `after`), a stream of one run starts at its first event, and a stream of all runs with the events stored from now on. A stream of one run ends with an `end` message once the run has ended and its last event was sent. Heartbeat comment lines keep it open; it ends cleanly when the daemon stops. With `run` and `output=1`, the run's task output too while this daemon follows it over SSH: `event: output` messages without an id, each a StreamOutput (components), at most 64 KiB of lines a second per attempt.",
        query: [
          { name: 'run', description: "only this run's events", schema: { type: 'string' } },
          {
            name: 'output',
            description:
              "with `run` and `1`: the run's task output too, while this daemon follows it over SSH: `output` messages (no `id:`), each a StreamOutput",
            schema: { type: 'string', enum: ['1'] },
          },
          {
            name: 'after',
            description: 'send the events stored after this id (as Last-Event-ID does)',
            schema: { type: 'integer', minimum: 0 },
          },
        ],
        headers: [
          {
            name: 'Last-Event-ID',
            description: 'the id of the last event received: the stream resumes after it',
            schema: { type: 'string' },
          },
        ],
        responses: { 200: { description: 'the event stream', contentType: 'text/event-stream', itemSchema: StreamEventSchema } },
        errors: [404],
      },
      handle: (r: Request) => {
        const named = r.url.searchParams.get('run') || undefined;
        // An id, or a live run's name, as /v1/runs/{id} takes (./route-types.ts).
        const runId = named === undefined ? undefined : runOf(store, { params: { id: named } }).id;
        const header = r.req.headers['last-event-id'];
        const after =
          wholeNumber(Array.isArray(header) ? header[0] : header, 'Last-Event-ID') ??
          wholeNumber(r.url.searchParams.get('after'), 'after') ??
          streams.startOf(runId);
        const session = r.session;
        const opened = tokens.current();
        const alive = session ? () => sessions.isLive(session.sessionId) : () => tokens.current() === opened;
        const output = r.url.searchParams.get('output') === '1';
        streams.serve(r.req, r.res, { ...(runId === undefined ? {} : { runId }), after, alive, output });
        return { streamed: true };
      },
    },
  ];
}
