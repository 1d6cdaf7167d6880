// The registry of live runs: one RunDriver per live run, resumed at start; the admission queue
// (queued runs are admitted while fewer than `daemon.max_active_runs` are active). It is the shared
// poller's subscriber, and hands what the lists show (and a webhook's word on an instance) to its poll
// router (./poll-router.ts), which reads its drivers. What is said to one run goes through it to that
// run's driver (cancel, resume after a restore, expiry, readiness, a task's end). It builds no
// service: the journal, the money guard, the create gate, the reconciler and the run machine are
// handed to it by ./compose-runs.ts. Which of the store's live runs are driven here, and when one is
// taken, it asks its placement (./run-placement.ts; ./shared-placement.ts on a store several daemons
// share), never which kind of store it is on. Submissions (./submission.ts), a run's log (./run-logs.ts) and the
// daemon's notices (./run-notices.ts) live beside it and ask it only which runs it drives.
//
// States of a run here: queued (driver idle, waiting for a slot) → active (admitted) → ended (driver
// dropped). A run is never dropped while it holds an instance: the machine ends only after its
// destroy was confirmed. Two more: held (a restored store showed it live; no driver until the user
// resumes or cancels it, or the money guard, which watches it too, expires it), paused (its driver could not write the store; resumed by the store
// probe of ./paused-runs.ts once the store writes again) and kept (this build cannot read it: no
// driver, never failed; ./unreadable-runs.ts; a cancel ends it).
//
// Until `resumeAll`, a submitted run is only stored, and a cancel only recorded: `resumeAll` starts
// both from the store.
import { countText } from '../../count-text.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config/schema.js';
import { BerthError, LeaseLostError, toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { readStoredPlan, StoredSpecError, type RunPlan } from '../../job-spec/run-plan.js';
import type { RunRow, Store } from '../../store/index.js';
import { attemptIsLive } from '../../wire/run-states.js';
import type { RunError } from '../../../machines/run-rules.js';
import type { AttemptJournal } from './attempt-journal.js';
import type { CreateGate } from '../money/create-gate.js';
import type { MoneyGuard } from '../money/money-guard.js';
import type { MachineQuarantine } from './machine-quarantine.js';
import type { OfferClaims } from './offer-claims.js';
import type { PollSubscriber } from '../instances/poller.js';
import type { WarmPool } from '../instances/warm-pool.js';
import type { Reconciler } from '../instances/reconciler.js';
import type { Holder, PriceIncreaseWatch } from '../money/price-increases.js';
import type { FailureLogs } from '../task-end/failure-logs.js';
import type { IdleWatch } from '../task-end/idle-watch.js';
import { RunDriver, type ProvidedRunMachine } from './run-driver.js';
import { cancelRunOutsideMachine } from './run-failed-outside.js';
import { neededText, unreadableWith, type Unreadable } from './unreadable-runs.js';
import { PausedRuns } from './paused-runs.js';
import type { RunHooks } from './run-hooks.js';
import type { DrivenRuns, RunPlacement } from './run-placement.js';
import { PollRouter } from './poll-router.js';
import type { RunOwnership } from '../cluster/run-ownership.js';
import type { ClusterRuns } from '../cluster/cluster-loop.js';

/** What the supervisor is handed, built by ./compose-runs.ts for the composition root (../daemon.ts). */
export interface SupervisorDeps {
  /** Warm instances: a cancel of a run that ended with its instance kept warm ends that too (issue #51). */
  warm?: Pick<WarmPool, 'releaseOf'>;
  store: Store;
  clock: Clock;
  config: Config;
  log: Logger;
  /** The plans of the live runs: kept here, read by the actors and the money room through RunSpecs. */
  specs: Map<string, RunPlan>;
  /** The run machine with the daemon's actors (./run-driver.ts provideRunMachine). */
  machine: ProvidedRunMachine;
  journal: AttemptJournal;
  claims: OfferClaims;
  quarantine: MachineQuarantine;
  /** Hears every complete sweep of the account (adoption, orphans). */
  reconciler: Pick<Reconciler, 'sweep'>;
  /** Checks a run's limits again after it moved, and forgets it once it ended. */
  guard: Pick<MoneyGuard, 'check' | 'forget'>;
  /** Waiting creates look again when a run moved or ended. */
  gate: Pick<CreateGate, 'wake'>;
  /** Answers hosts' price increases on the runs' instances (never above a run's cap): started with the runs. */
  prices: Pick<PriceIncreaseWatch, 'start'>;
  /** Idle autostop: reads the same lists (gpu_util) for running runs. */
  idle: Pick<IdleWatch, 'observe' | 'forget'>;
  /** A run resumed while destroying destroys before it asks for the container's log (../task-end/failure-logs.ts). */
  failureLogs: Pick<FailureLogs, 'forgo'>;
  /** Notifications and metrics, handed to every run's driver. */
  hooks?: RunHooks;
  /**
   * Which runs this daemon may act for (../cluster/run-ownership.ts): with several daemons on one
   * store, a run is driven here only while this daemon holds its lease.
   */
  ownership: RunOwnership;
  /**
   * Which live runs are driven here and when one is taken (./run-placement.ts), made for the
   * supervisor's runs: every run on a store of its own, runs taken through leases on a shared one.
   */
  placement: (runs: DrivenRuns) => RunPlacement;
}

export class Supervisor implements PollSubscriber, ClusterRuns {
  private readonly drivers = new Map<string, RunDriver>();
  /** Runs waiting for a slot, oldest first (a Set keeps insertion order). */
  private readonly queued = new Set<string>();
  private readonly specs: Map<string, RunPlan>;
  private stopping = false;
  /** False until resumeAll: submits are stored, and started by resumeAll. */
  private resumed = false;
  /** Runs paused by a store that refused their write, and the probe that lets them go on. */
  private readonly paused: PausedRuns;
  /** Runs that moved since the money guard last looked (checked once per turn). */
  private readonly moved = new Set<string>();
  private readonly ownership: RunOwnership;
  private readonly placement: RunPlacement;
  private readonly router: PollRouter;
  /** Kept runs (this build cannot read them) already said in this daemon's log and the run's events. */
  private readonly said = new Set<string>();

  constructor(private readonly deps: SupervisorDeps) {
    this.specs = deps.specs;
    this.ownership = deps.ownership;
    this.paused = new PausedRuns({
      store: deps.store,
      clock: deps.clock,
      log: deps.log,
      resume: (runId, row) => this.drivers.get(runId)?.resume(row),
    });
    // The placement's view of the drivers: it starts, cancels and admits runs through these alone.
    this.placement = deps.placement({
      open: () => this.resumed && !this.stopping,
      count: () => this.drivers.size,
      has: (runId) => this.drivers.has(runId),
      drive: (row) => this.startDriver(row),
      cancel: (runId) => this.drivers.get(runId)?.cancel(),
      hold: (rows) => {
        for (const row of rows) this.watchHeld(row);
        this.warnHeld(rows.map((row) => row.id));
      },
      keep: (row, why) => this.keep(row, why),
      admit: () => this.admitQueued(),
    });
    this.router = new PollRouter({ ...deps, runs: { drivers: () => this.drivers.values() }, placement: this.placement });
  }

  /**
   * Resumes the live runs of the store that are this daemon's (./run-placement.ts) from their
   * snapshots, except those held after a restore; then takes what it has room for among those
   * nobody holds (a shared store).
   */
  resumeAll(): void {
    if (this.stopping || this.resumed) return;
    this.placement.resume();
    this.resumed = true;
    this.deps.prices.start();
    this.placement.takeOver();
    this.admitQueued();
  }

  /** A run held after a restore has no driver, but its limits still apply: the money guard watches it from the attempts table. */
  private watchHeld(row: RunRow): void {
    const plan = this.storedPlan(row);
    if (!plan) return;
    this.specs.set(row.id, plan);
    this.progressed(row.id);
  }

  /**
   * The plan of a run read from its row (../../job-spec/run-plan.ts migrates older versions), or
   * the one kept for it (a held run whose limits are watched). A run this build cannot read (a
   * later version, or a parse stricter than the one that stored it) is kept, not failed: failing
   * it would destroy a running instance over a reading (./unreadable-runs.ts). Undefined then.
   */
  private storedPlan(row: RunRow): RunPlan | undefined {
    let plan = this.specs.get(row.id);
    let specError: StoredSpecError | undefined;
    if (!plan) {
      try {
        plan = readStoredPlan(row.spec_json);
      } catch (err) {
        if (!(err instanceof StoredSpecError)) throw err;
        specError = err;
      }
    }
    const why = unreadableWith(row, specError);
    if (!why) return plan;
    this.keep(row, why);
    return undefined;
  }

  /**
   * A live run this build cannot drive: no driver, nothing failed or destroyed; said once in this
   * daemon's log and in the run's events (with what a daemon needs to drive it), again after a
   * restart (folded into one event). The event is the daemon's word on the run, not a transition:
   * written whoever holds the run.
   */
  private keep(row: RunRow, why: Unreadable): void {
    if (this.said.has(row.id)) return;
    const { store, clock, log } = this.deps;
    const message = `this berth cannot drive the run: ${why.reason}. It is kept as it is, not failed: it needs ${neededText(why)}; until one drives it its instance is left running, or \`berth cancel ${row.id}\` ends it`;
    log.warn({ runId: row.id, specVersion: why.specVersion, machineVersion: why.machineVersion }, `run ${row.id}: ${message}`);
    try {
      store.transaction(() =>
        store.events.append({
          runId: row.id,
          at: clock.now(),
          type: 'run.unreadable',
          message,
          data: { reason: why.reason, spec_version: why.specVersion, machine_version: why.machineVersion },
          foldKey: 'run.unreadable',
        }),
      );
      this.said.add(row.id);
    } catch (err) {
      log.warn({ runId: row.id, err: toRunError(err) }, 'could not record that the run cannot be driven here; said again at the next look');
    }
  }

  /**
   * A kept run asked to end: it ends `cancelled` here, through the ownership fence (on a shared
   * store only while this daemon holds it: one that can read it may drive it, and ends it itself),
   * and the orphan sweep destroys what it held.
   */
  private endKept(row: RunRow): void {
    try {
      this.ownership.write(row.id, () => cancelRunOutsideMachine(this.deps, row, this.deps.clock.now()));
      this.deps.log.info(
        { runId: row.id },
        `run ${row.id}, kept because this berth cannot drive it, is cancelled; the orphan sweep destroys its instance`,
      );
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
    }
  }

  private warnHeld(held: string[]): void {
    if (held.length > 0) {
      this.deps.log.warn(
        { held },
        `${countText(held.length, 'run')} ${held.length === 1 ? 'is' : 'are'} held: this store was restored from a backup, and what became of them since is unknown. Nothing is rented for them until you run \`berth resume RUN\` (or \`berth cancel RUN\`) for each`,
      );
    }
  }

  /** Takes what this daemon has room for among the runs nobody holds (the cluster loop's tick; ./shared-placement.ts). */
  takeOver(): void {
    this.placement.takeOver();
  }

  /** Another daemon holds these runs now: their drivers stop here (nothing ends; the run goes on there). */
  lost(runIds: string[]): void {
    for (const runId of runIds) {
      this.drivers.get(runId)?.stop();
      this.deps.claims.release(runId);
      this.drop(runId);
    }
  }

  /** Cancels sent to another daemon for runs driven here (carried through the store). */
  cancelRequested(runIds: string[]): void {
    for (const runId of runIds) this.drivers.get(runId)?.cancel();
  }

  /** Forgets a run driven here (ended, or held by another daemon now). */
  private drop(runId: string): void {
    this.deps.guard.forget(runId);
    this.deps.idle.forget(runId);
    this.deps.gate.wake();
    this.drivers.delete(runId);
    this.queued.delete(runId); // a queued run can be cancelled before it is admitted
    this.specs.delete(runId);
    this.paused.delete(runId);
    this.placement.forget(runId);
  }

  /** The user confirms that a run held after a restore may go on. */
  resumeHeld(runId: string): void {
    const { store, log } = this.deps;
    const row = store.runs.get(runId);
    if (!row || row.held_at === null || row.ended_at !== null) return;
    store.transaction(() => store.runs.release(runId));
    log.info({ runId }, 'a run held after a restore was resumed by the user');
    this.placement.lifted(runId);
  }

  /** Throws daemon_stopping while the daemon shuts down (a submission stores nothing then). */
  assertAccepting(): void {
    if (this.stopping) throw new BerthError('daemon_stopping', 'The daemon is shutting down and takes no new runs.');
  }

  /** A run just submitted (./submission.ts), with its plan: driven at once once the runs are resumed. */
  started(row: RunRow, spec: RunPlan): void {
    if (!this.resumed || this.stopping) return; // resumeAll starts it from the store
    if (!this.placement.takesNew(row.id)) return;
    this.startDriver(row, spec);
    this.admitQueued();
  }

  /**
   * Asks a run to stop; its instances are destroyed before it is `cancelled`. The request is stored
   * first, so that it is carried out even if the run has no actor yet (before resumeAll, or held).
   * A task's outputs are taken first (issue #48), unless `noOutputs` or the run was asked to cancel
   * before (a second cancel): then its instance goes at once.
   */
  cancel(runId: string, opts: { noOutputs?: boolean } = {}): RunRow | undefined {
    const { store } = this.deps;
    const row = store.runs.get(runId);
    if (row && row.ended_at !== null) {
      // Its instance kept warm for the next run of its spec goes now (the next sweep destroys it).
      if (this.deps.warm?.releaseOf(runId, 'its run was cancelled')) {
        this.deps.log.info({ runId }, 'the warm instance this run left is released: it is destroyed at the next sweep');
      }
      return row;
    }
    if (!row) return row;
    store.transaction(() => {
      store.runs.requestCancel(runId, this.deps.clock.now());
      // A held run may be cancelled: its actor only destroys what the run holds and never rents.
      if (row.held_at !== null) store.runs.release(runId);
    });
    if (!this.resumed || this.stopping) return store.runs.get(runId);
    const driver = this.drivers.get(runId);
    if (driver) driver.cancel({ now: opts.noOutputs === true || row.cancel_requested_at !== null });
    else this.placement.cancelled(row);
    return store.runs.get(runId);
  }

  /**
   * The task probe read the end marker of the run's attempt n (a stale attempt is ignored by the
   * machine); or the workdir upload was refused (`workdirRefused`): the task never starts there.
   */
  taskEnded(runId: string, n: number, end: { exitCode: number; onstart: boolean; workdir?: boolean; workdirRefused?: string }): void {
    this.drivers.get(runId)?.taskEnded(n, end);
  }

  /**
   * The money guard's EXPIRE: the run's driver takes it (and keeps it across a paused store). A run
   * held after a restore has none: its hold is released and a driver started for it, as a cancel
   * does, so that its instance is destroyed and it ends `expired`. False when that could not be
   * stored (the guard tries again).
   */
  expire(runId: string, reason: RunError): boolean {
    const driver = this.drivers.get(runId);
    if (driver) {
      driver.expire(reason);
      return true;
    }
    const { store, clock, log } = this.deps;
    const row = store.runs.get(runId);
    if (!row || row.ended_at !== null) return true; // nothing left to expire
    if (row.held_at === null && this.placement.drivenElsewhere()) {
      this.deps.guard.forget(runId);
      this.specs.delete(runId);
      return true;
    }
    if (row.held_at === null || !this.resumed || this.stopping) return false;
    // This daemon takes the run before lifting its hold, so no other daemon of a shared store takes it between.
    if (!this.ownership.take(runId)) return false;
    let lifted: boolean;
    try {
      lifted = store.transaction(() => {
        if (!store.runs.release(runId)) return false;
        store.events.append({
          runId,
          at: clock.now(),
          type: 'held.expired',
          message: `held after a restore, the run reached a limit: ${reason.message} Its instance is destroyed.`,
          data: { kind: reason.kind },
        });
        return true;
      });
    } catch (err) {
      this.ownership.release(runId); // not renewed for a run nobody drives; the guard tries again
      throw err;
    }
    if (!lifted) {
      this.ownership.release(runId);
      return true;
    }
    log.warn({ runId, kind: reason.kind }, `run ${runId}, held after a restore, reached a limit: its instance is destroyed`);
    this.startDriver(store.runs.get(runId)!);
    this.drivers.get(runId)?.expire(reason);
    return true;
  }

  /**
   * The readiness callback of attempt `n` of a run (its token already checked): false when the run
   * is not live here (ended, unknown, or held after a restore), so that the caller can say so.
   */
  ready(runId: string, n: number): boolean {
    const driver = this.drivers.get(runId);
    if (!driver || this.stopping) return false;
    driver.ready(n);
    return true;
  }

  /** The run was asked to end (cancel, expiry, deadline) while a step was in flight, or has no driver: a waiting create gives up. */
  endRequested(runId: string): boolean {
    return this.drivers.get(runId)?.endRequested() ?? true;
  }

  get activeCount(): number {
    return this.drivers.size - this.queued.size;
  }

  get liveCount(): number {
    return this.drivers.size;
  }

  // The poller's subscriber (../instances/poller.ts): what the lists show goes through the router (./poll-router.ts).
  waited: PollRouter['waited'] = () => this.router.waited();
  onSeen: PollRouter['onSeen'] = (instances, listedAt) => this.router.onSeen(instances, listedAt);
  onCovered: PollRouter['onCovered'] = (ids, listedAt) => this.router.onCovered(ids, listedAt);
  onAbsent: PollRouter['onAbsent'] = (ids, listedAt) => this.router.onAbsent(ids, listedAt);
  onSweep: PollRouter['onSweep'] = (instances, startedAt) => this.router.onSweep(instances, startedAt);
  serviceSays: PollRouter['serviceSays'] = (...said) => this.router.serviceSays(...said);
  /** The task attempts the task probe reads now (../task-end/task-probe.ts asks, on its own schedule). */
  taskProbeTargets: PollRouter['probeTargets'] = () => this.router.probeTargets();

  /** The instances runs hold now, with what each run may be billed (for the price increase watch). */
  holders(): Map<number, Holder> {
    const out = new Map<number, Holder>();
    for (const driver of this.drivers.values()) {
      const id = driver.currentInstanceId();
      const dphTotal = driver.currentPrice();
      const spec = this.specs.get(driver.runId);
      if (id !== null && dphTotal !== null && spec)
        out.set(id, { runId: driver.runId, maxPricePerHour: spec.max_price_per_hour, dphTotal });
    }
    return out;
  }

  /** The runs driven here now. */
  liveRunIds(): string[] {
    return [...this.drivers.keys()];
  }

  /** Stops every run's actor (in-flight calls are abandoned safely: their journal rows remain). */
  stop(): void {
    this.stopping = true;
    this.paused.stop();
    for (const d of this.drivers.values()) d.stop();
    this.drivers.clear();
  }

  /**
   * `given`: the run's plan when the caller has it (a submission); a held run whose limits were
   * watched has its plan kept; else it is read once from its row. A run this build cannot read gets
   * no driver (it is kept; asked to end, it ends here).
   */
  private startDriver(row: RunRow, given?: RunPlan): void {
    const spec = given ?? this.storedPlan(row);
    if (!spec) {
      if (row.cancel_requested_at !== null) this.endKept(row);
      return;
    }
    const latest = this.deps.store.attempts.latest(row.id);
    if (latest && attemptIsLive(latest)) this.deps.claims.claim(latest.offer_id, row.id);
    if (row.state === 'destroying' && latest?.instance_id != null) this.deps.failureLogs.forgo(latest.instance_id);
    const driver = new RunDriver(row, spec, {
      machine: this.deps.machine,
      store: this.deps.store,
      journal: this.deps.journal,
      clock: this.deps.clock,
      claims: this.deps.claims,
      quarantine: this.deps.quarantine,
      config: this.deps.config,
      log: this.deps.log,
      onProgress: (runId) => this.progressed(runId),
      ...(this.deps.hooks ? { hooks: this.deps.hooks } : {}),
      onEnded: (runId) => {
        this.drop(runId);
        this.ownership.release(runId);
        // Admission may start other runs' actors: not from inside this run's transition.
        queueMicrotask(() => this.admitQueued());
        this.placement.ended();
      },
      onLost: (runId) => {
        this.drop(runId);
        // Out of the held set at once: renewed, the run would be this daemon's for ever with nobody driving it.
        this.ownership.giveUp(runId);
      },
      ownership: this.ownership,
      onPaused: (runId) => this.paused.add(runId),
    });
    this.specs.set(row.id, spec);
    this.drivers.set(row.id, driver);
    if (row.state === 'queued') this.queued.add(row.id);
    driver.start();
    // Limits are checked from the store at once: a run that passed one while the daemon was down expires now.
    this.progressed(row.id);
  }

  /** The instance a live run holds now, or null (the run's log is read live from it). */
  instanceOf(runId: string): number | null {
    return this.drivers.get(runId)?.currentInstanceId() ?? null;
  }

  /** A run moved: its limits are checked again and waiting creates look again, once per turn however many moved. */
  private progressed(runId: string): void {
    if (this.moved.size === 0) {
      queueMicrotask(() => {
        const ids = [...this.moved];
        this.moved.clear();
        if (this.stopping) return;
        // Runs with a driver, and held runs (their spec is kept for the guard alone).
        for (const id of ids) if (this.specs.has(id)) this.deps.guard.check(id);
        this.deps.gate.wake();
      });
    }
    this.moved.add(runId);
  }

  private admitQueued(): void {
    if (this.stopping) return;
    const max = this.deps.config.daemon.max_active_runs;
    for (const runId of this.queued) {
      if (this.activeCount >= max) break;
      this.queued.delete(runId);
      this.drivers.get(runId)?.admit();
    }
  }
}
