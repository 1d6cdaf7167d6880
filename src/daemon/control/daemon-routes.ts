// The control API's routes about the daemon itself, not a run: is it up and ready (/healthz), does
// it hold the control token (/v1/proof, checked by a client before it sends the token), and a new
// token (/v1/token/rotate).
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import { HealthSchema, ProofSchema, RotatedSchema, type Health } from '../../wire/control-api.js';
import { controlProof } from '../../wire/control-proof.js';
import type { ClusterState } from '../notify/metrics.js';
import type { RunCounts } from '../runs/shared-runs.js';
import type { DashboardSessions } from './dashboard/sessions.js';
import type { EventStreams } from './event-stream.js';
import { HttpProblem, type Answer, type ControlRoute } from './route-types.js';

export interface ControlTokens {
  current(): string;
  /** Makes, stores and switches to a new token; the old one stops working at once. */
  rotate(): string;
}

export interface DaemonRoutesDeps {
  store: Store;
  /** The counts /healthz shows, of this daemon's runs or of every daemon's on a shared store. */
  supervisor: RunCounts;
  tokens: ControlTokens;
  log: Logger;
  clock: Pick<Clock, 'now'>;
  startedAt: number;
  ready(): boolean;
  /** A token rotation ends every dashboard session, and their open event streams with them. */
  sessions: Pick<DashboardSessions, 'endAll'>;
  streams: Pick<EventStreams, 'recheck'>;
  cluster?: () => ClusterState;
}

export function daemonRoutes(deps: DaemonRoutesDeps): ControlRoute[] {
  const { store, supervisor, tokens, log } = deps;
  return [
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
  ];
}
