// The money guard of each live run: its max_runtime_s and budget_usd. Per run, one timer (on the
// injected clock) set to the moment the next limit would be reached at the current price and state;
// it is set again after every transition of the run (a price or a state may have changed) and once
// at start, from the attempts table, so a restarted daemon carries on with the same figures.
// When it fires and a limit is reached, the run gets EXPIRE: the machine destroys its instance and
// ends it `expired`. A run counts as told only once it took the expiry (its driver keeps it until
// the run ends, across a paused store, and a held run is started for it); one that could not take
// it (the store refused the write that would start it) is told again RETRY_MS later, until it does.
// Held runs (a restored backup) are guarded like the others: their instance may be billing.
//
// The budget is met by the destroy, not begun at it: EXPIRE goes one poll interval before the spend
// would reach budget_usd at the current price, since the instance keeps billing until the destroy
// lands (which the next list confirms). A run whose budget is spent is never sent to search again.
//
// A run whose spend crosses BUDGET_WARNING_SHARE of its budget gets one `budget.warning` (an event
// in its log and, where configured, a notification), so that someone can act before it expires.
//
// Also the search's affordability check: an offer is left out when its price for the run's boot
// estimate (the spec's boot_timeout_s: a slower boot is replaced anyway) costs more than what is
// left of the budget.
import { toRunError } from '../../errors.js';
import type { Candidate, SearchOutput } from '../../../machines/run-machine.js';
import type { RunError } from '../../../machines/run-rules.js';
import type { Clock, Timer } from '../../clock.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import { usdText } from '../../usd-text.js';
import { overCap, reachedBudget } from '../../money-rules.js';
import { HOUR_MS, runMoney } from '../../store/spend.js';

export interface MoneyGuardDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** The resolved specs of the runs the daemon drives. */
  specs: RunSpecs;
  /** Delivers EXPIRE to the run: true once the run holds it (until it ends), false to be told again later. */
  expire(runId: string, reason: RunError): boolean;
  /** How long a destroy takes to be confirmed, ms (one poll interval): the budget's lead. */
  leadMs: number;
  /** Logs a one-time budget warning on the run (and sends its notification); false when it was given before. */
  warn(runId: string, message: string, data: { usd: number; budget_usd: number; usd_per_hour: number }): boolean;
}

/** Share of budget_usd spent at which a run is warned once. */
const BUDGET_WARNING_SHARE = 0.8;
/** How soon an expiry the run could not take is tried again, ms (the paused store's first retry). */
const RETRY_MS = 1_000;

export class MoneyGuard {
  private readonly timers = new Map<string, Timer>();
  /** Runs that took their EXPIRE (the machine keeps the first reason; no need to repeat it). */
  private readonly expired = new Set<string>();
  /** Runs whose expiry was logged (once, however many times it is delivered). */
  private readonly told = new Set<string>();
  /** Runs already warned that their budget is nearly spent (the warning is also in their log, for a restart). */
  private readonly warned = new Set<string>();

  constructor(private readonly deps: MoneyGuardDeps) {}

  /** The run moved (or the daemon resumed it): check its limits now and set its timer again. */
  check(runId: string): void {
    const spec = this.deps.specs.get(runId);
    this.timers.get(runId)?.cancel();
    this.timers.delete(runId);
    if (!spec || this.expired.has(runId) || (spec.budget_usd === undefined && spec.max_runtime_s === undefined)) return;
    const row = this.deps.store.runs.get(runId);
    if (!row || row.ended_at !== null) return;
    const now = this.deps.clock.now();
    const m = runMoney(this.deps.store.attempts.forRun(runId), null, now);
    let nextAt = Infinity;

    if (spec.max_runtime_s !== undefined) {
      const limitMs = spec.max_runtime_s * 1000;
      if (m.runtimeMs >= limitMs) {
        return this.expire(runId, {
          kind: 'max_runtime',
          message: `The run was running for ${Math.round(m.runtimeMs / 1000)} s in total, reaching max_runtime_s (${spec.max_runtime_s} s).`,
        });
      }
      if (m.runningNow) nextAt = now + (limitMs - m.runtimeMs);
    }
    if (spec.budget_usd !== undefined) {
      const warnAt = spec.budget_usd * BUDGET_WARNING_SHARE;
      if (!this.warned.has(runId)) {
        if (reachedBudget(m.usd, warnAt)) {
          const left =
            m.usdPerHour > 0
              ? `; at $${m.usdPerHour.toFixed(3)}/h it is spent in about ${Math.round(((spec.budget_usd - m.usd) / m.usdPerHour) * 60)} min`
              : '';
          // A store that refuses the write must not stop the budget check below (nor the process): the
          // warning is tried again at the next check.
          try {
            this.deps.warn(
              runId,
              `${Math.round(BUDGET_WARNING_SHARE * 100)}% of budget_usd spent: ${usdText(m.usd)} of ${usdText(spec.budget_usd)}${left}.`,
              {
                usd: m.usd,
                budget_usd: spec.budget_usd,
                usd_per_hour: m.usdPerHour,
              },
            );
            this.warned.add(runId);
          } catch (err) {
            this.deps.log.warn(
              { runId, err: toRunError(err) },
              'the budget warning could not be stored; it is tried again at the next check',
            );
          }
        } else if (m.usdPerHour > 0) {
          nextAt = Math.min(nextAt, now + ((warnAt - m.usd) / m.usdPerHour) * HOUR_MS);
        }
      }
      const projected = m.usd + (m.usdPerHour * this.deps.leadMs) / HOUR_MS;
      if (reachedBudget(projected, spec.budget_usd)) {
        const when = reachedBudget(m.usd, spec.budget_usd)
          ? 'reached'
          : `would be reached before its destroy is confirmed (at $${m.usdPerHour.toFixed(3)}/h)`;
        return this.expire(runId, {
          kind: 'budget',
          message: `The run spent ${usdText(m.usd)}: budget_usd (${usdText(spec.budget_usd)}) ${when}.`,
        });
      }
      if (m.usdPerHour > 0) nextAt = Math.min(nextAt, now + ((spec.budget_usd - projected) / m.usdPerHour) * HOUR_MS);
    }
    if (nextAt !== Infinity) {
      // At least 1 ms: a figure that lands on `now` is checked again on the next turn, not in a loop.
      this.timers.set(
        runId,
        this.deps.clock.setTimer(() => this.check(runId), Math.max(1, Math.ceil(nextAt - now - 1e-6))),
      );
    }
  }

  /**
   * What is left of the run's limits now (issue #29: a later attempt's daemon-free backstop is sized
   * from this, not from the whole limits): seconds of max_runtime_s and dollars of budget_usd, each
   * null when the spec sets none.
   */
  left(runId: string): { runtimeS: number | null; usd: number | null } {
    const spec = this.deps.specs.get(runId);
    if (!spec || (spec.budget_usd === undefined && spec.max_runtime_s === undefined)) return { runtimeS: null, usd: null };
    const m = runMoney(this.deps.store.attempts.forRun(runId), null, this.deps.clock.now());
    return {
      runtimeS: spec.max_runtime_s === undefined ? null : Math.max(0, spec.max_runtime_s - m.runtimeMs / 1000),
      usd: spec.budget_usd === undefined ? null : Math.max(0, spec.budget_usd - m.usd),
    };
  }

  /**
   * The candidates the run's remaining budget can pay to boot, in the search's order; `exhausted`
   * when offers matched but none of them is affordable.
   */
  affordable(runId: string, candidates: Candidate[]): SearchOutput {
    const spec = this.deps.specs.get(runId);
    if (!spec || spec.budget_usd === undefined || candidates.length === 0) return { candidates };
    const spent = runMoney(this.deps.store.attempts.forRun(runId), null, this.deps.clock.now()).usd;
    const left = spec.budget_usd - spent;
    const bootCost = (c: Candidate) => (c.dphTotal * spec.boot_timeout_s * 1000) / HOUR_MS;
    const kept = candidates.filter((c) => !overCap(bootCost(c), left));
    if (kept.length > 0) return { candidates: kept };
    const cheapest = Math.min(...candidates.map((c) => c.dphTotal));
    return {
      candidates: [],
      exhausted: {
        kind: 'budget',
        message: `The ${usdText(Math.max(0, left))} left of budget_usd (${usdText(spec.budget_usd)}) cannot pay for ${candidates.length === 1 ? 'the matching offer' : `any of the ${candidates.length} matching offers`} to boot: the cheapest, $${cheapest.toFixed(3)}/h, costs ${usdText(bootCost({ dphTotal: cheapest } as Candidate))} over boot_timeout_s (${spec.boot_timeout_s} s).`,
      },
    };
  }

  /**
   * Why the run's remaining budget refuses a raised bid billing `dphTotal`, or null: as for a
   * create, what is left must pay for boot_timeout_s at that price (the instance boots again).
   */
  bidRefusal(runId: string, dphTotal: number): string | null {
    const spec = this.deps.specs.get(runId);
    if (!spec || spec.budget_usd === undefined) return null;
    const left = spec.budget_usd - runMoney(this.deps.store.attempts.forRun(runId), null, this.deps.clock.now()).usd;
    const boot = (dphTotal * spec.boot_timeout_s * 1000) / HOUR_MS;
    if (!overCap(boot, left)) return null;
    return `the ${usdText(Math.max(0, left))} left of budget_usd (${usdText(spec.budget_usd)}) cannot pay for it to boot again: ${usdText(boot)} over boot_timeout_s (${spec.boot_timeout_s} s) at $${dphTotal.toFixed(3)}/h`;
  }

  /** The run ended (or the daemon stops driving it). */
  forget(runId: string): void {
    this.timers.get(runId)?.cancel();
    this.timers.delete(runId);
    this.expired.delete(runId);
    this.told.delete(runId);
    this.warned.delete(runId);
  }

  stop(): void {
    for (const t of this.timers.values()) t.cancel();
    this.timers.clear();
  }

  private expire(runId: string, reason: RunError): void {
    if (!this.told.has(runId)) this.deps.log.info({ runId, kind: reason.kind }, `run ${runId} expires: ${reason.message}`);
    this.told.add(runId);
    let taken = false;
    try {
      taken = this.deps.expire(runId, reason);
    } catch (err) {
      this.deps.log.warn({ runId, err: toRunError(err) }, 'the expiry could not be delivered; it is tried again');
    }
    if (taken) {
      this.expired.add(runId);
      return;
    }
    this.timers.set(
      runId,
      this.deps.clock.setTimer(() => this.check(runId), RETRY_MS),
    );
  }
}
