// Which of the store's live runs this daemon drives, and when it takes one: the supervisor asks its
// placement and never which kind of store it is on. Two kinds, chosen by ./compose-runs.ts:
//
// - SolePlacement (here): a SQLite store, which one daemon holds alone: every live run is driven
//   here from the start, a new run at once, a run lifted from its hold at once.
// - SharedPlacement (./shared-placement.ts): a Postgres store shared by several daemons: a run is
//   driven by whichever daemon took its lease, and runs nobody holds are taken over.
import type { Clock } from '../../clock.js';
import type { RunRow, Store } from '../../store/index.js';
import type { RunError } from '../../../machines/run-rules.js';
import { RunDriver } from './run-driver.js';
import { failRunOutsideMachine } from './run-failed-outside.js';
import type { RunHooks } from './run-hooks.js';
import { newerSnapshot, type Unreadable } from './unreadable-runs.js';

/** What a placement may do with the runs driven here (the supervisor's registry of drivers). */
export interface DrivenRuns {
  /** True once the runs have resumed, until the daemon stops: runs are driven now. */
  open(): boolean;
  /** How many runs have a driver here, queued ones included. */
  count(): number;
  has(runId: string): boolean;
  /**
   * Starts a driver for a stored run, from its snapshot; a run this build cannot read gets none
   * (it is kept and said; asked to end, it ends: ./unreadable-runs.ts).
   */
  drive(row: RunRow): void;
  /** A live run this build cannot read, not driven here: said once (the run's events, the log). */
  keep(row: RunRow, why: Unreadable): void;
  /** Asks the run driven here to end. */
  cancel(runId: string): void;
  /** Runs held after a restore: no driver, their limits watched (and a warning that they wait for the user). */
  hold(rows: RunRow[]): void;
  /** Admits queued runs while there is room. */
  admit(): void;
}

export interface RunPlacement {
  /** At start: drives the store's live runs that are this daemon's (held ones are only watched). */
  resume(): void;
  /** Takes what it has room for among the runs nobody holds (every tick of the cluster loop). */
  takeOver(): void;
  /** A run driven here ended: there is room for another. */
  ended(): void;
  /** A run just submitted: true when it is driven here now. */
  takesNew(runId: string): boolean;
  /** The user lifted a run's hold (after a restore). */
  lifted(runId: string): void;
  /** A run with no driver here was asked to end (`row`: as it was before the cancel was stored). */
  cancelled(row: RunRow): void;
  /** A live run with no driver here and no hold is another daemon's to drive (and to end). */
  drivenElsewhere(): boolean;
  /** A run taken here that no list of this daemon has answered for yet (asked for in the next targeted list). */
  unconfirmed(runId: string): boolean;
  /** A list made at `listedAt` answered for the run's instance. */
  confirmed(runId: string, listedAt: number): void;
  /** The run is no longer driven here. */
  forget(runId: string): void;
}

/** What a placement is built from, besides the runs driven here. */
export interface PlacementDeps {
  store: Store;
  clock: Clock;
  /** Told of a run that fails outside its machine. */
  hooks?: RunHooks | undefined;
}

/**
 * Whether a run's snapshot comes from a machine version this build no longer migrates (older than
 * it reads): such a run fails `upgrade`. One from a later version is kept instead (./unreadable-runs.ts).
 */
export function tooOldToResume(row: RunRow): boolean {
  return !RunDriver.canResume(row) && newerSnapshot(row) === null;
}

/** A run saved by an older version of berth that this one cannot migrate: it fails, and the orphan sweep destroys what it held. */
export function upgradeError(row: RunRow): RunError {
  return {
    kind: 'upgrade',
    message: `This run was saved by an older version of berth (machine v${row.machine_version}) that this one no longer migrates, and cannot be resumed; its instances are destroyed.`,
  };
}

/** A SQLite store: one daemon, every live run driven here. */
export class SolePlacement implements RunPlacement {
  constructor(
    private readonly runs: DrivenRuns,
    private readonly deps: PlacementDeps,
  ) {}

  resume(): void {
    const held: RunRow[] = [];
    // May be called again after a store write failed part way (berth.db locked by another program):
    // runs already resumed are skipped, and the daemon counts as resumed only once all are.
    for (const row of this.deps.store.runs.live()) {
      if (this.runs.has(row.id)) continue;
      if (row.held_at !== null) {
        held.push(row);
        continue;
      }
      if (tooOldToResume(row)) {
        // A snapshot from a machine version this build no longer migrates cannot be restored safely.
        failRunOutsideMachine(this.deps, row, upgradeError(row), this.deps.clock.now());
        continue;
      }
      // One this build cannot read (a downgrade) is kept, not driven: a cancel stored for it ends it.
      this.runs.drive(row);
      if (row.cancel_requested_at !== null) this.runs.cancel(row.id);
    }
    this.runs.hold(held);
  }

  takeOver(): void {}

  ended(): void {}

  takesNew(): boolean {
    return true;
  }

  lifted(runId: string): void {
    if (!this.runs.open()) return;
    this.runs.drive(this.deps.store.runs.get(runId)!);
    this.runs.admit();
  }

  cancelled(row: RunRow): void {
    // A run with no driver is held (its hold was lifted with the cancel) or kept (this build cannot
    // read it: it ends here); resumeAll drove the others.
    this.runs.drive(this.deps.store.runs.get(row.id)!);
    this.runs.cancel(row.id);
  }

  drivenElsewhere(): boolean {
    return false;
  }

  unconfirmed(): boolean {
    return false;
  }

  confirmed(): void {}

  forget(): void {}
}
