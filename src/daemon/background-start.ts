// The daemon's work once it listens, started in the background by the composition root
// (./daemon.ts) so that nothing waits before the process can be stopped: the runs resume (with the
// cluster loop's first renewal, the poller and the notifier), old runs and events are deleted every
// hour (the leading daemon's duty), and the account checks of `berth doctor` run. The runs that
// cannot be resumed stop the daemon: it cannot go on.
//
// `stop()` may come at any point of it: each step looks at `stopping()` before it acts, a store
// wait gives up, and the releasers pushed here wait for both background steps before the runs stop.
import type { Clock } from '../clock.js';
import type { Config } from '../config/schema.js';
import { StoreError, toRunError } from '../errors.js';
import type { Logger } from '../logger.js';
import { PeriodicLoop } from '../periodic-loop.js';
import type { Releasers } from '../releasers.js';
import { isStoreDamaged } from '../store/busy.js';
import type { Store } from '../store/index.js';
import { checkAccount, checkLines, type CheckClient } from '../account/account-checks.js';
import type { SshKeys } from './ssh-keys.js';
import { whileStoreBusy } from './store-wait.js';
import { sweepOutputs } from './task-files/outputs-retention.js';
import type { ClusterLoop } from './cluster/cluster-loop.js';
import type { InstancePoller } from './instances/poller.js';
import type { AccountWatch } from './money/account-watch.js';
import type { Notifier } from './notify/notifier.js';
import type { RunNotices } from './runs/run-notices.js';
import type { Supervisor } from './runs/supervisor.js';

/** How often old runs and events are deleted (store.retention_days). */
const RETENTION_EVERY_MS = 60 * 60 * 1000;

export interface BackgroundDeps {
  config: Config;
  store: Store;
  /** The account checks' calls. */
  client: CheckClient;
  /** berth's SSH login key: put on the account before the checks (./ssh-keys.ts). */
  sshKeys: Pick<SshKeys, 'loginKey' | 'ensureOnAccount'>;
  clock: Clock;
  log: Logger;
  supervisor: Pick<Supervisor, 'resumeAll' | 'liveCount' | 'liveRunIds'>;
  poller: Pick<InstancePoller, 'start'>;
  notifier: Pick<Notifier, 'start'>;
  /** Several daemons on one store: its first renewal comes before the runs resume. */
  cluster: Pick<ClusterLoop, 'start'> | undefined;
  account: Pick<AccountWatch, 'start' | 'accept'>;
  notices: Pick<RunNotices, 'noteOn'>;
  /** Whether this daemon does the account-wide duties now (retention, the account checks). */
  leads: () => boolean;
  /** files.outputs_dir resolved: this host's kept outputs, swept of runs retention deleted (every daemon its own). */
  outputsDir?: string | undefined;
  /** True once the daemon stops. */
  stopping: () => boolean;
  /**
   * Resolves when the runs may resume: the account they rent on is confirmed (./service-binding.ts).
   * A rejection stops the daemon, as a failed resume does.
   */
  beforeResume?: (signal: AbortSignal) => Promise<void>;
  /** The runs have resumed: the daemon is ready. */
  onReady: () => void;
  /** The daemon cannot go on (`reason`): it stops, and says why. */
  onFatal: (reason: unknown) => void;
}

export interface Background {
  /** Settles once the runs have resumed (or the daemon stopped first, or could not go on). */
  ready: Promise<void>;
  /** Settles once the start-up account checks are done. */
  checked: Promise<void>;
}

export function startBackground(deps: BackgroundDeps, releasers: Releasers): Background {
  const { config, store, client, clock, log, supervisor, account, leads, stopping } = deps;
  // The background start is waited for before the runs stop (released after the two below).
  let started: Promise<void> = Promise.resolve();
  let checked: Promise<void> = Promise.resolve();
  releasers.push(async () => {
    await started.catch(() => undefined);
    await checked;
  });
  // The leading daemon's duty, asked every round: a daemon that leads later purges from then on.
  const retention = new PeriodicLoop({
    clock,
    intervalMs: RETENTION_EVERY_MS,
    run: () => {
      if (leads()) {
        const before = clock.now() - config.store.retention_days * 86_400_000;
        const { runs, events, notifications } = store.purge(before, clock.now());
        if (runs + events + notifications > 0) {
          log.info(
            { runs, events, notifications, retention_days: config.store.retention_days },
            'deleted ended runs, events and finished notifications past their retention',
          );
        }
      }
      // Every daemon its own host's files, after the leader's purge (another host's the round after).
      if (deps.outputsDir !== undefined) {
        const gone = sweepOutputs(deps.outputsDir, store.storeId, (id) => store.runs.get(id) !== undefined);
        if (gone.length > 0) log.info({ runs: gone.length, dir: deps.outputsDir }, 'deleted the kept outputs of runs past their retention');
      }
    },
    onError: (err) => log.warn({ err: toRunError(err) }, 'could not delete old runs and events; trying again later'),
  });
  releasers.push(() => retention.stop());
  const checksAbort = new AbortController();
  releasers.push(() => checksAbort.abort());

  started = (async () => {
    // No list blocks the start: a resumed run whose create may have been sent looks for its label
    // itself, and the poller's first round sweeps the account (adopting journaled creates,
    // destroying orphans) while the runs go on.
    await deps.beforeResume?.(checksAbort.signal);
    if (stopping()) return;
    // Each of these steps may be tried again: a berth.db locked by another program is waited out.
    await whileStoreBusy(
      'resume the runs',
      () => {
        if (stopping()) return;
        // The first renewal: the database's clock, this daemon's heartbeat, the leader's lease.
        deps.cluster?.start();
        supervisor.resumeAll();
        deps.poller.start();
        deps.notifier.start();
      },
      { clock, log, signal: checksAbort.signal },
    );
    if (stopping()) return;
    // The credit's first read at once: the create gate lets no create start until it has answered
    // (a run resumed or submitted now must not create on an account under account.min_credit_usd).
    account.start();
    // The first purge once the runs have resumed, then every hour from its end.
    void retention.checkNow();
    deps.onReady();
    log.info({ resumed: supervisor.liveCount, held: store.runs.heldCount() }, 'berth daemon ready');
  })();

  // The account checks of `berth doctor`, in the background: the daemon works without them (status,
  // the runs), and a failing one is an event on the runs it stops.
  checked = (async () => {
    await started.catch(() => undefined);
    if (stopping()) return;
    // Every daemon: one list of the account's keys (and an add when berth's is missing).
    await deps.sshKeys.ensureOnAccount(checksAbort.signal);
    if (stopping()) return;
    if (!leads()) {
      // Several daemons on one store: the leading one checks the account.
      account.start();
      return;
    }
    try {
      const report = await checkAccount(client, config, clock.now(), {
        signal: checksAbort.signal,
        billing: false,
        loginKey: deps.sshKeys.loginKey,
      });
      if (report.user) account.accept(report.user);
      for (const [i, line] of checkLines(report).entries()) {
        const check = report.checks[i]!;
        if (check.ok) log.info({ check: check.name }, `account check: ${line}`);
        else log.warn({ check: check.name }, `account check: ${line}`);
      }
      // The credit is the create gate's to report (an event per waiting create); berth's SSH key
      // stops no run (without it berth follows its instances as it did before it logged in). The others are noted on every live
      // run; a run meets the refusal itself when it calls (a permission error fails it at once).
      const failing = report.checks.filter((c) => !c.ok && c.name !== 'credit' && c.name !== 'ssh_key');
      for (const c of failing)
        deps.notices.noteOn(supervisor.liveRunIds(), 'account.check', `account check at daemon start failed: ${c.name}: ${c.message}`);
    } catch (err) {
      if (!stopping()) log.warn({ err: toRunError(err) }, 'the account checks could not run');
    } finally {
      if (!stopping()) account.start();
    }
  })();
  const ready = started.catch((err: unknown) => {
    // Stopped while waiting for a busy berth.db: nothing failed.
    if (stopping()) return;
    // The runs could not be resumed: the daemon cannot go on. Only a damaged store is told to
    // restore a backup; anything else (a full disk, a bug) says what it is and no more.
    const why = toRunError(err).message;
    // The stack too: which step could not go on is what the next person needs (a chaos run saw a
    // daemon exit 2 on a Postgres restart during its start, in a race not yet caught with it).
    log.fatal({ err: toRunError(err), stack: err instanceof Error ? err.stack : undefined }, `berth daemon cannot go on: ${why}`);
    const reason = isStoreDamaged(err)
      ? new StoreError(
          `The store cannot be read (${why}): keep berth.db as it is and restore it from a backup (docs/operating.md: Backup, Restore).`,
          err,
        )
      : err;
    deps.onFatal(reason);
  });
  return { ready, checked };
}
