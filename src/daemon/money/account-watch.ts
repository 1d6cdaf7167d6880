// The account's credit as the daemon knows it: read from users/current every
// `account.check_interval_s` (rate group `other`), and at once when asked (a `client:low_credit`
// webhook). Below `account.min_credit_usd` the create gate lets no create start; while a create
// waits for credit the gate says so (`setHeld`) and the credit is read every
// `account.held_check_interval_s` instead, so a top-up lets the runs go on within that.
//
// With several daemons on one store only the leader calls users/current; the others read its figure
// from the store at the same cadence.
//
// States: unknown (not read yet, or the key may not read it: creates are not held back for want of
// a figure) → ok ⇄ low. Each change is logged once and wakes the gate.
import { creditOf } from '../../account/credit.js';
import type { CurrentUser, MarketClient } from '../../client/types.js';
import type { Clock, Timer } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';

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
  shared?: { leads(): boolean; save(credit: number | null): void; load(): number | null | undefined };
}

export class AccountWatch {
  private creditUsd: number | null = null;
  private timer: Timer | undefined;
  private reading: Promise<void> | undefined;
  private readonly abort = new AbortController();
  private stopped = false;
  private held = false;

  constructor(private readonly deps: AccountWatchDeps) {}

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

  /** Starts the periodic reads, the first one after an interval (the start-up checks read it first). */
  start(): void {
    this.schedule();
  }

  /** A users/current answer read elsewhere (the start-up checks). */
  accept(user: CurrentUser): void {
    this.set(creditOf(user));
  }

  /** Reads the credit now (at most one read in flight); resolves once it is read or failed. */
  checkNow(): Promise<void> {
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
      this.schedule();
    });
    return this.reading;
  }

  /**
   * The create gate: whether some create waits for credit now. Becoming held brings the next read
   * to within heldIntervalMs; once nothing waits, the read after next is back at the slow interval.
   */
  setHeld(held: boolean): void {
    if (held === this.held) return;
    this.held = held;
    if (held && !this.reading) this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.abort.abort();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer?.cancel();
    const { intervalMs, heldIntervalMs } = this.deps;
    this.timer = this.deps.clock.setTimer(() => void this.checkNow(), this.held ? Math.min(heldIntervalMs, intervalMs) : intervalMs);
  }

  private async read(): Promise<void> {
    const { shared } = this.deps;
    try {
      if (shared && !shared.leads()) {
        // Another daemon leads: its reading, from the store, costs the account no call.
        const stored = shared.load();
        if (stored !== undefined) this.set(stored);
        return;
      }
      const credit = creditOf(await this.deps.client.currentUser({ signal: this.abort.signal }));
      this.set(credit);
      shared?.save(credit);
    } catch (err) {
      if (this.stopped) return;
      // The last figure stands: a failed read neither holds creates back nor lets them go.
      this.deps.log.warn({ err: toRunError(err) }, 'could not read the account credit (users/current); keeping the last figure');
    }
  }

  private set(credit: number | null): void {
    const wasLow = this.low;
    this.creditUsd = credit;
    if (this.low === wasLow) return;
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
