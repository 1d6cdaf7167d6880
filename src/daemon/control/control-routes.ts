// The control API's route table (the table src/http/router.ts matches), put together from the
// tables of each concern, each route a handler from a checked request to an answer or an
// HttpProblem. The guards that run before any of them (Host, Origin, token, content type) and the
// error envelope are ./control-api.ts's. The order is the router's: for a path taken under several
// methods, a 405's Allow header lists them in this order.
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { CostsReport } from '../../wire/control-api.js';
import { openApiDocument } from './control-openapi.js';
import type { ControlRoute } from './route-types.js';
import type { EventStreams } from './event-stream.js';
import type { ClusterState, DaemonMetrics } from '../notify/metrics.js';
import { observeRoutes } from './observe-routes.js';
import { dashboardRoutes } from './dashboard/dashboard-routes.js';
import { accountRoutes, type AccountPort } from './account-routes.js';
import type { DashboardSessions } from './dashboard/sessions.js';
import { daemonRoutes, type ControlTokens } from './daemon-routes.js';
import { submitRoute } from './submit-route.js';
import { offersRoute, type OffersDeps } from './offers-route.js';
import { runRoutes } from './run-routes.js';
import { blobRoute } from './blob-route.js';
import { runActionRoutes } from './run-action-routes.js';
import { costsRoute } from './costs-route.js';
import type { Supervisor } from '../runs/supervisor.js';
import type { Submissions } from '../runs/submission.js';
import type { RunLogs } from '../runs/run-logs.js';
import type { RunCounts } from '../runs/shared-runs.js';

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
  /** POST /v1/offers (`berth offers`): the runs' search, made now (./offers-route.ts). */
  offers?: OffersDeps;
  /** GET /v1/account and its checks (./account-routes.ts). */
  account?: AccountPort;
  /** The dashboard's sign-in codes and sessions; a token rotation ends them all. */
  sessions: DashboardSessions;
  /** The largest blob POST /v1/blobs/{sha256} takes, bytes (files.workdir_max_mb). */
  blobMaxBytes: number;
  /** Several daemons on one store: this daemon's part, shown by /healthz. */
  cluster?: () => ClusterState;
}

export function controlRoutes(deps: ControlApiDeps): ControlRoute[] {
  const routes: ControlRoute[] = [
    ...daemonRoutes(deps),
    submitRoute(deps),
    blobRoute({ store: deps.store, clock: deps.clock, blobMaxBytes: deps.blobMaxBytes }),
    offersRoute(deps.offers),
    ...runRoutes(deps),
    ...runActionRoutes(deps),
    costsRoute(deps),
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
