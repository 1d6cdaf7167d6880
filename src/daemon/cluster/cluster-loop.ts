// The heartbeat of a daemon sharing its store (issue #21): one timer that, every tick,
//   - renews this daemon's leases every third of their length (./lease-owner.ts), hands the runs
//     whose lease was lost back to the supervisor, and follows who leads (the account-wide duties
//     move with the leader's lease) and how many daemons share the account's rate limits;
//   - gives up every lease before it can end when renewals keep failing (the database is gone):
//     the runs stop here before any other daemon may take them;
//   - takes over runs nobody holds (a dead daemon's, once their lease ended; new submissions that
//     found no room where they were sent), and carries cancels sent to other daemons to the runs
//     driven here.
// Each step's failure is logged and tried again on the next tick: the loop never stops while the
// daemon runs.
import { countText } from '../../count-text.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import type { LeaseOwner } from './lease-owner.js';

/** How often the loop looks for runs to take and cancels to carry, ms. */
const CLUSTER_TICK_MS = 1000;

/** What the loop tells the runs (the supervisor). */
export interface ClusterRuns {
  /** Takes what runs it has room for among those nobody holds. */
  takeOver(): void;
  /** This daemon no longer holds these runs: their drivers stop (nothing ends). */
  lost(runIds: string[]): void;
  /** These runs, driven here, were asked to end through another daemon. */
  cancelRequested(runIds: string[]): void;
}

export interface ClusterLoopDeps {
  owner: LeaseOwner;
  runs: ClusterRuns;
  clock: Clock;
  log: Logger;
  /** This daemon now leads (true) or no longer does. */
  onLeader(leads: boolean): void;
  /** How many daemons share the account now (the rate limits are split between them). */
  onDaemons(count: number): void;
  tickMs?: number;
}

export class ClusterLoop {
  private readonly loop: PeriodicLoop;
  private leading = false;
  private daemons = 0;
  /** The monotonic time the last renewal that went through was sent. */
  private lastRenewal: number | undefined;
  private renewalFailing = false;

  constructor(private readonly deps: ClusterLoopDeps) {
    this.loop = new PeriodicLoop({
      clock: deps.clock,
      run: () => this.tick(),
      intervalMs: deps.tickMs ?? CLUSTER_TICK_MS,
      onError: (err) => deps.log.warn({ err: toRunError(err) }, 'the cluster tick failed; trying again on the next'),
    });
  }

  private get renewEveryMs(): number {
    return this.deps.owner.leaseMs / 3;
  }

  /** The first renewal, at start (throws when the database cannot be reached), then the timer. */
  start(): void {
    this.renew();
    this.loop.start();
  }

  /** Looks for runs to take now (a run ended here: there may be room). */
  poke(): void {
    if (this.loop.stopped) return;
    try {
      this.deps.runs.takeOver();
    } catch (err) {
      this.deps.log.warn({ err: toRunError(err) }, 'could not look for runs to take; trying again');
    }
  }

  stop(): void {
    this.loop.stop();
  }

  get leader(): boolean {
    return this.leading;
  }

  /** Daemons sharing the store at the last renewal, this one included. */
  get daemonCount(): number {
    return Math.max(1, this.daemons);
  }

  private tick(): void {
    const { owner, runs, clock, log } = this.deps;
    // On the monotonic clock: a step of the wall clock back neither delays a renewal nor forward hastens one.
    if (this.lastRenewal === undefined || clock.monotonic() - this.lastRenewal >= this.renewEveryMs) {
      try {
        this.renew();
      } catch (err) {
        this.renewFailed(err);
      }
    }
    if (!this.renewalFailing && this.lastRenewal !== undefined) {
      try {
        runs.cancelRequested(owner.cancelRequested());
        runs.takeOver();
      } catch (err) {
        log.warn({ err: toRunError(err) }, 'could not look for runs to take or cancels to carry; trying again');
      }
    }
  }

  private renew(): void {
    const { owner, runs, clock, log } = this.deps;
    const sentAt = clock.monotonic();
    const round = owner.renew();
    this.lastRenewal = sentAt;
    if (this.renewalFailing) log.info('the store answers again: leases renewed');
    this.renewalFailing = false;
    if (round.lost.length > 0) {
      log.warn(
        { runs: round.lost.length },
        `${countText(round.lost.length, 'run')} ${round.lost.length === 1 ? 'was' : 'were'} taken over by another daemon; ${round.lost.length === 1 ? 'it stops' : 'they stop'} here`,
      );
      runs.lost(round.lost);
    }
    this.setLeader(round.leader);
    if (round.daemons !== this.daemons) {
      this.daemons = round.daemons;
      this.deps.onDaemons(round.daemons);
    }
  }

  private renewFailed(err: unknown): void {
    const { owner, runs, log } = this.deps;
    if (!this.renewalFailing) log.warn({ err: toRunError(err) }, 'cannot renew the leases; trying again');
    this.renewalFailing = true;
    if (!owner.expiring()) return;
    // Stop before the leases can end: from then on another daemon may take these runs.
    const given = owner.relinquishAll();
    this.lastRenewal = undefined;
    log.error(
      { runs: given.length },
      `the store has not answered for most of a lease: this daemon stops acting for its ${countText(given.length, 'run')} and leads no more; they are taken over from the store`,
    );
    runs.lost(given);
    this.setLeader(false);
  }

  private setLeader(leads: boolean): void {
    if (leads === this.leading) return;
    this.leading = leads;
    this.deps.log.info(leads ? 'this daemon leads: account-wide duties run here' : 'this daemon no longer leads');
    this.deps.onLeader(leads);
  }
}
