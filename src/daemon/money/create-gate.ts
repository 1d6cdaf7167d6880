// The create gate: the daemon-wide caps and the account's credit, checked in the create actor
// before the attempt's intent is journaled. A create that would pass a cap, or that would start
// while the credit is low, waits here (the run stays `creating`, with one event saying why); nothing
// running is ever destroyed by a cap.
//
//   budget.max_usd_per_hour  Σ billed $/h of every instance that may bill now, creates in flight
//                            included, plus this create's price, must stay within it;
//   budget.max_usd_per_day   what the last 24 h cost, plus this create's price over the spec's
//                            boot_timeout_s, must stay within it;
//   account.min_credit_usd   the credit last read must not be below it; until a first read of it
//                            has answered (a daemon just started), no create starts at all.
//
// A waiting create is checked again whenever a run moves (an instance may be gone), when the credit
// is read, and every poll interval (the 24 h window slides). The check and the intent's journal row
// are one synchronous step, so two creates can never both fit under a cap only one fits under.
// A wait ends without a create when the run is cancelled, expired or past its deadline meanwhile.
import type { CreateInput } from '../../../machines/run-machine.js';
import type { Clock } from '../../clock.js';
import { BerthError, toRunError } from '../../errors.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import type { Logger } from '../../logger.js';
import { overCap } from '../../money-rules.js';
import type { Store } from '../../store/index.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import type { AccountWatch } from './account-watch.js';
import { usdText } from '../../usd-text.js';
import { HOUR_MS } from '../../store/spend.js';
import { billOf, billsSince, usdPerHour, usdSince, type Bill } from '../instances/holdings.js';

const DAY_MS = 24 * HOUR_MS;

export interface CreateGateDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  account: Pick<AccountWatch, 'read' | 'low' | 'credit' | 'minCreditUsd' | 'setHeld'>;
  /**
   * The daemon-wide caps, read at each decision: the config's, or on a shared store the store's
   * (../cluster/money-caps.ts), which another daemon may lower meanwhile.
   */
  caps(): { maxUsdPerHour: number | null; maxUsdPerDay: number | null };
  /** How often a waiting create is checked again without being woken, ms. */
  recheckMs: number;
  /** The resolved specs of the runs the daemon drives (their boot_timeout_s prices a boot). */
  specs: RunSpecs;
  /** The run was cancelled, expired or passed its deadline while its create waited. */
  endRequested(runId: string): boolean;
  /** Runs a cap check and its intent as one step across daemons (a shared store; see `serialized`). */
  serialize?: <T>(fn: () => T) => T;
}

/** Why a create may not start now (the run's event says it), or null when it may. */
export interface Hold {
  /** Stable per cause, so a wait that goes on for the same reason is one event. */
  key: 'per_hour' | 'per_day' | 'low_credit' | 'credit_unread';
  message: string;
}

interface Waiter {
  input: CreateInput;
  hold: Hold;
  check(totals: Totals): void;
}

/**
 * What the caps compare against, read once per pass over the waiting creates (one query however
 * many wait); a create let through in the pass adds its $/h for the ones after it.
 */
class Totals {
  private figures: { live: number; day: number } | undefined;
  constructor(
    private readonly store: Store,
    readonly now: number,
    /** What booting an instance at `dphTotal` may cost the run: its boot_timeout_s at that price. */
    private readonly bootUsd: (runId: string, dphTotal: number) => number,
  ) {}

  /**
   * `day` is what the last 24 h cost plus what the instances still booting may yet cost before
   * they run (their boot cost less what they have billed): creates admitted one after another
   * each count the boots of those before them, so together they cannot pass the cap either.
   */
  get(): { live: number; day: number } {
    if (this.figures) return this.figures;
    const bills = billsSince(this.store, this.now - DAY_MS, this.now);
    const booting = (b: Bill) => (b.booting ? Math.max(0, this.bootUsd(b.runId, b.usdPerHour) - b.usd()) : 0);
    this.figures = {
      live: usdPerHour(bills),
      day: usdSince(bills, this.now - DAY_MS) + bills.reduce((s, b) => s + booting(b), 0),
    };
    return this.figures;
  }

  started(input: CreateInput): void {
    if (!this.figures) return;
    this.figures.live += input.dphTotal;
    this.figures.day += this.bootUsd(input.runId, input.dphTotal);
  }
}

/** A create that did not start: the run ended while it waited. */
export class CreateAbandoned extends BerthError {
  constructor(message: string) {
    super('aborted', message);
  }
}

type Serialized<T> = { go: true; value: T } | { go: false; hold: Hold };

export class CreateGate {
  private readonly waiting = new Set<Waiter>();
  /** Waiting creates are checked again every recheckMs without being woken (the 24 h window slides). */
  private readonly recheck: PeriodicLoop;
  private wakeQueued = false;

  constructor(private readonly deps: CreateGateDeps) {
    this.recheck = new PeriodicLoop({
      clock: deps.clock,
      run: () => {
        if (this.waiting.size > 0) this.checkAll();
      },
      intervalMs: () => (this.waiting.size > 0 ? deps.recheckMs : null),
      onError: (err) => deps.log.warn({ err: toRunError(err) }, 'could not check the waiting creates again; trying at the next recheck'),
    });
  }

  /**
   * Resolves with `start()`'s result, called at the moment the create may go (at once, or once a
   * wait ends): `start` journals the intent, in the same step as the check. Rejects with
   * CreateAbandoned when the run ended while waiting, or with the signal's reason.
   */
  admit<T>(input: CreateInput, signal: AbortSignal, start: () => T): Promise<T> {
    const first = this.serialized(input, start);
    if (first.go) return Promise.resolve(first.value);
    const hold = first.hold;
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter = {
        input,
        hold,
        check: (totals) => {
          if (this.deps.endRequested(input.runId)) {
            done();
            return reject(
              new CreateAbandoned(`attempt #${input.n} did not start: the run ended while its create waited (${waiter.hold.message})`),
            );
          }
          let now = this.holdFor(input, totals);
          if (now === null) {
            let go: Serialized<T>;
            try {
              // Checked again, in one step with the intent, against what other daemons started meanwhile.
              go = this.serialized(input, start);
            } catch (err) {
              done();
              return reject(err);
            }
            if (go.go) {
              done();
              totals.started(input);
              this.note(input, `the create of attempt #${input.n} goes ahead`, 'create.resumed', null);
              return resolve(go.value);
            }
            now = go.hold;
          }
          if (now.key !== waiter.hold.key) this.note(input, now.message, 'create.waiting', now);
          waiter.hold = now;
          this.tellAccount();
        },
      };
      const onAbort = () => {
        done();
        reject(signal.reason);
      };
      const done = () => {
        this.waiting.delete(waiter);
        signal.removeEventListener('abort', onAbort);
        if (this.waiting.size === 0) this.recheck.cancelPending();
        this.tellAccount();
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.add(waiter);
      this.note(input, hold.message, 'create.waiting', hold);
      // An armed recheck stands (it is never further off than recheckMs).
      this.recheck.soon(this.deps.recheckMs);
      this.tellAccount();
    });
  }

  /**
   * The check and the intent in one step. With several daemons on one store, that step also holds
   * the store's caps lock (`serialize`), so two daemons can never both fit a create under a cap only
   * one fits under; one daemon's step is synchronous already.
   */
  private serialized<T>(input: CreateInput, start: () => T): Serialized<T> {
    const step = (): Serialized<T> => {
      const hold = this.holdFor(input, this.totals());
      return hold ? { go: false, hold } : { go: true, value: start() };
    };
    return this.deps.serialize ? this.deps.serialize(step) : step();
  }

  /** A create waiting for credit has the credit read more often (a top-up is seen within a minute). */
  private tellAccount(): void {
    let held = false;
    for (const w of this.waiting) if (w.hold.key === 'low_credit' || w.hold.key === 'credit_unread') held = true;
    this.deps.account.setHeld(held);
  }

  /** Something changed (a run moved, the credit was read): waiting creates check again, once per turn. */
  wake(): void {
    if (this.waiting.size === 0 || this.wakeQueued) return;
    this.wakeQueued = true;
    queueMicrotask(() => {
      this.wakeQueued = false;
      this.checkAll();
    });
  }

  /** The caps this gate holds creates to now (GET /v1/account shows them). */
  caps(): { maxUsdPerHour: number | null; maxUsdPerDay: number | null } {
    return this.deps.caps();
  }

  /** How many creates wait (for /healthz and tests). */
  get waitingCount(): number {
    return this.waiting.size;
  }

  stop(): void {
    this.recheck.stop();
  }

  private totals(): Totals {
    return new Totals(this.deps.store, this.deps.clock.now(), (runId, dph) => this.bootUsd(runId, dph));
  }

  private bootUsd(runId: string, dphTotal: number): number {
    return (dphTotal * (this.deps.specs.get(runId)?.boot_timeout_s ?? 0) * 1000) / HOUR_MS;
  }

  /** Every waiting create, oldest first, against one reading of the totals. */
  private checkAll(): void {
    const totals = this.totals();
    for (const w of [...this.waiting]) w.check(totals);
  }

  /**
   * Why a raised bid of attempt `n` may not be sent now, or null: the same caps as a create, with
   * the attempt's own price in the totals replaced by the raised one. It never waits: an outbid
   * instance is stopped, so a bid the caps refuse ends the attempt (the run fails over) instead.
   */
  bidHold(input: { runId: string; n: number; dphTotal: number }): Hold | null {
    const own = billOf(this.deps.store, input.runId, input.n, this.deps.clock.now())?.usdPerHour ?? 0;
    return this.capsHold({ runId: input.runId, dphTotal: input.dphTotal }, this.totals(), own, 'this raised bid');
  }

  /**
   * Why the daemon-wide caps refuse `extraDph` more $/h billed from now on (a host's price increase,
   * which once accepted holds for the instance's life), or null: budget.max_usd_per_hour with the
   * increase added to what bills now, and budget.max_usd_per_day with what the increase adds over the
   * next 24 h added to what the last 24 h cost.
   */
  increaseHold(extraDph: number): string | null {
    const { maxUsdPerHour, maxUsdPerDay } = this.deps.caps();
    if (maxUsdPerHour == null && maxUsdPerDay == null) return null;
    const { live, day } = this.totals().get();
    if (maxUsdPerHour != null && overCap(live + extraDph, maxUsdPerHour)) {
      return `budget.max_usd_per_hour ($${maxUsdPerHour}/h) would be passed: live instances bill $${live.toFixed(3)}/h, and this increase adds $${extraDph.toFixed(3)}/h`;
    }
    const added = extraDph * 24;
    if (maxUsdPerDay != null && overCap(day + added, maxUsdPerDay)) {
      return `budget.max_usd_per_day (${usdText(maxUsdPerDay)}) would be passed: the last 24 h cost ${usdText(day)}, and this increase adds ${usdText(added)} over the next 24 h ($${extraDph.toFixed(3)}/h)`;
    }
    return null;
  }

  /**
   * Why the daemon-wide caps refuse keeping an instance billing `dphTotal` warm for `seconds` more
   * (issue #51), or null: it bills already (its $/h is in what bills now), so only
   * budget.max_usd_per_day, with what the warm time may add to what the last 24 h cost.
   */
  warmHold(dphTotal: number, seconds: number): string | null {
    const { maxUsdPerDay } = this.deps.caps();
    if (maxUsdPerDay == null) return null;
    const { day } = this.totals().get();
    const added = (dphTotal * seconds) / 3600;
    return overCap(day + added, maxUsdPerDay)
      ? `budget.max_usd_per_day (${usdText(maxUsdPerDay)}) would be passed: the last 24 h cost ${usdText(day)}, and keeping it warm may add ${usdText(added)}`
      : null;
  }

  /** Why this create may not start now, or null. */
  private holdFor(input: CreateInput, totals: Totals): Hold | null {
    const { account } = this.deps;
    // A daemon just started has not read the credit yet: a create now could be one the floor forbids.
    if (!account.read) {
      return {
        key: 'credit_unread',
        message: 'the account credit has not been read yet (users/current): no create starts until it is',
      };
    }
    if (account.low) {
      return {
        key: 'low_credit',
        message: `the account credit ($${account.credit!.toFixed(2)}) is below account.min_credit_usd ($${account.minCreditUsd.toFixed(2)}): no create starts until it is back`,
      };
    }
    return this.capsHold(input, totals, 0, 'this offer');
  }

  /** The daemon-wide caps: `replacing` is $/h already counted in the totals that `input` takes the place of. */
  private capsHold(input: { runId: string; dphTotal: number }, totals: Totals, replacing: number, what: string): Hold | null {
    const { maxUsdPerHour, maxUsdPerDay } = this.deps.caps();
    if (maxUsdPerHour == null && maxUsdPerDay == null) return null;
    if (maxUsdPerHour != null) {
      const live = totals.get().live - replacing;
      if (overCap(live + input.dphTotal, maxUsdPerHour)) {
        return {
          key: 'per_hour',
          message: `budget.max_usd_per_hour ($${maxUsdPerHour}/h) would be passed: live instances and creates in flight bill $${live.toFixed(3)}/h, and ${what} $${input.dphTotal.toFixed(3)}/h`,
        };
      }
    }
    if (maxUsdPerDay != null) {
      const { day } = totals.get();
      const bootS = this.deps.specs.get(input.runId)?.boot_timeout_s ?? 0;
      const boot = this.bootUsd(input.runId, input.dphTotal);
      if (overCap(day + boot, maxUsdPerDay)) {
        return {
          key: 'per_day',
          message: `budget.max_usd_per_day (${usdText(maxUsdPerDay)}) would be passed: the last 24 h cost ${usdText(day)} (what instances still booting may cost included), and booting ${what} (${bootS} s at $${input.dphTotal.toFixed(3)}/h) ${usdText(boot)}`,
        };
      }
    }
    return null;
  }

  /** One event on the run (and a log line) when its create starts waiting, changes reason, or goes ahead. */
  private note(input: CreateInput, message: string, type: 'create.waiting' | 'create.resumed', hold: Hold | null): void {
    const { store, clock, log } = this.deps;
    const text = type === 'create.waiting' ? `attempt #${input.n}: the create on offer ${input.offerId} waits: ${message}` : message;
    log.info({ runId: input.runId, attempt: input.n, reason: hold?.key }, text);
    try {
      store.transaction(() =>
        store.events.append({
          runId: input.runId,
          at: clock.now(),
          type,
          message: text,
          data: { n: input.n, offerId: input.offerId, reason: hold?.key ?? null },
        }),
      );
    } catch (err) {
      // The store refuses writes: the wait goes on, and the run's own writes will pause it.
      log.warn({ runId: input.runId, err: (err as Error).message }, 'could not record that a create waits');
    }
  }
}
