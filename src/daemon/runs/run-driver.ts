// Drives one run: owns its xstate actor, and after every transition writes the snapshot, the run
// row, the attempts rows (through the journal) and the event log in one transaction
// (./run-transition.ts). The intent of each side
// effect is journaled by the actors themselves before the call (a subscriber sees a transition only
// after the invoked promise has started), so this write is the record of what happened, not the WAL.
//
// States: idle (a queued run, no actor) → active (actor running) → ended. A write the store refuses
// (disk full, berth.db locked by another program) pauses the run: its actor is stopped, exactly as
// a killed daemon would stop it, and `resume` later restarts it from the last snapshot that was
// committed, as a restarted daemon would. Nothing it did after that snapshot is lost, since every
// side effect was journaled first (a journal write that fails stops the side effect before it starts).
import { createActor, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import { RUN_MACHINE_VERSION, runMachine, type RunEmitted } from '../../../machines/run-machine.js';
import { runLimits } from './run-limits.js';
import type { InstanceStatus } from '../../../machines/run-rules.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config/schema.js';
import { LeaseLostError, toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { RunPlan } from '../../job-spec/run-plan.js';
import type { RunRow, RunState, Store } from '../../store/index.js';
import { isEndState } from '../../store/index.js';
import type { AttemptJournal } from './attempt-journal.js';
import { DestroyFailures } from '../instances/destroy-alerts.js';
import type { LoggedEvent } from './event-log.js';
import { storeTransition } from './run-transition.js';
import type { OfferClaims } from './offer-claims.js';
import { runStateOf } from './run-state.js';
import { toStatus } from '../instances/instance-status.js';
import type { MachineQuarantine } from './machine-quarantine.js';
import { blocksMachine, judgedWhileItLasts, sameStatus, type RunError } from '../../../machines/run-rules.js';
import { canMigrate, migrateRunSnapshot, type StoredRunSnapshot } from '../../../machines/run-migrations.js';
import { makeRunActors } from './run-actors.js';
import type { RunActorDeps } from './run-actor-deps.js';
import { failRunOutsideMachine } from './run-failed-outside.js';
import type { RunHooks } from './run-hooks.js';
import type { RunOwnership } from '../cluster/run-ownership.js';

type RunActor = ActorRefFrom<typeof runMachine>;
type RunSnapshot = SnapshotFrom<typeof runMachine>;

/** The run machine with the daemon's real actors, provided once and shared by every run. */
export function provideRunMachine(deps: RunActorDeps) {
  return runMachine.provide({ actors: makeRunActors(deps) });
}
export type ProvidedRunMachine = ReturnType<typeof provideRunMachine>;

export interface RunDriverDeps {
  machine: ProvidedRunMachine;
  store: Store;
  journal: AttemptJournal;
  clock: Clock;
  claims: OfferClaims;
  quarantine: MachineQuarantine;
  config: Config;
  log: Logger;
  /** Called once when the run reaches an end state (or cannot go on). */
  onEnded(runId: string): void;
  /** Called when a store write failed and the run paused; the caller calls `resume` once the store writes again. */
  onPaused(runId: string): void;
  /** Called after each stored transition (the money guard checks the run's limits again). */
  onProgress(runId: string): void;
  /** Notifications and metrics (./run-hooks.ts). */
  hooks?: RunHooks;
  /**
   * Whether this daemon still holds the run (several daemons on one store): every transition is
   * written through it (alone on a SQLite store: a plain transaction).
   */
  ownership: Pick<RunOwnership, 'write'>;
  /** Called once when another daemon holds the run now: the actor has stopped, nothing ended. */
  onLost(runId: string): void;
}

export class RunDriver {
  readonly runId: string;
  /** Made on start, except for a queued run: that one gets its actor when admitted or cancelled. */
  private actor: RunActor | undefined;
  private readonly log: Logger;
  private pending: RunEmitted[] = [];
  private last: RunSnapshot | undefined;
  private lastState: RunState;
  private ended = false;
  /** Another daemon holds the run now: this driver does nothing more. */
  private lost = false;
  private lastPolled: InstanceStatus | undefined;
  /** The newest list applied (when it was started) and the wall clock when it was applied: see `poll`. */
  private newestList: { listedAt: number; appliedAt: number } | undefined;
  /** When the list that first showed the current instance running was started (for /metrics). */
  private runningListedAt: number | undefined;
  private paused = false;
  // What the run was told from outside its machine, kept until it ends: a pause drops the
  // transitions that were not stored (an event sent just before the write that failed is lost with
  // them), so a resume tells the restarted actor again. Each is a no-op to a machine that had it.
  /** ADMIT was sent. */
  private admitted = false;
  private cancelRequested = false;
  /** The money guard's expiry (the first reason stands, as in the machine). */
  private expireReason: RunError | undefined;
  /** The readiness callback of this attempt came. */
  private readyN: number | undefined;
  /** The task probe read this attempt's end marker. */
  private taskEnd: { n: number; exitCode: number; onstart: boolean; at: number; workdir?: boolean; workdirRefused?: string } | undefined;
  /** Destroys of this run's instances that did not take, in a row: an ALERT once they keep failing. */
  private readonly destroyFailures = new DestroyFailures();

  constructor(
    private row: RunRow,
    private readonly spec: RunPlan,
    private readonly deps: RunDriverDeps,
  ) {
    this.runId = row.id;
    this.lastState = row.state;
    this.log = deps.log.child({ runId: row.id });
  }

  /** True when a stored snapshot can be resumed by this build of the machine. */
  static canResume(row: RunRow): boolean {
    return row.snapshot_json === null || (row.machine_version !== null && canMigrate(row.machine_version, RUN_MACHINE_VERSION));
  }

  /**
   * Resumes the run. A queued run stays without an actor (~10 KB each, measured) until it is admitted or
   * cancelled: thousands can wait behind max_active_runs, and the machine's `queued` state does
   * nothing but wait for those two events.
   */
  start(): void {
    if (this.lastState !== 'queued') this.started();
  }

  private started(): RunActor {
    if (this.actor) return this.actor;
    const { row, deps } = this;
    const input = { runId: row.id, limits: runLimits(this.spec, deps.config), submittedAt: row.created_at };
    const stored = row.snapshot_json ? (JSON.parse(row.snapshot_json) as StoredRunSnapshot) : undefined;
    // canResume() was checked before this driver was made, so a stored snapshot migrates.
    const migrated = stored && migrateRunSnapshot(stored, row.machine_version ?? RUN_MACHINE_VERSION, RUN_MACHINE_VERSION, input.limits);
    // Limits are derived from the stored spec and this daemon's configuration, not state: a restored
    // run takes them fresh (deadlines are absolute timestamps in context and do not move).
    const snapshot = migrated
      ? ({ ...migrated, context: { ...migrated.context, limits: input.limits } } as unknown as RunSnapshot)
      : undefined;
    const actor = createActor(deps.machine, snapshot ? { input, snapshot } : { input });
    this.actor = actor;
    actor.on('*', (e) => this.pending.push(e as RunEmitted));
    actor.subscribe({
      next: (s) => this.persist(s),
      error: (err) => this.crashed(err),
    });
    actor.start();
    return actor;
  }

  get state(): RunState {
    return this.lastState;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  admit(): void {
    this.admitted = true;
    if (!this.paused) this.started().send({ type: 'ADMIT' });
  }

  /**
   * The first cancel a run hears (the user's, or one carried from the store) takes a task's outputs
   * first, from now (issue #48); `again`: the user asked once more while it was asked already, or
   * asked with `--no-outputs`: the instance goes at once.
   */
  cancel(opts: { now?: boolean } = {}): void {
    const at = this.deps.clock.now();
    if (this.cancelRequested && this.actor) {
      // Told already (a cancel carried from the store each tick); a user's cancel without outputs is news.
      if (opts.now === true && !this.paused) this.actor.send({ type: 'CANCEL', at, now: true });
      return;
    }
    this.cancelRequested = true;
    if (!this.paused) this.started().send({ type: 'CANCEL', at, ...(opts.now === true ? { now: true } : {}) });
  }

  /**
   * Restarts a paused run from its last committed snapshot (`row`, read again from the store) and
   * tells it again what it was told. Any of these may pause it again (the store refused once more):
   * the rest then waits for the next resume, since nothing here is forgotten.
   */
  resume(row: RunRow): void {
    if (!this.paused || this.ended) return;
    this.paused = false;
    this.row = row;
    this.lastState = row.state;
    if (isEndState(row.state)) return this.end();
    this.started();
    if (row.cancel_requested_at !== null) this.cancelRequested = true;
    if (this.admitted) this.send({ type: 'ADMIT' });
    if (this.cancelRequested) this.send({ type: 'CANCEL', at: this.deps.clock.now() });
    if (this.expireReason) this.send({ type: 'EXPIRE', reason: this.expireReason });
    if (this.readyN !== undefined) this.send({ type: 'READY', n: this.readyN });
    if (this.taskEnd) this.send({ type: 'TASK_END', ...this.taskEnd });
  }

  /** From the money guard: max_runtime_s or budget_usd is reached. Held until the run ends, across pauses. */
  expire(reason: RunError): void {
    if (this.ended) return;
    this.expireReason ??= reason;
    if (!this.paused) this.started().send({ type: 'EXPIRE', reason });
  }

  /** To the running actor, unless the run is paused (a resume sends what is remembered). */
  private send(
    event:
      | { type: 'ADMIT' }
      | { type: 'CANCEL'; at: number; now?: boolean }
      | { type: 'EXPIRE'; reason: RunError }
      | { type: 'READY'; n: number }
      | { type: 'TASK_END'; n: number; exitCode: number; onstart: boolean; at: number; workdir?: boolean; workdirRefused?: string },
  ): void {
    if (!this.paused) this.actor?.send(event);
  }

  /** The run was asked to end (cancel, expiry, deadline) while a step was in flight: a create waiting at the gate gives up. */
  endRequested(): boolean {
    const ctx = this.actor?.getSnapshot().context;
    return this.ended || (ctx !== undefined && (ctx.cancelRequested || ctx.expire !== null || ctx.endReason !== null));
  }

  /**
   * A webhook says this run's instance was outbid (`stopped`) or went offline (`offline`): handled
   * as a list showing it so would be (on_outbid, or destroyed and the next offer), without waiting
   * for the next list. False when the run does not hold that instance or is already ending it, and
   * for an outbid of an on-demand instance or one older than the instance's last bid (a late repeat
   * that a rebid already answered: the lists decide). `note` is called first when it acts.
   */
  serviceSays(instanceId: number, status: 'stopped' | 'offline', eventAt: number, why: string, note: () => void): boolean {
    const current = this.actor?.getSnapshot().context.current;
    if (this.paused || !current || current.instanceId !== instanceId || current.ending !== null) return false;
    if (status === 'stopped' && (current.bidPrice === null || eventAt < (current.rebidAt ?? current.createdAt ?? 0))) return false;
    // Not listed yet: a record of which berth knows only the id.
    const last = current.status ?? toStatus({ id: instanceId, label: null, machine_id: null, actual_status: null });
    // An outbid instance is stopped by the market while berth still wants it running.
    const told = status === 'stopped' ? { actual_status: 'stopped', intended_status: 'running' } : { actual_status: 'offline' };
    note();
    this.poll({ ...last, ...told, status_msg: why.slice(0, 200) }, this.deps.clock.now());
    return true;
  }

  /**
   * The onstart of attempt `n` called back with its token (checked by the caller): the machine takes
   * the instance as ready if that attempt is still booting, and ignores it otherwise.
   */
  ready(n: number): void {
    this.readyN = n;
    this.send({ type: 'READY', n });
  }

  /** The task probe read attempt n's end marker: the machine ends the task if that attempt still holds its instance. */
  taskEnded(n: number, end: { exitCode: number; onstart: boolean; workdir?: boolean; workdirRefused?: string }): void {
    // When it was read: a task's outputs are taken for files.outputs_timeout_s from then.
    this.taskEnd = { n, ...end, at: this.deps.clock.now() };
    this.send({ type: 'TASK_END', ...this.taskEnd });
  }

  /**
   * What the task probe reads for this run: its attempt and instance while the instance was last
   * listed running and the run is booting or running (a task runs from the container's start, so a
   * short one may end before SSH answers), not ending. Null otherwise.
   */
  taskProbeTarget(): { runId: string; n: number; instanceId: number } | null {
    if (this.paused || this.ended || (this.lastState !== 'running' && this.lastState !== 'booting')) return null;
    const current = this.actor?.getSnapshot().context.current;
    if (!current || current.instanceId === null || current.ending !== null || current.status?.actual_status !== 'running') return null;
    return { runId: this.runId, n: current.n, instanceId: current.instanceId };
  }

  /** The $/h the current instance bills: as last listed, else as rented; null without one. */
  currentPrice(): number | null {
    const current = this.actor?.getSnapshot().context.current;
    if (!current || current.instanceId === null) return null;
    return current.status?.dph_total ?? current.dphTotal;
  }

  /** The instance this run currently holds (or is destroying), if any. */
  currentInstanceId(): number | null {
    return this.actor?.getSnapshot().context.current?.instanceId ?? null;
  }

  poll(instance: InstanceStatus | null, listedAt: number): void {
    if (this.currentInstanceId() === null) return;
    // A list started before the attempt had its instance says nothing of it: for a warm instance
    // taken (issue #51), it shows the container its recycle replaced, running, and would start the
    // new task's attempt at once. (recycle_instance.yaml: the call itself sets `recycling`.) Unless
    // the wall clock stepped back below that moment: then every list looks older, and all count.
    const createdAt = this.actor!.getSnapshot().context.current?.createdAt;
    if (createdAt != null && listedAt < createdAt && this.deps.clock.now() >= createdAt) return;
    // Lists reach a run out of order: a daemon that follows a leader reads the leader's sightings
    // after its own lists, and one of them may have been started before this daemon's newest list
    // (a take-over's first rounds replay them). Applied, such stale news set a running run's
    // instance back to `loading` (seen in chaos-pg), or counted an absence older than a sighting.
    // So a list started before the newest one applied is dropped, unless the wall clock stepped
    // back since that one was applied: then every list looks older, and the order starts again.
    const now = this.deps.clock.now();
    if (this.newestList && listedAt < this.newestList.listedAt && now >= this.newestList.appliedAt) return;
    this.newestList = { listedAt, appliedAt: now };
    // A status seen unchanged is a no-op in every state: the machine acts on a change, on the
    // instance's absence (always sent: it is counted) or on its own timers. Not sending it spares
    // one machine transition per run per list: a run whose status changed does not wait behind the rest.
    // Except a status judged by how long it lasts (a stop while booting, a not-running one after it
    // ran: run-rules.ts judgedWhileItLasts): each list of it may be the one that has lasted.
    if (instance !== null && this.lastPolled !== undefined && sameStatus(instance, this.lastPolled) && !this.judgedByDuration(instance))
      return;
    this.lastPolled = instance ?? undefined;
    if (instance?.actual_status === 'running') this.runningListedAt ??= listedAt;
    this.actor!.send({ type: 'POLL', instance, listedAt });
  }

  private judgedByDuration(instance: InstanceStatus): boolean {
    return judgedWhileItLasts(instance, this.actor?.getSnapshot().context.current?.runningSeenAt != null);
  }

  /** Stops the actor: in-flight calls are aborted; their journal rows let the next start reconcile. */
  stop(): void {
    this.actor?.stop();
  }

  /** One transaction, written only while this daemon holds the run. */
  private fenced<T>(fn: () => T): T {
    return this.deps.ownership.write(this.runId, fn);
  }

  private persist(snapshot: RunSnapshot): void {
    if (this.paused || this.lost) return;
    if (snapshot === this.last && this.pending.length === 0) return;
    this.last = snapshot;
    const events = this.pending;
    this.pending = [];
    const now = this.deps.clock.now();
    const state = runStateOf(snapshot);
    let logged: LoggedEvent[];
    try {
      logged = this.write(snapshot, events, state, now);
    } catch (err) {
      if (err instanceof LeaseLostError) return this.handOver();
      return this.pause(err);
    }
    // Written inside a group commit (many tasks ending at once, ../../store/group-commit.ts), it is
    // kept only if the group commits: if not, the run pauses as if this write had failed.
    this.deps.store.ifRolledBack((err) => {
      if (!this.paused) this.pause(err);
    });
    // An ended attempt frees its offer for the daemon's other runs (not the next attempt's offer).
    // A machine that failed is tried last by the daemon's other runs for a while.
    for (const e of events) {
      if (e.type !== 'attempt.ended') continue;
      this.deps.claims.release(this.runId, e.offerId);
      if (blocksMachine(e.outcome)) this.deps.quarantine.note(e.machineId);
    }
    for (const [i, line] of logged.entries()) this.logEvent(events[i]!, line);
    this.deps.hooks?.committed(this.runId, events, now, this.detection(events, now));
    if (state !== this.lastState) this.log.info({ from: this.lastState, to: state }, `run ${state}`);
    this.lastState = state;
    if (isEndState(state)) this.end();
    else this.deps.onProgress(this.runId);
  }

  /** How long after a list first showed the instance running the run became running (then forgotten). */
  private detection(events: RunEmitted[], now: number): number | undefined {
    let ms: number | undefined;
    for (const e of events) {
      if (e.type === 'attempt.running' && this.runningListedAt !== undefined) ms = now - this.runningListedAt;
      if (e.type === 'attempt.running' || e.type === 'attempt.ended') this.runningListedAt = undefined;
    }
    return ms;
  }

  private write(snapshot: RunSnapshot, events: RunEmitted[], state: RunState, now: number): LoggedEvent[] {
    const { relaxLevel, attemptCount, error } = snapshot.context;
    return storeTransition(this.deps, {
      runId: this.runId,
      spec: this.spec,
      events,
      from: this.lastState,
      to: state,
      context: { relaxLevel, attemptCount, error },
      snapshotJson: JSON.stringify(this.actor!.getPersistedSnapshot()),
      now,
    });
  }

  /**
   * One event's line in the daemon log. A destroy that keeps failing may leave an instance billing:
   * from the first few failures in a row on it is an ALERT at error level (docs/operating.md: Logs).
   */
  private logEvent(e: RunEmitted, line: LoggedEvent): void {
    if (e.type === 'destroy.confirmed') this.destroyFailures.clear(e.instanceId);
    if (e.type === 'destroy.retry' && this.destroyFailures.failed(e.instanceId)) {
      const failures = this.destroyFailures.count(e.instanceId);
      this.log.error(
        { event: line.type, instanceId: e.instanceId, failures },
        `ALERT: the destroy of instance ${e.instanceId} keeps failing (${failures} in a row); it may be billing. ${line.message}`,
      );
      return;
    }
    this.log[line.level]({ event: line.type }, line.message);
  }

  /**
   * The transition was not stored: stop the actor (in-flight calls are abandoned; their journal
   * rows are reconciled on resume) and wait for the supervisor to resume it from the store.
   */
  private pause(err: unknown): void {
    this.paused = true;
    const actor = this.actor;
    this.actor = undefined;
    this.last = undefined;
    this.lastPolled = undefined;
    this.pending = [];
    const { kind, message } = toRunError(err);
    this.log.error(
      { err: { kind, message }, code: (err as { sqliteCode?: string }).sqliteCode },
      `cannot write the store (${message}); run ${this.runId} is paused until ${this.deps.store.backend === 'postgres' ? 'the Postgres store' : 'berth.db'} can be written again`,
    );
    // Not from inside the actor's own notification: stop it once this transition has returned.
    queueMicrotask(() => actor?.stop());
    this.deps.onPaused(this.runId);
  }

  /**
   * Another daemon holds the run now (this one's lease ended: it was paused or cut off): the actor
   * stops, as a killed daemon's would, and the run goes on there from its last stored snapshot.
   */
  private handOver(): void {
    if (this.lost || this.ended) return;
    this.lost = true;
    const actor = this.actor;
    this.actor = undefined;
    this.pending = [];
    this.log.warn(`run ${this.runId} is held by another daemon now; it stops here`);
    queueMicrotask(() => actor?.stop());
    this.deps.claims.release(this.runId);
    this.deps.onLost(this.runId);
  }

  private crashed(err: unknown): void {
    if (err instanceof LeaseLostError) return this.handOver();
    // A machine fault is a bug; the run fails and, holding no live owner now, any instance it made
    // is destroyed by the orphan sweep.
    this.log.error({ err }, 'run machine stopped with an error');
    try {
      const error = { kind: 'internal' as const, message: `internal error: ${String((err as Error)?.message ?? err)}` };
      this.fenced(() => failRunOutsideMachine(this.deps, { id: this.runId, name: this.spec.name }, error, this.deps.clock.now()));
    } catch (writeErr) {
      if (writeErr instanceof LeaseLostError) return this.handOver();
      return this.pause(writeErr);
    }
    this.lastState = 'failed';
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.deps.claims.release(this.runId);
    this.deps.onEnded(this.runId);
  }
}
