// Which runs this daemon may act for, and the fence every side effect passes. Two kinds:
//
// - SoleOwner: a SQLite store, which one daemon holds alone (the daemon.lock file): every live run
//   is this daemon's, and a fenced write is a plain transaction.
// - LeaseOwner (./lease-owner.ts): a Postgres store shared by several daemons: a run is this
//   daemon's while it holds the run's lease, and a fenced write checks that lease in its own
//   transaction, so a daemon that lost a run (paused, cut off, taken over) writes no intent and so
//   sends no call.
import type { Store } from '../../store/index.js';

/** A live run another daemon may take (src/store/leases.ts claimable). */
export interface ClaimableRun {
  id: string;
  state: string;
  cancel_requested_at: number | null;
}

export interface RunOwnership {
  /** True when several daemons share the store (runs are taken and handed over through leases). */
  readonly shared: boolean;
  /** This daemon's id (its leases' owner). */
  readonly daemonId: string;
  /**
   * Runs fn in one transaction only while this daemon holds `runId`: the write of a side effect's
   * intent and of every transition. Throws LeaseLostError, having written nothing, otherwise.
   */
  write<T>(runId: string, fn: () => T): T;
  /** Throws LeaseLostError unless this daemon holds `runId` now (before a destroy or a bid change). */
  check(runId: string): void;
  /** Takes `runId` for this daemon: false when another daemon holds it. */
  take(runId: string): boolean;
  /** Gives `runId` up (it ended, or this daemon stops driving it). */
  release(runId: string): void;
  /**
   * Stops holding `runId` without a store call (its driver handed it over: the lease may be about
   * to end): never renewed from now on, released when the store next answers.
   */
  giveUp(runId: string): void;
  /** The runs this daemon held a lease on when it last stopped or died (taken back first on start). */
  heldBefore(): string[];
  /** Live runs nobody holds, at most `limit` (see claimable's order). */
  claimable(limit: number): ClaimableRun[];
  /** Runs this daemon holds that were asked to end through another daemon. */
  cancelRequested(): string[];
}

/** A SQLite store: one daemon, every run its own. */
export class SoleOwner implements RunOwnership {
  readonly shared = false;
  readonly daemonId = 'sole';

  constructor(private readonly store: Pick<Store, 'transaction'>) {}

  write<T>(_runId: string, fn: () => T): T {
    return this.store.transaction(fn);
  }

  check(): void {}

  take(): boolean {
    return true;
  }

  release(): void {}

  giveUp(): void {}

  heldBefore(): string[] {
    return [];
  }

  claimable(): ClaimableRun[] {
    return [];
  }

  cancelRequested(): string[] {
    return [];
  }
}
