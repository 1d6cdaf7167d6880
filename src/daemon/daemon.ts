// The daemon. Start-up, in this order, so that nothing waits before the process is held and can be
// stopped: config (validated first) → BERTH_HOME made private, the lock, the store opened and
// checked against store.json → the control token → the listeners (./listeners.ts): the control API
// listens (and, with readiness.callback_url, the callback listener) and daemon.json is written
// (status works from here; submits are stored and wait) → the background start
// (./background-start.ts): every run resumes and the shared poller starts; its first round sweeps
// the account (adopt journaled creates, destroy orphans). A service that cannot be reached delays
// nothing: the poller keeps listing, with a warning per failure, while the runs go on.
//
// `stop()` is the graceful shutdown, valid at any point of that background step: no new work,
// in-flight calls abandoned safely (their journal rows let the next start reconcile), store flushed
// and closed, daemon.json removed.
//
// This file is the composition root: every service of the daemon is built here (`startDaemon`, and
// ./runs/compose-runs.ts for the runs and the money room; the servers by ./listeners.ts from what is
// wired here) and handed down; no room builds another's. What
// is acquired pushes its releaser on one last-in-first-out stack (src/releasers.ts): a start-up that
// fails half-way gives back what it had, newest first, and stop() gives back everything the same way
// (the background start and account checks, the listeners, the poller, the runs and their services,
// the notifier, the client, the store).
import { createMarketClient } from '../client/marketplace-client.js';
import type { ClientEvent } from '../client/events.js';
import { systemClock, type Clock } from '../clock.js';
import { loadConfig, type DeepPartial } from '../config/load.js';
import type { Config, RateGroup } from '../config/schema.js';
import { ConfigError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { openStore, type Store } from '../store/index.js';
import { describePgUrl, storeLocation, type StoreLocation } from '../store/store-url.js';
import { whileStoreBusy } from './store-wait.js';
import { checkAccount } from '../account/account-checks.js';
import { packageVersion } from '../package-path.js';
import type { ControlApiDeps } from './control/control-api.js';
import { openListeners } from './listeners.js';
import { startBackground } from './background-start.js';
import { DashboardSessions } from './control/dashboard/sessions.js';
import { costsReport } from './money/costs.js';
import { accountView } from './money/account-view.js';
import { ensureControlToken, writeNewControlToken } from '../config/control-token.js';
import { READY_KEY_NAME, ReadyTokens } from './inbound/ready-token.js';
import { EventStreams } from './control/event-stream.js';
import { DaemonMetrics } from './notify/metrics.js';
import { Notifier } from './notify/notifier.js';
import { notifyEventOf } from './notify/notify-events.js';
import { InstancePoller } from './fleet/poller.js';
import { StoreSharedView } from './cluster/shared-view.js';
import type { RunHooks } from './runs/run-hooks.js';
import type { Supervisor } from './runs/supervisor.js';
import { composeRuns } from './runs/compose-runs.js';
import { withReleasers } from '../releasers.js';
import { ClusterLoop } from './cluster/cluster-loop.js';
import { claimDaemonId, incarnation } from './cluster/daemon-id.js';
import { LeaseOwner } from './cluster/lease-owner.js';
import { agreeOnMoneyCaps } from './cluster/money-caps.js';
import { SoleOwner, type RunOwnership } from './cluster/run-ownership.js';
import { SharedPace } from './cluster/shared-pace.js';
import { checkConfigRelax } from '../job-spec/search-fields.js';

export interface DaemonOptions {
  configFile?: string | undefined;
  listen?: string | undefined;
  pretty?: boolean | undefined;
  env?: NodeJS.ProcessEnv;
  overrides?: DeepPartial<Config>;
  logger?: Logger;
  /** `--replace-store`: start a new store where berth.db is missing, empty or another store's. */
  replaceStore?: boolean | undefined;
  /** Time for everything the daemon schedules (tests pass a fake one); the wall clock by default. */
  clock?: Clock;
  /** Time between heartbeats of GET /v1/events/stream, ms (default 15 s). */
  streamHeartbeatMs?: number;
  /** Ends a start still waiting for berth.db (a stop asked for before the daemon was up): rejects with BerthError('aborted'). */
  signal?: AbortSignal;
}

export interface RunningDaemon {
  url: string;
  /** Where the readiness callback listener listens (http://HOST:PORT), when readiness.callback_url is set. */
  callbackListen?: string;
  /** The control token now (`berth token rotate` changes it). */
  readonly token: string;
  home: string;
  storeId: string;
  supervisor: Supervisor;
  /** Settles once the runs have resumed (or the daemon stopped first). */
  ready: Promise<void>;
  /** Rejects when the daemon cannot go on (its store is unreadable); it has stopped by then. */
  failed: Promise<never>;
  /** Where the webhook listener listens (`webhooks.listen`), if it is on. */
  webhookUrl?: string;
  /** Settles once the start-up account checks are done (logged, and an event on the runs they stop). */
  checked: Promise<void>;
  stop(): Promise<void>;
}

/** A comment line on every event stream this often keeps proxies and clients from closing it. */
const STREAM_HEARTBEAT_MS = 15_000;
/** How often event streams look for events other daemons stored (a shared store), ms. */
const STORE_POLL_MS = 250;

function logClientEvent(log: Logger, e: ClientEvent): void {
  switch (e.type) {
    case 'retry':
      log.debug({ clientEvent: e }, `retrying ${e.op} after ${e.code}`);
      break;
    case 'rate_limited':
      log.warn({ clientEvent: e }, `rate limited on ${e.group}; pausing ${e.pauseMs} ms`);
      break;
    case 'ambiguous_create':
      log.warn({ clientEvent: e }, 'a create has an unknown outcome; looking for its label');
      break;
    case 'resumed':
      log.debug({ clientEvent: e }, `${e.group} calls resume`);
      break;
    case 'malformed_records': {
      const what = [
        e.dropped > 0 ? `left out ${e.dropped}` : '',
        e.repaired > 0 ? `kept ${e.repaired} with unreadable fields set to null` : '',
      ]
        .filter(Boolean)
        .join(', ');
      log.warn(
        { clientEvent: e },
        `the service's answer to ${e.op} held records berth cannot read: ${what}; the rest of the answer is used`,
      );
      break;
    }
  }
}

function logStoreFindings(log: Logger, store: Store): void {
  if (store.replaced) {
    log.warn(
      { replaced: store.replaced, storeId: store.storeId },
      `started a new store in place of store ${store.replaced}: every instance labelled with it is destroyed`,
    );
  }
  if (store.restore) {
    log.warn(
      { held: store.restore.heldRunIds, dbGeneration: store.restore.dbGeneration, seenGeneration: store.restore.markGeneration },
      `${store.backend === 'postgres' ? 'the Postgres store' : 'berth.db'} is older than this home has seen (a restored backup): its ${store.restore.heldRunIds.length} live run(s) are held until \`berth resume RUN\` or \`berth cancel RUN\``,
    );
  }
}

/** openStore's options for where the config puts the store. */
function storeAt(location: StoreLocation): { file?: string; pg?: { url: string } } {
  if (location.kind === 'postgres') return { pg: { url: location.url } };
  return location.file ? { file: location.file } : {};
}

/** Which store, for the log: never a Postgres URL's password. */
function describeStore(url: string | null | undefined): string {
  const location = storeLocation(url);
  if (location.kind === 'postgres') return describePgUrl(location.url);
  return location.file ?? 'berth.db in BERTH_HOME';
}

/**
 * Which runs this daemon may act for on its store, built once here: every run on a store of its own
 * (SQLite, held alone through its lock); on a Postgres store, which several daemons may share, those
 * whose lease it holds (`owner`, also the cluster's view of this daemon).
 */
async function runOwnership(
  store: Store,
  deps: { config: Config; clock: Clock; log: Logger; home: string; signal: AbortSignal | undefined },
): Promise<{ owner: LeaseOwner | undefined; ownership: RunOwnership }> {
  if (store.backend !== 'postgres') return { owner: undefined, ownership: new SoleOwner(store) };
  const { config, clock, log } = deps;
  const leaseMs = config.cluster.lease_s * 1000;
  const self = incarnation();
  const owner = new LeaseOwner({
    store,
    clock,
    leaseMs,
    incarnation: self,
    // A copied home's daemon-id is another live daemon's: claimed for this process first.
    daemonId: await claimDaemonId({
      home: deps.home,
      store,
      clock,
      log,
      leaseMs,
      self,
      ...(deps.signal ? { signal: deps.signal } : {}),
    }),
  });
  // Caps of a shared store are the store's: a daemon whose budget differs from live daemons' is refused.
  agreeOnMoneyCaps({ store, caps: config.budget, daemonId: owner.daemonId, log });
  return { owner, ownership: owner };
}

export async function startDaemon(options: DaemonOptions = {}): Promise<RunningDaemon> {
  const { config, env } = loadConfig(
    { configFile: options.configFile, listen: options.listen, overrides: options.overrides },
    options.env ?? process.env,
  );
  checkConfigRelax(config.runs.relax);
  if (!env.apiKey) {
    throw new ConfigError(
      'No marketplace API key: set BERTH_API_KEY, or BERTH_API_KEY_FILE / service.api_key_file to a file holding it.',
      'service.api_key_file',
    );
  }
  const apiKey = env.apiKey;
  const log = options.logger ?? createLogger({ pretty: options.pretty });
  const clock = options.clock ?? systemClock;
  // Whatever is acquired from here on pushes how to give it back: a failure half-way releases what
  // was acquired so far, newest first, and stop() releases all of it the same way.
  return withReleasers(async (releasers) => {
    // Another program holding berth.db's write lock is waited out, here and in every start-up write.
    const storeWait = { clock, log, ...(options.signal ? { signal: options.signal } : {}) };
    const store = await whileStoreBusy(
      'open the store',
      () => openStore({ home: env.home, lock: true, replaceStore: options.replaceStore, ...storeAt(storeLocation(config.store.url)) }),
      storeWait,
    );
    releasers.push(() => store.close());
    const { owner, ownership } = await runOwnership(store, { config, clock, log, home: env.home, signal: options.signal });
    /** This daemon does the account-wide duties: always alone, and while it holds the leader's lease when shared. */
    const leads = () => owner === undefined || owner.leader;
    const startedAt = clock.now();
    const ensured = ensureControlToken(env.home);
    let token = ensured.token;
    if (ensured.replaced) log.info('made a new control token (control.token was missing, empty or damaged)');
    // Tokens of the readiness callback are signed with a key kept in berth.db: good across restarts.
    const readyKey = config.readiness.callback_url
      ? await whileStoreBusy('make the readiness key', () => store.secretKey(READY_KEY_NAME), storeWait)
      : undefined;
    log.info(
      { home: env.home, storeId: store.storeId, store: describeStore(config.store.url), baseUrl: config.service.base_url },
      'berth daemon starting',
    );
    logStoreFindings(log, store);
    const listEveryS = 1 / config.rate_limits.list.per_s;
    if (config.polling.interval_s < listEveryS) {
      log.warn(
        { interval_s: config.polling.interval_s, list_per_s: config.rate_limits.list.per_s },
        `polling.interval_s is shorter than rate_limits.list allows: instance lists will be ${listEveryS} s apart, not ${config.polling.interval_s} s`,
      );
    }

    const clusterState = owner
      ? () => ({ daemon_id: owner.daemonId, leader: owner.leader, owned_runs: owner.ownedCount, daemons: cluster?.daemonCount ?? 1 })
      : undefined;
    const metrics = new DaemonMetrics({
      store,
      clock,
      clientStats: () => client.stats(),
      ...(clusterState ? { cluster: clusterState } : {}),
    });
    // Daemons sharing the store share the key's limits: each call also waits for the group's next
    // moment free of every daemon's calls.
    const pace = owner ? new SharedPace({ store, owner, clock, log, rateLimits: config.rate_limits }) : undefined;
    const client = createMarketClient({
      baseUrl: config.service.base_url,
      apiKey,
      config,
      clock,
      ...(pace ? { pace: (group: RateGroup, signal?: AbortSignal) => pace.wait(group, signal) } : {}),
      onEvent: (e) => {
        // A 429 pauses the group for every daemon sharing the key, not only this one.
        if (e.type === 'rate_limited') pace?.hold(e.group, e.pauseMs);
        logClientEvent(log, e);
        metrics.clientEvent(e);
      },
    });
    releasers.push(() => client.close().catch(() => undefined));
    const notifier = new Notifier({
      store,
      clock,
      log,
      targets: config.notify,
      secrets: env.notifySecrets,
      settings: config.notifications,
      userAgent: `berth/${packageVersion()}`,
      onResult: (r) => metrics.notificationPosted(r),
      ...(owner ? { delivers: leads } : {}),
    });
    releasers.push(() => notifier.stop());
    // A run's notifications are written with its event; its metrics counted once that has committed.
    const hooks: RunHooks = {
      stored(run, e, logged, at) {
        const type = notifyEventOf(e);
        if (type) notifier.enqueue(run, type, { logId: logged.id, message: logged.message, data: logged.data }, at);
      },
      committed: (runId, events, at, detectionMs) => metrics.runCommitted(runId, events, at, detectionMs),
      noticed(run, type, logged, at) {
        notifier.enqueue(run, type, { logId: logged.id, message: logged.message, data: logged.data }, at);
      },
    };
    // The runs get their lists from the poller, and the poller reports to the supervisor.
    const poller = new InstancePoller({
      client,
      clock,
      intervalMs: config.polling.interval_s * 1000,
      // The list budget as this daemon's share of it is now (several daemons on one store split it).
      listSpacingMs: owner ? () => 1000 / client.stats().groups.list.perS : listEveryS * 1000,
      log,
      onSweepDone: (sweep) => metrics.sweepDone(sweep),
      // Several daemons: only the leader sweeps the account; the others read its lists from the store.
      ...(owner ? { shared: new StoreSharedView({ store, owner, clock }) } : {}),
    });
    const readyCallback =
      config.readiness.callback_url && readyKey ? { url: config.readiness.callback_url, tokens: new ReadyTokens(readyKey) } : undefined;
    // Released after the runs have stopped (pushed before them): the leases go once nothing acts for them.
    let cluster: ClusterLoop | undefined;
    releasers.push(() => {
      cluster?.stop();
      owner?.releaseAll();
    });
    const { supervisor, submissions, logs, notices, account, runsEverywhere } = composeRuns(
      {
        store,
        client,
        clock,
        lists: poller,
        config,
        log,
        apiKey,
        ...(readyCallback ? { readyCallback } : {}),
        hooks,
        ownership,
        leads,
      },
      releasers,
    );
    poller.subscribe(supervisor);
    /**
     * Daemons sharing one key share its limits: each takes 1/N of every group's rate, except the
     * list's, half of which is the leader's (it alone sweeps the account), the rest the others'.
     */
    const shareRates = () => {
      const n = cluster?.daemonCount ?? 1;
      const list = n === 1 ? 1 : cluster?.leader ? 1 / 2 : 1 / (2 * (n - 1));
      client.setRateShare(1 / n, { list });
    };
    if (owner) {
      cluster = new ClusterLoop({
        owner,
        runs: supervisor,
        clock,
        log,
        onLeader: () => shareRates(),
        onDaemons: (n) => {
          shareRates();
          log.info({ daemons: n }, `${n} daemon(s) share this store and the account's rate limits: this one uses 1/${n} of them`);
        },
      });
    }
    // Stopped before the runs: a list in flight is handed over while they still listen.
    releasers.push(() => poller.stop());

    let ready = false;
    const streams = new EventStreams({
      store,
      clock,
      heartbeatMs: options.streamHeartbeatMs ?? STREAM_HEARTBEAT_MS,
      // Other daemons' events reach the streams from the store, not from this daemon's commits.
      ...(owner ? { storePollMs: STORE_POLL_MS } : {}),
    });
    const controlApi: ControlApiDeps = {
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
            cancel: (runId) => supervisor.cancel(runId),
            resumeHeld: (runId) => supervisor.resumeHeld(runId),
          }
        : supervisor,
      submissions,
      logs,
      log,
      clock,
      startedAt,
      ready: () => ready,
      costs: (since, service) => costsReport(store, clock.now(), since, service ? (range) => client.charges(range) : undefined),
      account: {
        view: () => accountView({ store, now: clock.now(), account, config, stats: client.stats() }),
        checks: async (signal) => {
          const report = await checkAccount(client, config, clock.now(), { signal });
          return { ok: report.ok, checks: report.checks, missing: report.missing };
        },
      },
      metrics,
      streams,
      ...(clusterState ? { cluster: clusterState } : {}),
      tokens: {
        current: () => token,
        rotate: () => (token = writeNewControlToken(env.home)),
      },
    };
    const { url, callbackListen, webhookUrl } = await openListeners(
      {
        config,
        home: env.home,
        webhookSecret: env.webhookSecret,
        store,
        clock,
        log,
        controlApi,
        readyCallback,
        supervisor,
        account,
      },
      releasers,
    );
    log.info({ url }, 'berth daemon listening; resuming the runs');

    let stopping = false;
    let fail!: (err: unknown) => void;
    const failed = new Promise<never>((_, reject) => (fail = reject));
    failed.catch(() => undefined);
    const background = startBackground(
      {
        config,
        store,
        client,
        clock,
        log,
        supervisor,
        poller,
        notifier,
        cluster,
        account,
        notices,
        leads,
        stopping: () => stopping,
        onReady: () => (ready = true),
        onFatal: (reason) => void stop().finally(() => fail(reason)),
      },
      releasers,
    );

    let stopped: Promise<void> | undefined;
    const stop = () =>
      (stopped ??= (async () => {
        stopping = true;
        log.info('berth daemon stopping');
        await releasers.release();
        log.info('berth daemon stopped');
        log.flush?.();
      })());

    return {
      url,
      ...(callbackListen ? { callbackListen } : {}),
      get token() {
        return token;
      },
      home: env.home,
      storeId: store.storeId,
      supervisor,
      ready: background.ready,
      failed,
      checked: background.checked,
      ...(webhookUrl ? { webhookUrl } : {}),
      stop,
    };
  });
}
