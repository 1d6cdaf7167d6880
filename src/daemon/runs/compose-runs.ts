// The runs and what may be spent on them, built for the composition root (../daemon.ts, which
// calls this once and hands in the store, the service, the shared lists and this daemon's
// ownership): the services of this room and of the money room, the run machine with its actors and
// the supervisor that drives them. No service of a room above this one is built here.
import { destroyConfirmS, reconcileGraceMs, taskProbeIntervalMs } from '../../config/durations.js';
import type { MarketClient, MarketplaceClient } from '../../client/types.js';
import { BerthError } from '../../errors.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config/schema.js';
import type { RunPlan } from '../../job-spec/run-plan.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import type { Logger } from '../../logger.js';
import type { Releasers } from '../../releasers.js';
import type { Store } from '../../store/index.js';
import { storeCaps } from '../cluster/money-caps.js';
import type { RunOwnership } from '../cluster/run-ownership.js';
import type { InstanceLists } from '../instances/poller.js';
import type { ReadyTokens } from '../inbound/ready-token.js';
import { AccountWatch } from '../money/account-watch.js';
import { CreateGate } from '../money/create-gate.js';
import { MoneyGuard } from '../money/money-guard.js';
import { PriceIncreaseWatch } from '../money/price-increases.js';
import { AttemptJournal } from './attempt-journal.js';
import { FailureLogs, keptTail } from '../task-end/failure-logs.js';
import { IdleWatch } from '../task-end/idle-watch.js';
import { LogSecrets } from '../task-end/log-secrets.js';
import { MachineQuarantine } from './machine-quarantine.js';
import { OfferClaims } from './offer-claims.js';
import { Reconciler } from '../instances/reconciler.js';
import { WarmPool } from '../instances/warm-pool.js';
import { provideRunMachine } from './run-driver.js';
import type { RunHooks } from './run-hooks.js';
import { RunLogs } from './run-logs.js';
import { RunNotices } from './run-notices.js';
import { SolePlacement } from './run-placement.js';
import { SharedPlacement } from './shared-placement.js';
import { sharedRuns } from './shared-runs.js';
import { StoreClaims } from './store-claims.js';
import { Submissions, type SubmissionsDeps } from './submission.js';
import { Supervisor } from './supervisor.js';
import { TaskLogs } from '../task-end/task-logs.js';
import { TaskFollow, type TaskShells } from '../task-end/task-follow.js';
import { GroupCommit } from '../../store/group-commit.js';
import type { AttemptLogins } from '../task-end/task-shells.js';
import { WorkdirUploads, type WorkdirUploadsDeps as UploadLogins } from '../task-files/workdir-uploads.js';
import { LiveOutput } from '../task-end/live-output.js';
import { TaskProbe } from '../task-end/task-probe.js';
import { OutputsDownload } from '../task-files/outputs-download.js';
import { OutputsCloud } from '../task-files/outputs-cloud.js';
import { stopTask, TASK_STOP_GRACE_S } from '../task-end/task-stop.js';
import { startStopped } from '../task-end/stopped-start.js';
import { cloudCopyFailed, cloudCopyFinished } from '../../client/cloud-copy-status.js';
import type { CollectInput, CollectOutput } from '../../../machines/run-machine.js';
import type { FileShells } from '../task-end/task-shells.js';
import { hostname } from 'node:os';

/**
 * How long one read of the offers other daemons' runs are on serves this daemon's searches: short
 * next to a create's few seconds on an offer, and one query a second however many runs search.
 */
const STORE_CLAIMS_MAX_AGE_MS = 1000;

/** Lines of the log kept when a followed task had no out-file to read (as a task's end read keeps). */
const FOLLOW_KEEP_LINES = 200;

/** Running tasks followed over SSH at once by default (`runs.task_follow_max`): the budget docs/tasks.md states. */
const TASK_FOLLOW_MAX = 200;

/** What the runs are built from: the store, the service, the shared lists and the settings. */
export interface RunsDeps {
  store: Store;
  client: MarketClient;
  /**
   * This daemon's rate of the `other` group now, calls/s (the client's stats: its share of the key's
   * when several daemons share one); the configured rate when absent. The task probe takes half.
   */
  otherPerS?: () => number;
  clock: Clock;
  lists: InstanceLists;
  config: Config;
  log: Logger;
  /** The marketplace key: scrubbed from the container logs berth keeps. */
  apiKey: string;
  /** Set when readiness.callback_url is: where onstarts post their attempt's token, and its tokens. */
  readyCallback?: { url: string; tokens: ReadyTokens };
  /** Notifications and metrics, handed to every run's driver. */
  hooks?: RunHooks;
  /** Which runs this daemon may act for (a SQLite store: all; a shared Postgres store: those it holds). */
  ownership: RunOwnership;
  /** Whether this daemon does the account-wide duties now (sweep's reconcile, credit reads). */
  leads?: () => boolean;
  /** Logins to task instances, where berth has a key: running tasks are then followed over SSH (../task-end/task-follow.ts). */
  shells?: TaskShells;
  /** Where tasks' outputs are kept (files.outputs_dir resolved), and the logins that download them (../task-files/outputs-download.ts). */
  outputs?: { shells: FileShells; dir: string };
  /** The service's cloud copy, for outputs with a cloud destination (../task-files/outputs-cloud.ts). */
  cloud?: Pick<MarketplaceClient, 'listCloudConnections' | 'startCloudCopy'>;
  /** The same logins, for readiness by SSH: a command run once the banner answers (./ssh-login.ts). */
  logins?: AttemptLogins;
  /** The same logins for the workdir uploads (../task-files/workdir-uploads.ts); none: no workdir reaches a task. */
  uploadLogin?: UploadLogins['login'];
  /** Why berth's key cannot be used now (a workdir is then refused at submit: ./submission.ts). */
  loginBlocked?: SubmissionsDeps['loginBlocked'];
}

/**
 * Builds the runs and what may be spent on them: the attempt journal, offer claims, machine
 * quarantine, reconciler, account watch, create gate, money guard, failure logs, task logs, idle watch, the run machine
 * with its actors, the supervisor that drives them, and beside it the submissions, the run logs and the
 * daemon's notices. Each pushes its releaser; the supervisor's goes last, so it stops its runs before
 * the services they use stop.
 */
export function composeRuns(deps: RunsDeps, releasers: Releasers) {
  const { store, client, clock, config, log, readyCallback } = deps;
  const { ownership } = deps;
  const leads = deps.leads ?? (() => true);
  // The one place the live runs' plans are kept: the supervisor fills it, the others read it (RunSpecs).
  const specs = new Map<string, RunPlan>();
  const journal = new AttemptJournal(store, ownership);
  // On a shared store, the offers other daemons' runs are on too (read from the attempts table).
  const claims = new OfferClaims(
    ownership.shared ? new StoreClaims({ attempts: store.attempts, clock, maxAgeMs: STORE_CLAIMS_MAX_AGE_MS }) : undefined,
  );
  const quarantine = new MachineQuarantine(config.runs.machine_quarantine_s * 1000, clock);
  // Warm instances (issue #51): kept at a clean end, taken instead of a create, released at idle_s.
  const warm = new WarmPool({
    store,
    clock,
    log,
    planOf: (runId) => specs.get(runId),
    capsRefuse: (dph, seconds) => gate.warmHold(dph, seconds),
  });
  const reconciler = new Reconciler({
    warm,
    store,
    journal,
    client,
    clock,
    log,
    // From the store, not the drivers: the startup reconcile runs before any driver is resumed.
    isLive: (runId) => store.runs.get(runId)?.ended_at === null,
    sweptStores: new Set([...store.formerStoreIds, ...config.store.sweep_store_ids].filter((id) => id !== store.storeId)),
    // An orphan still listed this long after its destroy was sent gets another, as a run's instance does.
    retryMs: destroyConfirmS(config) * 1000,
  });
  releasers.push(() => reconciler.stop());
  const notices = new RunNotices({ store, clock, log, hooks: deps.hooks });
  const runs = (): Supervisor => supervisor;
  const { account, gate, prices, guard } = composeMoney(deps, { specs, leads, notices, runs }, releasers);
  const { logSecrets, failureLogs, taskLogs, probeLogs } = composeLogs(deps, { specs, journal }, releasers);
  const idle = new IdleWatch({
    warnBeforeMs: config.runs.idle_warning_s * 1000,
    warn: (runId, message, data) => notices.notice(runId, 'idle.warning', message, data),
    expire: (runId, reason) => supervisor.expire(runId, reason),
  });
  // A followed task's lines, to the event streams that watch its run (the control API's).
  const output = new LiveOutput(clock);
  const follow = composeFollow(deps, { logSecrets, taskLogs, journal, runs, output }, releasers);
  const uploads = composeUploads(deps, { specs, runs }, releasers);
  const taskProbe = new TaskProbe({
    clock,
    log,
    // The follower first: a task new to both is tried over SSH before its log is read.
    tasks: () => {
      follow?.tick();
      return supervisor.taskProbeTargets();
    },
    // A task followed over SSH is not read through the logs endpoint while the follow works.
    ...(follow ? { followed: (t) => follow.followed(t) } : {}),
    readEnd: (input, signal) => probeLogs.readEnd(input, signal),
    ended: (runId, n, end) => supervisor.taskEnded(runId, n, end),
    intervalMs: taskProbeIntervalMs(config),
    otherPerS: deps.otherPerS ?? (() => config.rate_limits.other.per_s),
  });
  releasers.push(() => taskProbe.stop());
  const outputs = composeOutputs(deps, specs);
  const machine = provideRunMachine({
    failureLogs,
    taskLogs,
    ...(outputs ? { outputs: { collect: (input, signal) => outputs.collect(input, signal), waitS: config.files.outputs_timeout_s } } : {}),
    logSecrets,
    serviceUrl: config.service.base_url,
    uploadTimeoutS: config.files.upload_timeout_s,
    ...(readyCallback ? { readyCallback } : {}),
    money: { guard, gate },
    warm,
    quarantine,
    client,
    clock,
    journal,
    lists: deps.lists,
    claims,
    reconcileGraceMs: reconcileGraceMs(config),
    specs,
    searchShareMs: config.runs.search_share_s * 1000,
    offersPerSearch: config.runs.gone_offers_per_search,
    ownership,
    ...(deps.logins ? { logins: deps.logins } : {}),
  });
  const supervisor: Supervisor = new Supervisor({
    warm,
    store,
    clock,
    config,
    log,
    specs,
    machine,
    journal,
    claims,
    quarantine,
    // The adoption and the orphans are the leading daemon's (every daemon's sweeps still tell its runs of losses).
    reconciler: { sweep: (instances, startedAt) => (leads() ? reconciler.sweep(instances, startedAt) : undefined) },
    guard,
    gate,
    prices,
    idle,
    failureLogs,
    ...(deps.hooks ? { hooks: deps.hooks } : {}),
    ownership,
    // A shared store's runs are taken through leases; a store of its own drives every run.
    placement: (runs) =>
      ownership.shared
        ? new SharedPlacement(runs, { store, clock, config, log, hooks: deps.hooks, ownership })
        : new SolePlacement(runs, { store, clock, hooks: deps.hooks }),
  });
  releasers.push(() => supervisor.stop());
  // Submissions that come together share one commit (./submission.ts).
  const submitted = new GroupCommit({ transaction: (fn) => store.transaction(fn) });
  const submissions = new Submissions({
    store,
    clock,
    config,
    log,
    intake: supervisor,
    commit: (write) => submitted.add(write),
    ...(deps.loginBlocked ? { loginBlocked: deps.loginBlocked } : {}),
  });
  // A run another daemon drives: its instance is read from the store.
  const runsEverywhere = ownership.shared ? sharedRuns({ store, local: supervisor }) : undefined;
  const logs = new RunLogs({
    store,
    taskLogs,
    instanceOf: (runId) => (runsEverywhere ?? supervisor).instanceOf(runId),
    ...(follow ? { streaming: (t) => follow.streaming(t), followed: (t) => follow.followed(t) } : {}),
  });
  // Its own loop from now on: it reads the tasks the runs say run, whatever the poller does.
  taskProbe.start();
  follow?.start();
  uploads?.start();
  return { supervisor, submissions, logs, notices, account, gate, guard, runsEverywhere, output };
}

/**
 * The money room's services for the runs: the account's credit, the daemon-wide caps a create waits
 * for, the answer to a host's price increase and each run's runtime and budget limits. They ask the
 * runs (built after them) through `runs`. Each pushes its releaser, in this order.
 */
function composeMoney(
  deps: RunsDeps,
  ctx: { specs: RunSpecs; leads: () => boolean; notices: RunNotices; runs: () => Supervisor },
  releasers: Releasers,
) {
  const { store, client, clock, config, log, ownership } = deps;
  const { specs, leads, notices, runs } = ctx;
  // The account's credit, read at a slow cadence (the create gate holds creates while it is low).
  const account = new AccountWatch({
    client,
    clock,
    log,
    minCreditUsd: config.account.min_credit_usd,
    intervalMs: config.account.check_interval_s * 1000,
    heldIntervalMs: config.account.held_check_interval_s * 1000,
    onChange: () => gate.wake(),
    ...(ownership.shared
      ? {
          shared: {
            leads,
            save: (usd: number | null) => store.sharedCredit.save(usd, clock.now()),
            load: () => store.sharedCredit.load(),
            request: () => store.sharedCredit.requestRead(),
            requests: () => store.sharedCredit.readRequests(),
          },
        }
      : {}),
  });
  releasers.push(() => account.stop());
  // A shared store's caps are the store's (../cluster/money-caps.ts), read at each decision.
  const caps = ownership.shared ? storeCaps({ store, caps: config.budget, log }) : () => config.budget;
  const gate = new CreateGate({
    store,
    clock,
    log,
    account,
    caps: () => {
      const c = caps();
      return { maxUsdPerHour: c.max_usd_per_hour ?? null, maxUsdPerDay: c.max_usd_per_day ?? null };
    },
    recheckMs: config.polling.interval_s * 1000,
    specs,
    endRequested: (runId) => runs().endRequested(runId),
    ...(ownership.shared
      ? {
          serialize: <T>(fn: () => T): T =>
            store.transaction(() => {
              store.serializeCaps();
              return fn();
            }),
        }
      : {}),
  });
  releasers.push(() => gate.stop());
  const prices = new PriceIncreaseWatch({
    client,
    clock,
    log,
    policy: config.price_increases.policy,
    intervalMs: config.price_increases.check_interval_s * 1000,
    holders: () => runs().holders(),
    daemonCapHold: (extra) => gate.increaseHold(extra),
    note: (runId, type, message, data) =>
      store.transaction(() =>
        store.events.append({ runId, at: clock.now(), type, message, data, foldKey: `${type}:${String(data['pendingId'])}` }),
      ),
  });
  releasers.push(() => prices.stop());
  const guard: MoneyGuard = new MoneyGuard({
    store,
    clock,
    log,
    specs,
    expire: (runId, reason) => runs().expire(runId, reason),
    leadMs: config.polling.interval_s * 1000,
    warn: (runId, message, data) => notices.warnBudget(runId, message, data),
  });
  releasers.push(() => guard.stop());
  return { account, gate, prices, guard };
}

/**
 * The task follower, when the daemon can log in to instances (`shells`) and may follow any
 * (`runs.task_follow_max` > 0): the running tasks' output and end read over SSH. Its offset and the
 * tail kept are one write; its one event per attempt goes to the run's events.
 */
function composeFollow(
  deps: RunsDeps,
  ctx: { logSecrets: LogSecrets; taskLogs: TaskLogs; journal: AttemptJournal; runs: () => Supervisor; output: LiveOutput },
  releasers: Releasers,
) {
  const { store, clock, config, log, shells } = deps;
  const max = config.runs.task_follow_max ?? TASK_FOLLOW_MAX;
  if (!shells || max === 0) return undefined;
  const { logSecrets, taskLogs, journal, runs, output } = ctx;
  const ends = new GroupCommit({ transaction: (fn) => store.transaction(fn) });
  const follow = new TaskFollow({
    clock,
    log,
    shells,
    targets: () => runs().taskProbeTargets(),
    stored: (t) => {
      const a = store.attempts.get(t.runId, t.n);
      return a?.follow_offset == null ? { offset: 0, tail: null } : { offset: a.follow_offset, tail: a.log_tail };
    },
    save: (t, kept) => store.transaction(() => store.attempts.setFollowed(t.runId, t.n, kept.offset, kept.tail)),
    output: (t, from, to, text) => output.publish(t, from, to, text),
    scrub: (t, text) => logSecrets.scrubberFor(t.runId, t.n, t.instanceId).scrub(text),
    ended: (runId, n, end) => runs().taskEnded(runId, n, end),
    commitEnd: (write) => ends.add(write),
    say: (t, message, data) =>
      store.transaction(() => store.events.append({ runId: t.runId, at: clock.now(), type: 'task.ssh_fallback', message, data })),
    max,
    keepLog: async (t, signal) => {
      const got = await taskLogs.readLog(t, FOLLOW_KEEP_LINES, signal);
      if (got) journal.logTail(t.runId, t.n, keptTail(got.text, got.cut));
    },
  });
  releasers.push(() => follow.stop());
  return follow;
}

/** Between two starts of a stopped instance that stays stopped (a start queued or refused), ms. */
const STOPPED_RETRY_MS = 60_000;

/**
 * How a task's outputs are taken before its destroy: downloaded over SFTP (where berth logs in), or
 * copied by the service to a cloud connection when the spec says so. Undefined: neither is possible.
 */
function composeOutputs(deps: RunsDeps, specs: RunSpecs) {
  const { store, clock, config, client, lists } = deps;
  const host = hostname();
  const download =
    deps.outputs &&
    new OutputsDownload({
      store,
      shells: deps.outputs.shells,
      clock,
      specs,
      dir: deps.outputs.dir,
      maxBytes: config.files.outputs_max_mb * 1024 * 1024,
      host,
      say: (runId, type, message, data) => store.transaction(() => store.events.append({ runId, at: clock.now(), type, message, data })),
    });
  const copy = deps.cloud;
  const cloud =
    copy &&
    new OutputsCloud({
      store,
      clock,
      specs,
      host,
      ownership: deps.ownership,
      lookEveryMs: config.polling.interval_s * 1000,
      cloud: {
        setInstanceState: (id, state, options) => client.setInstanceState(id, state, options),
        listCloudConnections: (options) => copy.listCloudConnections(options),
        startCloudCopy: (request, options) => copy.startCloudCopy(request, options),
        // One look through the shared lists; a list that fails is no answer this time.
        statusMsg: (id, signal) =>
          lists.lookAt(id, clock.now(), signal).then(
            (i) => (i === null ? null : (i.status_msg ?? '')),
            () => undefined,
          ),
        finished: cloudCopyFinished,
        failed: cloudCopyFailed,
      },
    });
  if (!download && !cloud) return undefined;
  const shells = deps.outputs?.shells;
  return {
    collect: async (input: CollectInput, signal: AbortSignal): Promise<CollectOutput> => {
      // A cancel or a limit while the task ran (issue #48): stopped first, TERM then KILL, so that what
      // it wrote is whole. Where berth cannot log in a cloud copy's stop of the instance stops it.
      if (input.stopTask && shells && !input.stopped) {
        const stopped = await stopTask(shells, input, signal);
        deps.log
          .child({ runId: input.runId })
          .info(
            stopped === 'stopped'
              ? `attempt #${input.n}: task stopped (TERM, then KILL after ${TASK_STOP_GRACE_S} s) before its outputs are taken`
              : `attempt #${input.n}: task not stopped before its outputs are taken (${stopped === 'no_pid' ? 'its wrapper left no pid' : stopped.failed})`,
          );
      }
      // Stopped by its task while no daemon took them (the daemon was away): started again first (issue #48).
      if (input.stopped && shells && !specs.get(input.runId)?.collect?.cloud) {
        const why = await startStopped(
          {
            clock,
            start: (id, s) => {
              // A start is a path to money: only the daemon that owns the run sends it.
              deps.ownership.check(input.runId);
              return client.setInstanceState(id, 'running', { signal: s });
            },
            lookAt: (id, after, s) => lists.lookAt(id, after, s),
            shells,
            lookEveryMs: config.polling.interval_s * 1000,
            retryEveryMs: STOPPED_RETRY_MS,
            keptStopped: (why) =>
              store.transaction(() =>
                store.events.append({
                  runId: input.runId,
                  at: clock.now(),
                  type: 'outputs.kept_stopped',
                  message: `attempt #${input.n}: instance ${input.instanceId}, stopped by its task before its outputs were taken, is kept stopped (its disk billing) while berth starts it again: ${why}; it is destroyed, its outputs failed, if it does not start by ${new Date(input.until - config.files.outputs_timeout_s * 1000).toISOString()} (files.stopped_keep_s)`,
                  data: { n: input.n, instanceId: input.instanceId, why },
                }),
              ),
          },
          // The download needs files.outputs_timeout_s of the collection's deadline once it runs.
          { ...input, keepUntil: input.until - config.files.outputs_timeout_s * 1000 },
          signal,
        );
        if (why === null) input = { ...input, stopped: false };
        else deps.log.child({ runId: input.runId }).warn(`attempt #${input.n}: outputs not taken from its stopped instance: ${why}`);
      }
      if (specs.get(input.runId)?.collect?.cloud) {
        if (!cloud) throw new BerthError('bad_request', 'this daemon has no cloud copy to take the outputs with');
        return cloud.collect(input, signal);
      }
      if (!download) throw new BerthError('ssh_key', 'berth has no SSH login to take the outputs with');
      return download.collect(input, signal);
    },
  };
}

/**
 * The workdir uploads: every running attempt of a task with a workdir gets it over SSH before its
 * task starts (the archive from the store); their events go to the run's events.
 */
function composeUploads(deps: RunsDeps, ctx: { specs: RunSpecs; runs: () => Supervisor }, releasers: Releasers) {
  const { store, clock, config, log, uploadLogin } = deps;
  if (!uploadLogin) return undefined;
  const uploads = new WorkdirUploads({
    clock,
    log,
    targets: () => ctx.runs().taskProbeTargets(),
    workdirOf: (runId) => {
      const task = ctx.specs.get(runId)?.task;
      return task?.workdirSha256 ? { sha256: task.workdirSha256, dir: task.dir } : null;
    },
    archive: (sha256) => store.blobs.get(sha256),
    login: uploadLogin,
    say: (t, type, message, data) => store.transaction(() => store.events.append({ runId: t.runId, at: clock.now(), type, message, data })),
    // The wrapper's marker would say `stage=workdir` after files.upload_timeout_s: said now instead.
    givenUp: (t, why) => ctx.runs().taskEnded(t.runId, t.n, { exitCode: 1, onstart: false, workdir: true, workdirRefused: why }),
    timeoutMs: config.files.upload_timeout_s * 1000,
  });
  releasers.push(() => uploads.stop());
  return uploads;
}

/** Every secret a container log may show, scrubbed, and the two readers of those logs: a failed attempt's and a task's end. */
function composeLogs(deps: RunsDeps, ctx: { specs: RunSpecs; journal: AttemptJournal }, releasers: Releasers) {
  const { store, client, clock, log, readyCallback } = deps;
  const { specs, journal } = ctx;
  const logSecrets = new LogSecrets({
    log,
    apiKey: deps.apiKey,
    keys: store.instanceKeys,
    specs,
    runs: store.runs,
    ...(readyCallback ? { tokenFor: (runId: string, n: number) => readyCallback.tokens.tokenFor(runId, n) } : {}),
  });
  const failureLogs = new FailureLogs({ client, clock, journal, log, secrets: logSecrets });
  releasers.push(() => failureLogs.close());
  const taskLogs = new TaskLogs({ client, clock, journal, log, secrets: logSecrets });
  // The task probe's reads: the same, but their requests go after every other call of the `other`
  // group (failure logs before a destroy, end reads of stopped tasks, credit reads).
  const probeLogs = new TaskLogs({
    client: { requestLogs: (id, request, options) => client.requestLogs(id, request, { ...options, background: true }) },
    clock,
    journal,
    log,
    secrets: logSecrets,
  });
  return { logSecrets, failureLogs, taskLogs, probeLogs };
}
