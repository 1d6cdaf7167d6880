// The account's credit as the daemon knows it: read from users/current every
// `account.check_interval_s` (rate group `other`), and at once when asked (a `client:low_credit`
// webhook). Below `account.min_credit_usd` the create gate lets no create start; while a create
// waits for credit the gate says so (`setHeld`) and the credit is read every
// `account.held_check_interval_s` instead, so a top-up lets the runs go on within that.
//
// With several daemons on one store only the leader calls users/current; the others read its figure
// from the store at the same cadence. A `client:low_credit` webhook may reach any of them: one that
// does not lead asks the leader through the store (`lowCredit`), the leader looks for such a request
// every second and reads the service at once, and the asking daemon reads the leader's new figure
// from the store every second for a while (before, it read the leader's last figure, up to
// `account.check_interval_s` old, and the webhook changed nothing).
//
// States: unread (no read has answered yet: the create gate lets no create start, issue #49; a
// read that failed for now is tried again every UNREAD_RETRY_MS) → unknown (the key may not read
// it: creates are not held back for want of a figure) or ok ⇄ low. The first answer and each change of low wake the gate; each change is logged
// once. A daemon that does not lead, and finds no figure of the leader's in the store within
// UNREAD_MAX_MS of its start, counts the credit unknown (a leader that cannot read it saves none).
import { creditOf } from '../../account/credit.js';
import type { CurrentUser, MarketClient } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import { BerthError, toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { PeriodicLoop } from '../../periodic-loop.js';

export interface AccountWatchDeps {
  client: Pick<MarketClient, 'currentUser'>;
  clock: Clock;
  log: Logger;
  minCreditUsd: number;
  intervalMs: number;
  /** Ms between reads while a create waits for credit (never longer than intervalMs). */
  heldIntervalMs: number;
  /** Called when the credit crosses account.min_credit_usd either way. */
  onChange(): void;
  /**
   * Several daemons on one store: only the leader reads the credit from the service and keeps it
   * in the store (`save`); the others read that (`load`: undefined while none is kept).
   */
  shared?: {
    leads(): boolean;
    save(credit: number | null): void;
    load(): number | null | undefined;
    /** Asks the leader for a read of the service now (a low_credit webhook received here). */
    request(): void;
    /** How many reads were asked for so far (undefined: none ever). */
    requests(): number | undefined;
  };
}

/** How often a shared store is looked at for a read asked of the leader, or its answer, ms. */
const SHARED_POLL_MS = 1000;
/** How long a daemon that asked the leader for a read follows the stored figure closely, ms. */
const FOLLOW_MS = 30_000;
/** How soon a first read that failed for now (the network, a 5xx, a rate limit) is tried again, ms. */
const UNREAD_RETRY_MS = 5000;
/** How long a daemon that does not lead waits for the leader's first figure before it counts the credit unknown, ms. */
const UNREAD_MAX_MS = 30_000;

export class AccountWatch {
  private creditUsd: number | null = null;
  /** A read has answered (a figure, none, or a failure). */
  private read1 = false;
  /** When start() was called (the clock's now); null before. */
  private startedAt: number | null = null;
  private readonly abort = new AbortController();
  private held = false;
  /** The reads of the credit. */
  private readonly reads: PeriodicLoop;
  /** A shared store: the leader looks for reads asked of it, another daemon follows the stored figure. */
  private readonly polls: PeriodicLoop;
  /** The count of read requests this daemon answered up to, as the leader. */
  private answered: number | undefined;
  /** Until when (ms) this daemon reads the stored figure every second, after asking for a read. */
  private followUntil = 0;

  constructor(private readonly deps: AccountWatchDeps) {
    const { clock, log, intervalMs, heldIntervalMs } = deps;
    this.reads = new PeriodicLoop({
      clock,
      run: () => this.readCredit(),
      intervalMs: () => (!this.read1 ? UNREAD_RETRY_MS : this.held ? Math.min(heldIntervalMs, intervalMs) : intervalMs),
      onError: (err) => {
        if (this.reads.stopped) return;
        // The last figure stands: a failed read neither holds creates back nor lets them go. A
        // first read the key may not make (auth, permission) answers all the same: the credit is
        // unknown, and creates go (they meet the refusal themselves). One that may answer later
        // (the network, a 5xx, a rate limit) is tried again soon: creates wait for it.
        log.warn({ err: toRunError(err) }, 'could not read the account credit (users/current); keeping the last figure');
        if (!this.read1 && !(err instanceof BerthError && err.retryable)) this.firstAnswer();
      },
    });
    this.polls = new PeriodicLoop({
      clock,
      run: () => this.poll(),
      intervalMs: SHARED_POLL_MS,
      onError: () => {
        // The store cannot be read now: the next poll tries again.
      },
    });
  }

  /** The last credit read, $; null while unknown. */
  get credit(): number | null {
    return this.creditUsd;
  }

  /** True when a credit was read and it is below account.min_credit_usd. */
  get low(): boolean {
    return this.creditUsd !== null && this.creditUsd < this.deps.minCreditUsd;
  }

  get minCreditUsd(): number {
    return this.deps.minCreditUsd;
  }

  /** Whether a read of the credit has answered yet (a figure, or a failure): until then no create starts. */
  get read(): boolean {
    return this.read1;
  }

  /** Starts the periodic reads: the first one at once while none has answered, else after an interval. */
  start(): void {
    this.startedAt ??= this.deps.clock.now();
    this.reads.start(this.read1 ? undefined : 0);
    if (this.deps.shared) {
      // Requests made before this daemon started are not its to answer.
      try {
        this.answered = this.deps.shared.requests();
      } catch {
        // unreadable now: the first poll answers whatever is asked
      }
      this.polls.start();
    }
  }

  /** A `client:low_credit` webhook: reads the credit now, through the leader when another daemon leads. */
  lowCredit(): void {
    const { shared, clock } = this.deps;
    if (shared && !shared.leads()) {
      try {
        shared.request();
      } catch (err) {
        this.deps.log.warn({ err: toRunError(err) }, 'could not ask the leading daemon for a credit read; its next read counts');
      }
      this.followUntil = clock.now() + FOLLOW_MS;
      return;
    }
    void this.checkNow();
  }

  /** A users/current answer read elsewhere (the start-up checks). */
  accept(user: CurrentUser): void {
    this.set(creditOf(user));
  }

  /** Reads the credit now (at most one read in flight); resolves once it is read or failed. */
  checkNow(): Promise<void> {
    return this.reads.checkNow();
  }

  /**
   * The create gate: whether some create waits for credit now. Becoming held brings the next read
   * to within heldIntervalMs; once nothing waits, the read after next is back at the slow interval.
   */
  setHeld(held: boolean): void {
    if (held === this.held) return;
    this.held = held;
    if (held) this.reads.soon(Math.min(this.deps.heldIntervalMs, this.deps.intervalMs));
  }

  stop(): void {
    this.reads.stop();
    this.polls.stop();
    this.abort.abort();
  }

  /** The leader: a read asked for since it last answered one. Another daemon: the figure, while it follows. */
  private poll(): void {
    const shared = this.deps.shared!;
    if (shared.leads()) {
      const asked = shared.requests();
      if (asked !== undefined && asked !== this.answered) {
        this.answered = asked;
        void this.checkNow();
      }
    } else if (!this.read1 || this.deps.clock.now() < this.followUntil) {
      const stored = shared.load();
      if (stored !== undefined) this.set(stored);
      else if (!this.read1 && this.startedAt !== null && this.deps.clock.now() - this.startedAt >= UNREAD_MAX_MS) this.firstAnswer();
    }
  }

  /** The first answer: the gate looks at its waiting creates again. */
  private firstAnswer(): void {
    if (this.read1) return;
    this.read1 = true;
    this.deps.onChange();
  }

  private async readCredit(): Promise<void> {
    const { shared } = this.deps;
    if (shared && !shared.leads()) {
      // Another daemon leads: its reading, from the store, costs the account no call.
      const stored = shared.load();
      if (stored !== undefined) this.set(stored);
      return;
    }
    const credit = creditOf(await this.deps.client.currentUser({ signal: this.abort.signal }));
    this.set(credit);
    shared?.save(credit);
  }

  private set(credit: number | null): void {
    const wasLow = this.low;
    this.creditUsd = credit;
    if (this.low === wasLow) return this.firstAnswer();
    this.read1 = true;
    const min = this.deps.minCreditUsd;
    if (this.low)
      this.deps.log.warn(
        { credit, min_credit_usd: min },
        `the account credit ($${credit!.toFixed(2)}) is below account.min_credit_usd ($${min.toFixed(2)}): no new create starts until it is back`,
      );
    else
      this.deps.log.info(
        { credit, min_credit_usd: min },
        `the account credit ($${(credit ?? 0).toFixed(2)}) is back above account.min_credit_usd: creates go on`,
      );
    this.deps.onChange();
  }
}
