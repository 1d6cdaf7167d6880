// What the control API serves, wired by the composition root (./daemon.ts) from the services it
// built, and handed to the listeners (./listeners.ts): the runs (on a shared store, every daemon's
// counts), the event streams, the dashboard's sessions, costs, the account and the control token.
import type { MarketplaceClient } from '../client/marketplace-client.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config/schema.js';
import type { BerthKey } from '../ssh/key-pair.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import { checkAccount } from '../account/account-checks.js';
import type { ControlApiDeps } from './control/control-api.js';
import { DashboardSessions } from './control/dashboard/sessions.js';
import { EventStreams, type EventStreamsDeps } from './control/event-stream.js';
import { accountView } from './money/account-view.js';
import type { AccountWatch } from './money/account-watch.js';
import { costsReport } from './money/costs.js';
import type { ClusterState, DaemonMetrics } from './notify/metrics.js';
import type { RunCounts } from './runs/shared-runs.js';
import type { CreateGate } from './money/create-gate.js';

/** A comment line on every event stream this often keeps proxies and clients from closing it. */
const STREAM_HEARTBEAT_MS = 15_000;
/** How often event streams look for events other daemons stored (a shared store), ms. */
const STORE_POLL_MS = 250;

export interface ControlApiWiring {
  config: Config;
  store: Store;
  client: MarketplaceClient;
  clock: Clock;
  log: Logger;
  /** The runs room's services (./runs/compose-runs.ts). */
  runs: {
    /** The runs driven here. */
    supervisor: ControlApiDeps['supervisor'];
    /** A store several daemons share: the counts of every daemon's runs. */
    runsEverywhere: RunCounts | undefined;
    submissions: ControlApiDeps['submissions'];
    logs: ControlApiDeps['logs'];
    /** Followed tasks' output, line by line, for the event streams that ask for it. */
    output: EventStreamsDeps['output'];
    account: Pick<AccountWatch, 'credit' | 'low'>;
    /** The caps creates are held to (a shared store's are the store's). */
    gate: Pick<CreateGate, 'caps'>;
  };
  metrics: DaemonMetrics;
  /** Several daemons on one store: this daemon's part, shown by /healthz. */
  clusterState: (() => ClusterState) | undefined;
  tokens: ControlApiDeps['tokens'];
  startedAt: number;
  ready: () => boolean;
  /** berth's SSH login key, for the account checks (./ssh-keys.ts). */
  loginKey: () => BerthKey;
}

/** `streamHeartbeatMs`: time between heartbeats of GET /v1/events/stream, ms (default 15 s). */
export function controlApiDeps(wiring: ControlApiWiring, streamHeartbeatMs: number | undefined): ControlApiDeps {
  const { config, store, client, clock, clusterState } = wiring;
  const { supervisor, runsEverywhere, account } = wiring.runs;
  const streams = new EventStreams({
    store,
    clock,
    heartbeatMs: streamHeartbeatMs ?? STREAM_HEARTBEAT_MS,
    output: wiring.runs.output,
    // Other daemons' events reach the streams from the store, not from this daemon's commits.
    ...(clusterState ? { storePollMs: STORE_POLL_MS } : {}),
  });
  return {
    store,
    sessions: new DashboardSessions(clock),
    // On a shared store /healthz counts every daemon's runs (this daemon's are in its `cluster` part).
    supervisor: runsEverywhere
      ? {
          get liveCount() {
            return runsEverywhere.liveCount;
          },
          get activeCount() {
            return runsEverywhere.activeCount;
          },
          cancel: (runId, opts) => supervisor.cancel(runId, opts),
          resumeHeld: (runId) => supervisor.resumeHeld(runId),
        }
      : supervisor,
    submissions: wiring.runs.submissions,
    blobMaxBytes: config.files.workdir_max_mb * 1024 * 1024,
    logs: wiring.runs.logs,
    log: wiring.log,
    clock,
    startedAt: wiring.startedAt,
    ready: wiring.ready,
    costs: (since, service) => costsReport(store, clock.now(), since, service ? (range) => client.charges(range) : undefined),
    // Through the client, so through its rate limiter: the searches of `berth offers` count with the runs'.
    offers: { config, search: (query, signal) => client.searchOffers(query, { signal }) },
    account: {
      view: () => {
        // The caps held to: a shared store's, which may not be this daemon's config's.
        const caps = wiring.runs.gate.caps();
        const budget = { max_usd_per_hour: caps.maxUsdPerHour, max_usd_per_day: caps.maxUsdPerDay };
        return accountView({ store, now: clock.now(), account, config: { account: config.account, budget }, stats: client.stats() });
      },
      checks: async (signal) => {
        const report = await checkAccount(client, config, clock.now(), { signal, loginKey: wiring.loginKey });
        return { ok: report.ok, checks: report.checks, missing: report.missing };
      },
    },
    metrics: wiring.metrics,
    streams,
    ...(clusterState ? { cluster: clusterState } : {}),
    tokens: wiring.tokens,
  };
}
