// Price increases hosts ask for on the account's running contracts (vast-cli
// `vastai/api/price_increase.py`; not in the docs yet). berth never lets a host's raise bill a run
// above its `max_price_per_hour`: every `price_increases.check_interval_s` (rate group `other`),
// while some run holds an instance, the pending increases are read, and each one on an instance a
// run holds is answered by `price_increases.policy`:
//   reject             every increase is rejected (default: the price the run rented at stays);
//   accept_within_cap  an increase that keeps the instance's $/h within the run's
//                      max_price_per_hour, and the daemon's billed $/h within
//                      budget.max_usd_per_hour, is accepted, any other rejected.
// Increases on instances no run holds are left to their owner. The run's event (written before the
// answer is sent) says what was decided and why. Should an increase go through anyway (berth was
// down, the host's cutover came first), the run machine fails over once a list shows the instance
// above the cap (outcome `price_over_cap`).
//
// States: idle (no run holds an instance: nothing is read) ⇄ reading; stop() ends it.
import { countText } from '../../count-text.js';
import type { MarketClient, PendingPriceIncrease } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { overCap } from '../../money-rules.js';
import { PeriodicLoop } from '../../periodic-loop.js';

export type PriceIncreasePolicy = 'reject' | 'accept_within_cap';

/** What the run holding an instance may be billed. */
export interface Holder {
  runId: string;
  maxPricePerHour: number;
  /** The instance's billed $/h now (as last listed, else as rented). */
  dphTotal: number;
}

export interface PriceIncreaseWatchDeps {
  client: Pick<MarketClient, 'pendingPriceIncreases' | 'answerPriceIncrease'>;
  clock: Clock;
  log: Logger;
  policy: PriceIncreasePolicy;
  intervalMs: number;
  /** Instances runs hold now, with their runs. */
  holders(): Map<number, Holder>;
  /** Why raising the daemon's billed $/h by `extraDph` would pass budget.max_usd_per_hour or max_usd_per_day, or null when it fits. */
  daemonCapHold(extraDph: number): string | null;
  /** Writes the run's event; throws when the store refuses it (nothing is sent then). */
  note(runId: string, type: 'price_increase.accepted' | 'price_increase.rejected', message: string, data: Record<string, unknown>): void;
}

/** The instance's $/h once the increase applies: its price now moved by the GPU and disk/RAM deltas, and the platform fee's rise. */
export function priceAfter(row: PendingPriceIncrease, dphNow: number): number {
  const delta = (n: number | null | undefined, o: number | null | undefined) =>
    typeof n === 'number' && typeof o === 'number' ? n - o : 0;
  let dph =
    dphNow +
    3600 * (delta(row.new_gpu_costpersec, row.old_gpu_costpersec) + delta(row.new_disk_ram_costpersec, row.old_disk_ram_costpersec));
  const { new_platform_fee: nf, old_platform_fee: of } = row;
  if (typeof nf === 'number' && typeof of === 'number' && nf > of && of > -1) dph *= (1 + nf) / (1 + of);
  return dph;
}

/** accept or reject, and why, for one increase on a run's instance. */
export function decide(
  policy: PriceIncreasePolicy,
  newDph: number,
  holder: Holder,
  daemonCapHold: (extraDph: number) => string | null = () => null,
): { answer: 'accept' | 'reject'; why: string } {
  const price = `$${newDph.toFixed(4)}/h (from $${holder.dphTotal.toFixed(4)}/h)`;
  if (overCap(newDph, holder.maxPricePerHour))
    return { answer: 'reject', why: `${price} would pass max_price_per_hour ($${holder.maxPricePerHour}/h)` };
  if (policy === 'reject') return { answer: 'reject', why: `${price}; price_increases.policy is "reject"` };
  const hold = daemonCapHold(Math.max(0, newDph - holder.dphTotal));
  if (hold) return { answer: 'reject', why: `${price}: ${hold}` };
  return { answer: 'accept', why: `${price} stays within max_price_per_hour ($${holder.maxPricePerHour}/h)` };
}

export class PriceIncreaseWatch {
  private readonly abort = new AbortController();
  private readonly loop: PeriodicLoop;
  /** Increases answered already (a stale row may be listed once more before the service drops it). */
  private readonly answered = new Set<number>();
  private unavailableLogged = false;

  constructor(private readonly deps: PriceIncreaseWatchDeps) {
    this.loop = new PeriodicLoop({
      clock: deps.clock,
      run: () => this.pass(),
      intervalMs: deps.intervalMs,
      onError: (err) => {
        if (!this.stopped)
          deps.log.warn({ err: toRunError(err) }, 'could not check the pending price increases; trying again at the next read');
      },
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
    this.abort.abort();
  }

  /** Reads and answers now (at most one pass in flight); resolves when done. */
  checkNow(): Promise<void> {
    return this.loop.checkNow();
  }

  private get stopped(): boolean {
    return this.loop.stopped;
  }

  private async pass(): Promise<void> {
    const { client, log } = this.deps;
    if (this.deps.holders().size === 0) return;
    let rows: PendingPriceIncrease[];
    try {
      const got = await client.pendingPriceIncreases({ signal: this.abort.signal });
      rows = got.rows;
      if (got.malformed > 0)
        log.warn({ malformed: got.malformed }, `${countText(got.malformed, 'pending price increase row')} could not be read; skipped`);
    } catch (err) {
      if (this.stopped) return;
      const e = toRunError(err);
      if (e.kind === 'not_found' && this.unavailableLogged) return;
      this.unavailableLogged ||= e.kind === 'not_found';
      log.warn({ err: e }, "could not read the pending price increases; a list above a run's cap still fails it over");
      return;
    }
    // Read again after the call: a run may have moved on meanwhile.
    const holders = this.deps.holders();
    for (const row of rows) {
      if (this.stopped) return;
      const holder = holders.get(row.contract_id);
      if (!holder || this.answered.has(row.pending_price_increase_id)) continue;
      await this.answer(row, holder);
    }
  }

  private async answer(row: PendingPriceIncrease, holder: Holder): Promise<void> {
    const { client, log, policy } = this.deps;
    const id = row.pending_price_increase_id;
    const newDph = priceAfter(row, holder.dphTotal);
    const { answer, why } = decide(policy, newDph, holder, (extra) => this.deps.daemonCapHold(extra));
    const verb = answer === 'accept' ? 'accepted' : 'rejected';
    const message = `the host of instance ${row.contract_id} asks for a price increase (${id}): ${answer === 'accept' ? 'accepting' : 'rejecting'} it: ${why}`;
    try {
      // The intent first: an accept that raises what the run pays is on record before it is sent.
      this.deps.note(holder.runId, `price_increase.${verb}`, message, { pendingId: id, instanceId: row.contract_id, newDph, answer });
    } catch (err) {
      log.warn({ runId: holder.runId, err: toRunError(err) }, `could not record the answer to price increase ${id}; not answering it yet`);
      return;
    }
    try {
      const res = await client.answerPriceIncrease(id, answer, { signal: this.abort.signal });
      this.answered.add(id);
      log.info({ runId: holder.runId, instanceId: row.contract_id, pendingId: id, answer, stale: res === 'stale' }, message);
    } catch (err) {
      if (this.stopped) return;
      log.warn(
        { runId: holder.runId, pendingId: id, err: toRunError(err) },
        `could not ${answer} price increase ${id}; trying again at the next read`,
      );
    }
  }
}
