// A daemon's leases on a shared (Postgres) store: the runs it drives, its heartbeat (`~daemon:ID`,
// counted by the others to share the account's rate limits) and, when it leads, `~leader` (the
// account-wide duties). All measured on the database's clock, so that daemons on machines whose
// clocks disagree agree on when a lease ends.
//
// Time here never comes from the wall clock, which NTP or an operator may step either way: the
// database's time is read at each renewal and carried forward on the monotonic clock until the next
// (`now`), and how long ago a renewal was sent is measured on the monotonic clock (`expiring`). The
// reading is anchored at the moment its answer came back, so `now` is never ahead of the database:
// a lease another daemon holds never looks ended here before it has, and a renewal sent at
// monotonic time t sets an end at least `leaseMs` after t. This daemon stops acting `marginMs`
// before that (a fifth of the lease, at least 1 s): the margin covers the rate difference of the
// two clocks (parts per million) and the instant between a check and the write it guards; a fenced
// write is checked again by the database itself.
//
// A lease's life here: taken (`take`, at start or in a take-over) → renewed every third of its
// length with every other lease of this daemon in one statement (`renew`) → released when its run
// ends. Renewals that keep failing (the database is unreachable) make the daemon give up every
// lease *before* it can expire (`expiring`): its runs stop, and another daemon, or this one once the
// database answers again, takes them over from their stored snapshots. A lease another daemon took
// meanwhile is simply no longer this daemon's: the renewal does not return it.
import type { Clock } from '../../clock.js';
import { LeaseLostError } from '../../errors.js';
import type { Lease, Store } from '../../store/index.js';
import { idClaimRow } from './daemon-id.js';
import type { ClaimableRun, RunOwnership } from './run-ownership.js';

/** The row of a daemon's heartbeat: its registration on the store (written first with the caps, ./money-caps.ts). */
export const heartbeatRow = (id: string) => `~daemon:${id}`;
/** The row of the leader's lease. */
const LEADER = '~leader';
/** Runs resumed from one start's own leases at most (the rest are taken over like anyone's). */
const HELD_BEFORE_MAX = 100_000;

export interface LeaseOwnerDeps {
  store: Store;
  clock: Clock;
  daemonId: string;
  /** How long a lease lasts unless renewed, ms (cluster.lease_s). */
  leaseMs: number;
  /** This process's claim on its id (./daemon-id.ts), renewed with the leases. */
  incarnation?: string;
}

export interface RenewalRound {
  /** Runs whose lease this daemon no longer holds (it expired and another daemon took it). */
  lost: string[];
  /** This daemon holds the leader's lease after this round. */
  leader: boolean;
  /** Daemons alive, this one included (their heartbeats). */
  daemons: number;
}

export class LeaseOwner implements RunOwnership {
  readonly shared = true;
  readonly daemonId: string;
  private readonly held = new Map<string, Lease>();
  /** The database's time at the last reading, and the monotonic time its answer came back. */
  private anchor: { db: number; mono: number } | undefined;
  /** The monotonic time the last renewal that reached the database was sent. */
  private renewedAt: number | undefined;
  /** The runs this daemon held when it last stopped were read (resumed): a renewal keeps no other row. */
  private resumed = false;
  private leading = false;
  /**
   * Runs given up by `relinquishAll` whose leases may still be this daemon's in the database (it
   * came back before they ended): released at the next renewal, not renewed for nobody.
   */
  private readonly given = new Set<string>();

  constructor(private readonly deps: LeaseOwnerDeps) {
    this.daemonId = deps.daemonId;
  }

  /** Now on the database's clock: its last reading carried forward on the monotonic clock. */
  now(): number {
    const anchor = this.anchor ?? this.readDbClock();
    // Whole ms, rounded down (never ahead): the monotonic clock has fractions, Postgres's BIGINT none.
    return Math.floor(anchor.db + (this.deps.clock.monotonic() - anchor.mono));
  }

  /** Reads the database's clock (throws when it cannot be reached). */
  private readDbClock(): { db: number; mono: number } {
    const db = this.deps.store.leases.serverNow();
    this.anchor = { db, mono: this.deps.clock.monotonic() };
    return this.anchor;
  }

  get leaseMs(): number {
    return this.deps.leaseMs;
  }

  get leader(): boolean {
    return this.leading;
  }

  get ownedCount(): number {
    return this.held.size;
  }

  /**
   * The margin kept before a lease's end: a daemon whose last renewal is older than the lease less
   * this stops acting (a fifth of the lease, at least 1 s), so that it has stopped before any other
   * daemon may take its runs.
   */
  private get marginMs(): number {
    return Math.max(this.deps.leaseMs / 5, 1000);
  }

  write<T>(runId: string, fn: () => T): T {
    const lease = this.held.get(runId);
    if (!lease || this.expiring()) throw new LeaseLostError(runId);
    return this.deps.store.fenced(lease, this.now(), fn);
  }

  check(runId: string): void {
    this.write(runId, () => undefined);
  }

  take(runId: string): boolean {
    const lease = this.deps.store.leases.acquire(runId, this.daemonId, this.now(), this.deps.leaseMs);
    if (!lease) return false;
    this.held.set(runId, lease);
    // Taken back before the renewal that was to release it: driven here again, not released.
    this.given.delete(runId);
    return true;
  }

  release(runId: string): void {
    if (!this.held.delete(runId)) return;
    try {
      this.deps.store.leases.release(runId, this.daemonId);
    } catch {
      // The lease ends on its own; nobody takes an ended run.
    }
  }

  heldBefore(): string[] {
    this.resumed = true;
    return this.deps.store.leases.ownedBy(this.daemonId).slice(0, HELD_BEFORE_MAX);
  }

  /**
   * Stops acting for a run without ending it (its driver handed it over: the lease looked about to
   * end): it leaves the held set at once, so no renewal keeps it, and its lease is released at the
   * next renewal (or ends on its own); then any daemon may take it, this one included.
   */
  giveUp(runId: string): void {
    if (this.held.delete(runId)) this.given.add(runId);
  }

  claimable(limit: number): ClaimableRun[] {
    return this.deps.store.leases.claimable(this.now(), limit);
  }

  cancelRequested(): string[] {
    return this.deps.store.leases.cancelRequested(this.daemonId);
  }

  /**
   * One renewal round: measures the database's clock, extends every lease this daemon still holds
   * (its runs', its heartbeat's, the leader's), and takes the leader's lease when it is free.
   * Throws when the database cannot be reached (see `expiring`).
   */
  renew(): RenewalRound {
    const { store, clock, daemonId, leaseMs } = this.deps;
    const sentAt = clock.monotonic();
    this.readDbClock();
    const now = this.now();
    const round = store.transaction(() => {
      for (const runId of this.given) store.leases.release(runId, daemonId);
      // The store is alive: its generation counts on (a restored backup is found by it at start).
      store.progress();
      const renewed = store.leases.renew(daemonId, now, leaseMs);
      // A run's lease renewed here but driven by nobody here (given up, or left from a start
      // before this one) is released instead: renewed, it would bill for ever with nobody to end it.
      const strays = this.resumed ? renewed.filter((l) => !l.run_id.startsWith('~') && !this.held.has(l.run_id)) : [];
      for (const l of strays) store.leases.release(l.run_id, daemonId);
      store.leases.acquire(heartbeatRow(daemonId), daemonId, now, leaseMs);
      if (this.deps.incarnation) store.leases.acquire(idClaimRow(daemonId), this.deps.incarnation, now, leaseMs);
      const leader = store.leases.acquire(LEADER, daemonId, now, leaseMs);
      return { renewed, leader: leader !== undefined, daemons: store.leases.liveDaemons(now) };
    });
    this.renewedAt = sentAt;
    this.given.clear();
    const still = new Map(round.renewed.map((l) => [l.run_id, l]));
    const lost: string[] = [];
    for (const runId of this.held.keys()) {
      const lease = still.get(runId);
      if (lease) this.held.set(runId, lease);
      else lost.push(runId);
    }
    for (const runId of lost) this.held.delete(runId);
    this.leading = round.leader;
    return { lost, leader: round.leader, daemons: Math.max(1, round.daemons) };
  }

  /**
   * True when the last renewal that reached the database is too old for this daemon to act on its
   * leases any longer: they may end soon, and another daemon may then take its runs.
   */
  expiring(): boolean {
    return this.renewedAt !== undefined && this.sinceRenewalMs() > this.deps.leaseMs - this.marginMs;
  }

  /** Who holds the leader's lease now, as the store says (undefined: nobody). */
  leaderLease(): Pick<Lease, 'owner' | 'epoch'> | undefined {
    return this.deps.store.leases.get(LEADER);
  }

  /**
   * Takes the lead from `from` (a leader whose sweeps are overdue, ./shared-view.ts) while it still
   * holds it; true when this daemon leads now. The old leader's next renewal finds the lease gone
   * and stops leading; no run's lease is touched.
   */
  takeLead(from: Pick<Lease, 'owner' | 'epoch'>): boolean {
    if (this.expiring()) return false;
    const taken = this.deps.store.leases.takeFrom(LEADER, from, this.daemonId, this.now(), this.deps.leaseMs);
    if (taken) this.leading = true;
    return taken !== undefined;
  }

  /** Monotonic ms since the last renewal that reached the database was sent (Infinity before any). */
  private sinceRenewalMs(): number {
    return this.renewedAt === undefined ? Infinity : this.deps.clock.monotonic() - this.renewedAt;
  }

  /** Gives up every lease in memory (they end on their own): the runs held, and the lead. */
  relinquishAll(): string[] {
    const runs = [...this.held.keys()];
    for (const runId of runs) this.given.add(runId);
    this.held.clear();
    this.leading = false;
    this.renewedAt = undefined;
    return runs;
  }

  /** Stops leading and holding runs, and says so in the store (a clean stop: the others take over at once). */
  releaseAll(): void {
    const { store, daemonId } = this.deps;
    const runs = this.relinquishAll();
    try {
      store.transaction(() => {
        for (const runId of runs) store.leases.release(runId, daemonId);
        store.leases.release(LEADER, daemonId);
        store.leases.release(heartbeatRow(daemonId), daemonId);
        if (this.deps.incarnation) store.leases.release(idClaimRow(daemonId), this.deps.incarnation);
      });
    } catch {
      // Unreachable: the leases end on their own.
    }
  }
}
