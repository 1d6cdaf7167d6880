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
// This file is the composition root: every service of the daemon is built here (`startDaemon`, one
// named step after another; ./daemon-client.ts for the marketplace client and its metrics,
// ./control-api-deps.ts for what the control API serves, ./runs/compose-runs.ts for the runs and the
// money room; the servers by ./listeners.ts from what is wired here) and handed down; no room builds
// another's. What is acquired pushes its releaser on one last-in-first-out stack (src/releasers.ts): a start-up that
// fails half-way gives back what it had, newest first, and stop() gives back everything the same way
// (the background start and account checks, the listeners, the poller, the runs and their services,
// the notifier, the client, the store).
import { countText } from '../count-text.js';
import type { MarketplaceClient } from '../client/marketplace-client.js';
import { systemClock, type Clock } from '../clock.js';
import { loadConfig, type DeepPartial, type LoadedConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { ConfigError, toRunError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { openStore, type Store } from '../store/index.js';
import { describePgUrl, storeLocation, type StoreLocation } from '../store/store-url.js';
import { whileStoreBusy, type StoreWaitDeps } from './store-wait.js';
import { packageVersion } from '../package-path.js';
import type { ControlApiDeps } from './control/control-api.js';
import { controlApiDeps } from './control-api-deps.js';
import { daemonClient } from './daemon-client.js';
import { openListeners } from './listeners.js';
import { startBackground } from './background-start.js';
import { ensureControlToken, writeNewControlToken } from '../config/control-token.js';
import { READY_KEY_NAME, ReadyTokens } from './inbound/ready-token.js';
import type { ClusterState, DaemonMetrics } from './notify/metrics.js';
import { Notifier } from './notify/notifier.js';
import { notifyEventOf } from './notify/notify-events.js';
import { InstancePoller } from './instances/poller.js';
import { StoreSharedView } from './cluster/shared-view.js';
import type { RunHooks } from './runs/run-hooks.js';
import type { Supervisor } from './runs/supervisor.js';
import { composeRuns } from './runs/compose-runs.js';
import { openAttemptSession, sshAttemptLogins, sshTaskShells } from './task-end/task-shells.js';
import type { FollowTarget } from './task-end/task-follow.js';
import { outputsDir } from '../config/home.js';
import { withReleasers, type Releasers } from '../releasers.js';
import { ClusterLoop, type ClusterLoopDeps } from './cluster/cluster-loop.js';
import { claimDaemonId, incarnation } from './cluster/daemon-id.js';
import { LeaseOwner } from './cluster/lease-owner.js';
import { agreeOnMoneyCaps } from './cluster/money-caps.js';
import { SoleOwner, type RunOwnership } from './cluster/run-ownership.js';
import { checkConfigRelax } from '../job-spec/validate.js';
import { checkServiceUrl, confirmAccount, type BindingAtStart, type ConfirmDeps } from './service-binding.js';
import { makeSshKeys } from './ssh-keys.js';
import { billingNow } from './instances/holdings.js';

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
      `${store.backend === 'postgres' ? 'the Postgres store' : 'berth.db'} is older than this home has seen (a restored backup): its ${countText(store.restore.heldRunIds.length, 'live run')} ${store.restore.heldRunIds.length === 1 ? 'is' : 'are'} held until \`berth resume RUN\` or \`berth cancel RUN\``,
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

/** The config, validated once, and the marketplace key the daemon cannot start without. */
function loadDaemonConfig(options: DaemonOptions): LoadedConfig & { apiKey: string } {
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
  return { config, env, apiKey: env.apiKey };
}

/** The store where the config puts it, locked. */
function openDaemonStore(config: Config, home: string, replaceStore: boolean | undefined, storeWait: StoreWaitDeps): Promise<Store> {
  const at = storeAt(storeLocation(config.store.url));
  return whileStoreBusy('open the store', () => openStore({ home, lock: true, replaceStore, ...at }), storeWait);
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
  // Caps of a shared store are the store's, decided with this daemon's registration in one step:
  // a daemon whose budget is looser than the store's, while another is registered, is refused.
  agreeOnMoneyCaps({ store, caps: config.budget, daemonId: owner.daemonId, leaseMs, log });
  return { owner, ownership: owner };
}

/** The control token now (made anew when control.token is missing or damaged), and its rotation. */
function controlTokens(home: string, log: Logger): ControlApiDeps['tokens'] {
  const ensured = ensureControlToken(home);
  let token = ensured.token;
  if (ensured.replaced) log.info('made a new control token (control.token was missing, empty or damaged)');
  return {
    current: () => token,
    rotate: () => (token = writeNewControlToken(home)),
  };
}

/**
 * With readiness.callback_url: where onstarts post their attempt's token, and the tokens, signed with
 * a key kept in the store (good across restarts).
 */
async function readinessCallback(
  config: Config,
  store: Store,
  storeWait: StoreWaitDeps,
): Promise<{ url: string; tokens: ReadyTokens } | undefined> {
  const url = config.readiness.callback_url;
  if (!url) return undefined;
  const key = await whileStoreBusy('make the readiness key', () => store.secretKey(READY_KEY_NAME), storeWait);
  return key ? { url, tokens: new ReadyTokens(key) } : undefined;
}

/**
 * The runs wait for the account they rent on to be confirmed (./service-binding.ts); with none to
 * confirm they do not wait, and the account is recorded whenever it answers.
 */
function accountCheck(
  binding: BindingAtStart,
  deps: Pick<ConfirmDeps, 'store' | 'clock' | 'log'> & { client: Pick<MarketplaceClient, 'currentUser'> },
): (signal: AbortSignal) => Promise<void> {
  return (signal) => {
    const confirmed = confirmAccount(binding, { ...deps, currentUser: (options) => deps.client.currentUser(options), signal });
    if (binding.confirm !== null) return confirmed;
    confirmed.catch((err: unknown) => {
      if (!signal.aborted) deps.log.warn({ err: toRunError(err) }, 'could not read which account the API key belongs to');
    });
    return Promise.resolve();
  };
}

/** The shortest time between two instance lists that rate_limits.list allows, s. */
const listEveryS = (config: Config) => 1 / config.rate_limits.list.per_s;

/** What the start says of its store, and of a polling interval the list's rate limit will not allow. */
function logStart(log: Logger, config: Config, home: string, store: Store): void {
  log.info(
    { home, storeId: store.storeId, store: describeStore(config.store.url), baseUrl: config.service.base_url },
    'berth daemon starting',
  );
  logStoreFindings(log, store);
  const everyS = listEveryS(config);
  if (config.polling.interval_s < everyS) {
    log.warn(
      { interval_s: config.polling.interval_s, list_per_s: config.rate_limits.list.per_s },
      `polling.interval_s is shorter than rate_limits.list allows: instance lists will be ${everyS} s apart, not ${config.polling.interval_s} s`,
    );
  }
}

/** This daemon's part of a shared store (/metrics, /healthz); `cluster` gives the loop once it is built. */
function clusterStateOf(owner: LeaseOwner, cluster: () => ClusterLoop | undefined): () => ClusterState {
  return () => ({ daemon_id: owner.daemonId, leader: owner.leader, owned_runs: owner.ownedCount, daemons: cluster()?.daemonCount ?? 1 });
}

/** Delivers the outbox's notifications (its sender starts with the background start). */
function makeNotifier(deps: {
  config: Config;
  secrets: Record<string, string>;
  store: Store;
  clock: Clock;
  log: Logger;
  metrics: DaemonMetrics;
  /** Several daemons on one store: whether this one delivers now (it leads). */
  delivers: (() => boolean) | undefined;
}): Notifier {
  const { config, metrics, delivers } = deps;
  return new Notifier({
    store: deps.store,
    clock: deps.clock,
    log: deps.log,
    targets: config.notify,
    secrets: deps.secrets,
    settings: config.notifications,
    userAgent: `berth/${packageVersion()}`,
    onResult: (r) => metrics.notificationPosted(r),
    ...(delivers ? { delivers } : {}),
  });
}

/** A run's notifications are written with its event; its metrics counted once that has committed. */
function runHooks(notifier: Notifier, metrics: DaemonMetrics): RunHooks {
  return {
    stored(run, e, logged, at) {
      const type = notifyEventOf(e);
      if (type) notifier.enqueue(run, type, { logId: logged.id, message: logged.message, data: logged.data }, at);
    },
    committed: (runId, events, at, detectionMs) => metrics.runCommitted(runId, events, at, detectionMs),
    noticed(run, type, logged, at) {
      notifier.enqueue(run, type, { logId: logged.id, message: logged.message, data: logged.data }, at);
    },
  };
}

/** The shared instance lists every run reads. */
function makePoller(deps: {
  config: Config;
  store: Store;
  client: MarketplaceClient;
  clock: Clock;
  log: Logger;
  metrics: DaemonMetrics;
  owner: LeaseOwner | undefined;
}): InstancePoller {
  const { config, store, client, clock, metrics, owner } = deps;
  return new InstancePoller({
    client,
    clock,
    intervalMs: config.polling.interval_s * 1000,
    // The list budget as this daemon's share of it is now (several daemons on one store split it).
    listSpacingMs: owner ? () => 1000 / client.stats().groups.list.perS : listEveryS(config) * 1000,
    log: deps.log,
    onSweepDone: (sweep) => metrics.sweepDone(sweep),
    // Several daemons: only the leader sweeps the account; the others read its lists from the store.
    ...(owner ? { shared: new StoreSharedView({ store, owner, clock }) } : {}),
  });
}

/**
 * Daemons sharing one key share its limits: each takes 1/N of every group's rate, except the
 * list's, half of which is the leader's (it alone sweeps the account), the rest the others'.
 */
function shareRates(client: MarketplaceClient, cluster: Pick<ClusterLoop, 'daemonCount' | 'leader'>): void {
  const n = cluster.daemonCount;
  const list = n === 1 ? 1 : cluster.leader ? 1 / 2 : 1 / (2 * (n - 1));
  client.setRateShare(1 / n, { list });
}

/** Several daemons on one store: leases, take-over and who leads, and the key's rate limits shared. */
function makeClusterLoop(deps: {
  owner: LeaseOwner;
  runs: ClusterLoopDeps['runs'];
  client: MarketplaceClient;
  clock: Clock;
  log: Logger;
}): ClusterLoop {
  const { client, log } = deps;
  // Its callbacks come from its ticks (after `start`), never while it is being built.
  const loop: ClusterLoop = new ClusterLoop({
    owner: deps.owner,
    runs: deps.runs,
    clock: deps.clock,
    log,
    onLeader: () => shareRates(client, loop),
    onDaemons: (n) => {
      shareRates(client, loop);
      log.info({ daemons: n }, `${countText(n, 'daemon')} share this store and the account's rate limits: this one uses 1/${n} of them`);
    },
  });
  return loop;
}

/**
 * Where the running daemon is in its life: starting (the runs resume in the background: status works,
 * submits are stored and wait), ready once they have, stopping once stop() is asked for, by its caller
 * or because it cannot go on (then `failed` rejects once it has stopped). stop() is the graceful
 * shutdown, once however often it is asked for: everything acquired is given back, newest first.
 */
function daemonLife(releasers: Releasers, log: Logger, stillBilling: () => string | undefined) {
  let ready = false;
  let stopping = false;
  let stopped: Promise<void> | undefined;
  let fail!: (err: unknown) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined);
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      log.info('berth daemon stopping');
      // Stopping destroys nothing: say what goes on billing while no daemon drives it.
      const billing = stillBilling();
      if (billing) log.warn(billing);
      await releasers.release();
      log.info('berth daemon stopped');
      log.flush?.();
    })());
  return {
    ready: () => ready,
    stop,
    failed,
    /** What the background start reads and reports to. */
    background: {
      stopping: () => stopping,
      onReady: () => (ready = true),
      onFatal: (reason: unknown) => void stop().finally(() => fail(reason)),
    },
  };
}

export async function startDaemon(options: DaemonOptions = {}): Promise<RunningDaemon> {
  const { config, env, apiKey } = loadDaemonConfig(options);
  const log = options.logger ?? createLogger({ pretty: options.pretty });
  const clock = options.clock ?? systemClock;
  // Whatever is acquired from here on pushes how to give it back: a failure half-way releases what
  // was acquired so far, newest first, and stop() releases all of it the same way.
  return withReleasers(async (releasers) => {
    // Another program holding berth.db's write lock is waited out, here and in every start-up write.
    const storeWait = { clock, log, ...(options.signal ? { signal: options.signal } : {}) };
    const store = await openDaemonStore(config, env.home, options.replaceStore, storeWait);
    releasers.push(() => store.close());
    // The service this store rents on, before anything can call it (./service-binding.ts).
    const binding = await whileStoreBusy(
      'check the service this store rents on',
      () => checkServiceUrl(store, config.service.base_url, clock.now(), log),
      storeWait,
    );
    const { owner, ownership } = await runOwnership(store, { config, clock, log, home: env.home, signal: options.signal });
    // Registered with the caps: a start that fails from here on deletes its heartbeat (no stalled daemon left behind).
    if (owner) releasers.push(() => owner.releaseAll());
    /** This daemon does the account-wide duties: always alone, and while it holds the leader's lease when shared. */
    const leads = () => owner === undefined || owner.leader;
    const startedAt = clock.now();
    const tokens = controlTokens(env.home, log);
    const readyCallback = await readinessCallback(config, store, storeWait);
    logStart(log, config, env.home, store);

    // Several daemons on one store: the cluster loop, built once the runs are; read through `() => cluster`.
    let cluster: ClusterLoop | undefined;
    const clusterState = owner ? clusterStateOf(owner, () => cluster) : undefined;
    const { client, metrics } = daemonClient({ config, apiKey, store, clock, log, owner, clusterState });
    releasers.push(() => client.close().catch(() => undefined));
    // berth's SSH login key (docs/ssh.md): read when needed, put on the account at start.
    const sshKeys = makeSshKeys({ config, home: env.home, client, clock, log });
    const notifier = makeNotifier({ config, secrets: env.notifySecrets, store, clock, log, metrics, delivers: owner ? leads : undefined });
    releasers.push(() => notifier.stop());
    const hooks = runHooks(notifier, metrics);
    // The runs get their lists from the poller, and the poller reports to the supervisor.
    const poller = makePoller({ config, store, client, clock, log, metrics, owner });
    // Released after the runs have stopped (pushed before them): the leases go once nothing acts for them.
    releasers.push(() => {
      cluster?.stop();
      owner?.releaseAll();
    });
    // Logins to the runs' instances with berth's key, attached to an instance the account's may not have reached.
    const sessions = {
      store,
      loginKey: sshKeys.loginKey,
      prepare: async (t: FollowTarget, createdAt: number | null, signal: AbortSignal) =>
        sshKeys.access()?.prepareInstance(t.instanceId, createdAt ?? 0, signal),
    };
    const logins = sshAttemptLogins(sessions);
    const runs = composeRuns(
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
        // Its share of the key's rate as it is now (several daemons on one key split it).
        otherPerS: () => client.stats().groups.other.perS,
        // Running tasks followed over SSH; readiness by SSH a command run over a login.
        shells: sshTaskShells(logins),
        logins,
        // Tasks' outputs downloaded over the same logins, kept in files.outputs_dir.
        outputs: { shells: sshTaskShells(logins), dir: outputsDir(config, env.home) },
        // Or copied by the service to a cloud connection (outputs.cloud).
        cloud: client,
        // The same logins put a task's workdir into its container (../task-files/).
        uploadLogin: (t, signal) => openAttemptSession(sessions, t, signal),
        // A workdir cannot go up while the key cannot be used: refused at submit, nothing rented.
        loginBlocked: () => sshKeys.unusable(),
      },
      releasers,
    );
    const { supervisor, account, notices } = runs;
    poller.subscribe(supervisor);
    if (owner) cluster = makeClusterLoop({ owner, runs: supervisor, client, clock, log });
    // Stopped before the runs: a list in flight is handed over while they still listen.
    releasers.push(() => poller.stop());

    const life = daemonLife(releasers, log, () => stillBillingWords(store, clock.now()));
    const controlApi = controlApiDeps(
      { config, store, client, clock, log, runs, metrics, clusterState, tokens, startedAt, ready: life.ready, loginKey: sshKeys.loginKey },
      options.streamHeartbeatMs,
    );
    const { url, callbackListen, webhookUrl } = await openListeners(
      { config, home: env.home, webhookSecret: env.webhookSecret, store, clock, log, controlApi, readyCallback, supervisor, account },
      releasers,
    );
    log.info({ url }, 'berth daemon listening; resuming the runs');

    const background = startBackground(
      {
        ...{
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
          sshKeys,
          outputsDir: outputsDir(config, env.home),
          ...life.background,
        },
        beforeResume: accountCheck(binding, { store, client, clock, log }),
      },
      releasers,
    );
    return {
      url,
      ...(callbackListen ? { callbackListen } : {}),
      get token() {
        return tokens.current();
      },
      home: env.home,
      storeId: store.storeId,
      supervisor,
      ready: background.ready,
      failed: life.failed,
      checked: background.checked,
      ...(webhookUrl ? { webhookUrl } : {}),
      stop: life.stop,
    };
  });
}

/**
 * What goes on billing once this daemon stops (it destroys nothing on a stop: the runs resume at
 * the next start), as one sentence for the log; undefined when nothing bills. Read from the store,
 * which on a shared store counts every daemon's instances, as the service bills them.
 */
function stillBillingWords(store: Store, now: number): string | undefined {
  let live: ReturnType<typeof billingNow>;
  try {
    live = billingNow(store, now);
  } catch {
    return undefined; // a store that cannot be read now: the stop goes on without the summary
  }
  if (live.n === 0) return undefined;
  const listed = live.each
    .slice(0, 10)
    .map((i) => `instance ${i.instanceId ?? '?'} of run ${i.runId} ($${i.usdPerHour.toFixed(3)}/h)`)
    .join(', ');
  const more = live.n > 10 ? ` and ${live.n - 10} more` : '';
  return (
    `${countText(live.n, 'instance')} still ${live.n === 1 ? 'bills' : 'bill'} $${live.usdPerHour.toFixed(3)}/h after this stop: ${listed}${more}. ` +
    'They are not destroyed: start `berth daemon` again to drive their runs, or `berth cancel RUN` (with the daemon running) to end them.'
  );
}
