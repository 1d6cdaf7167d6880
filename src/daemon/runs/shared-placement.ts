// Several daemons on one Postgres store: a run is driven by the daemon holding its lease
// (../cluster/run-ownership.ts), and runs nobody holds are taken over by whichever daemon has room.
//
// A run here is: nobody's (live in the store, no lease) → taken (this daemon took its lease and
// drives it from its stored snapshot; unconfirmed until a list of this daemon answers for its
// instance) → confirmed. It leaves when it ends here (its lease is released and room is made for a
// run nobody holds), or when another daemon holds it now (the supervisor's `lost`). A run this build
// cannot read (stored by a later berth in a rolling upgrade, or refused by a stricter parse) is never
// taken: it waits, nobody's, for a daemon that can read it (./unreadable-runs.ts); only a cancel makes
// this daemon take it, to end it.
import type { Config } from '../../config/schema.js';
import { toRunError, LeaseLostError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { RunRow } from '../../store/index.js';
import type { RunOwnership } from '../cluster/run-ownership.js';
import { failRunOutsideMachine } from './run-failed-outside.js';
import { tooOldToResume, upgradeError, type DrivenRuns, type PlacementDeps, type RunPlacement } from './run-placement.js';
import { newerSnapshot, unreadableRun } from './unreadable-runs.js';

/** Runs looked at per take-over round (the rest wait for the next round, a tick later). */
const TAKE_BATCH = 500;

export interface SharedPlacementDeps extends PlacementDeps {
  config: Config;
  log: Logger;
  ownership: RunOwnership;
}

export class SharedPlacement implements RunPlacement {
  private takeOverQueued = false;
  /**
   * Runs taken over (or back) that no list of this daemon has answered for yet: asked for in the
   * next targeted list instead of waiting for a sweep of the whole account. A running one is asked
   * with the running tasks (200 ids a call, only those no longer running are shown: one call for a
   * dead daemon's runs, not one page per 25 of them); any other with the booting ones. Kept with
   * when the run was taken: only an answer listed since then confirms it (another daemon's older
   * sighting, read from the store, does not).
   */
  private readonly taken = new Map<string, number>();
  /**
   * Runs nobody holds that this build cannot read, as the last take-over round found them: skipped
   * without a look until asked to end (their specs do not change), and counted past in the store's
   * batch, where they stay first in line.
   */
  private unreadable = new Set<string>();

  constructor(
    private readonly runs: DrivenRuns,
    private readonly deps: SharedPlacementDeps,
  ) {}

  /**
   * This daemon's own runs from before it stopped first (its leases are its again at once); the
   * take-over that follows takes what it has room for among the runs nobody holds, and the cluster
   * loop takes more every tick.
   */
  resume(): void {
    // Every daemon watches the held runs' limits; the first to see one reached ends it (expire).
    this.runs.hold(this.deps.store.runs.live().filter((row) => row.held_at !== null));
    for (const runId of this.deps.ownership.heldBefore()) this.takeRun(runId);
  }

  /**
   * Takes the runs nobody holds that this daemon has room for: runs under way always (one may hold
   * an instance, which must have an owner), runs asked to end always (they end at once), queued
   * ones while fewer than daemon.max_active_runs are driven here.
   */
  takeOver(): void {
    if (!this.runs.open()) return;
    const max = this.deps.config.daemon.max_active_runs;
    const skipped = this.unreadable;
    this.unreadable = new Set();
    for (const r of this.deps.ownership.claimable(TAKE_BATCH + skipped.size)) {
      if (skipped.has(r.id) && r.cancel_requested_at === null) {
        this.unreadable.add(r.id);
        continue;
      }
      const needsRoom = r.state === 'queued' && r.cancel_requested_at === null;
      if (needsRoom && this.runs.count() >= max) break;
      this.takeRun(r.id);
    }
    this.runs.admit();
  }

  /** A run ended here: there is room for one nobody holds (once per turn however many ended). */
  ended(): void {
    this.queueTakeOver();
  }

  /** Driven here if this daemon has room, else by whichever daemon has (take-over). */
  takesNew(runId: string): boolean {
    return this.runs.count() < this.deps.config.daemon.max_active_runs && this.tookNew(runId);
  }

  /** Whichever daemon has room takes it, as any run nobody holds. */
  lifted(): void {
    this.queueTakeOver();
  }

  /**
   * Nobody's: taken now, and it ends at once (another daemon's hears the cancel from the store).
   * The cancel is stored already: a lease lost while taking it (this daemon's own renewal late under
   * load) leaves it to whichever daemon takes the run next, and the user's cancel is still answered.
   */
  cancelled(row: RunRow): void {
    try {
      this.takeRun(row.id);
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
      this.deps.log.info({ runId: row.id }, `run ${row.id} is asked to end; the daemon that takes it next ends it`);
    }
  }

  /** Lifted by another daemon (or the user) and driven by whoever holds it: its guard ends it. */
  drivenElsewhere(): boolean {
    return true;
  }

  unconfirmed(runId: string): boolean {
    return this.taken.has(runId);
  }

  /** Confirmed if the list was made since the run was taken. */
  confirmed(runId: string, listedAt: number): void {
    if ((this.taken.get(runId) ?? Number.POSITIVE_INFINITY) <= listedAt) this.taken.delete(runId);
  }

  forget(runId: string): void {
    this.taken.delete(runId);
  }

  /** Takes a run just stored; false when the store would not (it is stored: a take-over drives it later). */
  private tookNew(runId: string): boolean {
    try {
      return this.deps.ownership.take(runId);
    } catch (err) {
      this.deps.log.warn({ runId, err: toRunError(err) }, 'could not take a new run now; a take-over drives it later');
      return false;
    }
  }

  /**
   * Takes one run for this daemon and drives it from its stored snapshot; false when it is not to be
   * had. One this build cannot read is looked at before its lease: left to a daemon that can (it is
   * said here), unless it was asked to end.
   */
  private takeRun(runId: string): boolean {
    if (this.runs.has(runId)) return true;
    const row = this.deps.store.runs.get(runId);
    const why = row && row.ended_at === null ? unreadableRun(row) : undefined;
    if (row && why) {
      this.unreadable.add(runId);
      this.runs.keep(row, why);
      if (row.cancel_requested_at === null) return false;
    }
    if (!this.deps.ownership.take(runId)) return false;
    try {
      return this.driveTaken(runId, why !== undefined);
    } catch (err) {
      // Not driven here after all (the store failed half way): the lease goes, or ends on its own,
      // instead of being renewed for a run nobody drives.
      if (!this.runs.has(runId)) this.deps.ownership.release(runId);
      throw err;
    }
  }

  /**
   * Drives a run whose lease this daemon just took, from its stored snapshot; false when it is not
   * to be driven. `unreadable`: this build cannot read it, and it was taken only to be ended.
   */
  private driveTaken(runId: string, unreadable: boolean): boolean {
    const { store, clock, log, ownership } = this.deps;
    const row = store.runs.get(runId);
    if (!row || row.ended_at !== null || row.held_at !== null) {
      ownership.release(runId);
      return false;
    }
    if (tooOldToResume(row)) {
      ownership.write(runId, () => failRunOutsideMachine(this.deps, row, upgradeError(row), clock.now()));
      ownership.release(runId);
      return false;
    }
    // Taken only because it was asked to end, or saved by a later berth since it was looked at: the
    // supervisor ends it here (asked to) or keeps it, without a driver either way.
    if (unreadable || newerSnapshot(row) !== null) {
      this.runs.drive(row);
      ownership.release(runId);
      return false;
    }
    const takenAt = clock.now();
    // The run's story says which daemon drives it from when (a hand-over is otherwise invisible).
    ownership.write(runId, () =>
      store.events.append({
        runId,
        at: takenAt,
        type: 'run.taken',
        message: `driven by daemon ${ownership.daemonId} from now on (${row.state})`,
        data: { daemon: ownership.daemonId, state: row.state },
      }),
    );
    log.info({ runId, state: row.state }, `run ${runId} is driven by this daemon now`);
    this.runs.drive(row);
    this.taken.set(runId, takenAt);
    if (row.cancel_requested_at !== null) this.runs.cancel(row.id);
    return true;
  }

  private queueTakeOver(): void {
    if (this.takeOverQueued) return;
    this.takeOverQueued = true;
    queueMicrotask(() => {
      this.takeOverQueued = false;
      try {
        this.takeOver();
      } catch (err) {
        this.deps.log.warn({ err: toRunError(err) }, 'could not look for runs to take; the next tick does');
      }
    });
  }
}
