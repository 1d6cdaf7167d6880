// What runs cost and how long they ran, computed from the attempts table alone (never from memory),
// so every figure survives a restart and is the same whoever asks: the money guard, the create
// gate, the run object and `berth costs`. Pure: `now` comes in as an argument.
//
// Spend of an attempt: its instance's billed $/h (`dph_total`, disk included) for as long as the
// instance may have existed: from its create (a create in flight counts from when it was
// journaled: it may have made one) to its confirmed destroy, or, never confirmed, to the end of its
// run, or to now. Compute and disk in every status but `stopped`, from when a list shows it so: a
// stopped instance is "detached from its GPU(s)" and billed "for disk storage" (billing.mdx), its
// own disk's price, the record's `storage_total_cost` (billedDph; a task that stopped its own
// instance bills that while its log is read, issue #37). The service bills disk in every status, so
// this is never below what it bills. A price change (a bid raised, the list showing another price,
// a stop or a start) leaves the earlier money in `usd_before`.
//
// Runtime of a run: the sum over its attempts of the time from the first list that showed the
// instance running to the attempt's end (or now).
import type { AttemptRow } from './attempt-row.js';

export const HOUR_MS = 3_600_000;

/** An attempt row with what is needed of its run. */
export type SpendRow = Pick<
  AttemptRow,
  | 'create_state'
  | 'started_at'
  | 'instance_created_at'
  | 'destroy_confirmed_at'
  | 'dph_total'
  | 'usd_before'
  | 'dph_since'
  | 'first_running_at'
  | 'ended_at'
>;

/**
 * The $/h a listed status bills: a stopped instance's disk alone (`storage_total_cost`, $/h of the
 * instance's own disk in show_instances.yaml), else `dph_total`; `dph_total` too when the record
 * does not state its disk's price. Null: the record states no price (the last one stands).
 */
export function billedDph(s: {
  actual_status: string | null;
  dph_total?: number | null;
  storage_total_cost?: number | null;
}): number | null {
  if (s.actual_status === 'stopped' && typeof s.storage_total_cost === 'number' && s.storage_total_cost >= 0) return s.storage_total_cost;
  return s.dph_total ?? null;
}

/** When the attempt's instance may have started billing; null when its create made none. */
function billedFrom(a: SpendRow): number | null {
  if (a.create_state === 'created') return a.instance_created_at ?? a.started_at;
  if (a.create_state === 'intent') return a.started_at;
  return null;
}

/**
 * When it stopped billing: its destroy confirmed (or its hand-over to a warm hold, which bills it
 * from then: ../store/warm-holds.ts, which sets both); else the end of its run (the sweep destroys
 * what an ended run left); else now.
 */
function billedTo(a: SpendRow, runEndedAt: number | null, now: number): number {
  return a.destroy_confirmed_at ?? runEndedAt ?? now;
}

/** A warm hold's spend from `from` to `now`: its $/h from the hand-over to its take, or released, to its destroy confirmed (or now). */
export function warmSpend(
  h: { since: number; state: string; ended_at: number | null; destroy_confirmed_at: number | null; dph_total: number },
  now: number,
  from = -Infinity,
): number {
  const end = h.state === 'taken' ? (h.ended_at ?? now) : (h.destroy_confirmed_at ?? now);
  return (h.dph_total * overlap(h.since, Math.min(end, now), from, Infinity)) / HOUR_MS;
}

/** $/h a warm hold bills now: until its take, or released, until its destroy is confirmed. */
export function warmPrice(h: { state: string; destroy_confirmed_at: number | null; dph_total: number }): number {
  return h.state === 'warm' || (h.state === 'released' && h.destroy_confirmed_at === null) ? h.dph_total : 0;
}

const overlap = (a0: number, a1: number, b0: number, b1: number) => Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));

/**
 * $ the attempt's instance cost from `from` (default: always) to `now`. Money accrued at earlier
 * prices (`usd_before`) is spread evenly over the time before `dph_since`: only a window cut
 * through that time needs it.
 */
export function attemptSpend(a: SpendRow, runEndedAt: number | null, now: number, from = -Infinity): number {
  const start = billedFrom(a);
  if (start === null) return 0;
  const end = Math.max(start, Math.min(billedTo(a, runEndedAt, now), now));
  const since = Math.min(Math.max(a.dph_since ?? start, start), end);
  let before = a.usd_before;
  if (from > start) before = since > start ? (a.usd_before * overlap(start, since, from, end)) / (since - start) : 0;
  return before + ((a.dph_total ?? 0) * overlap(since, end, from, Infinity)) / HOUR_MS;
}

/** $/h the attempt's instance bills now: 0 once its destroy is confirmed, its create made none, or its run ended. */
export function attemptPrice(a: SpendRow, runEndedAt: number | null): number {
  if (billedFrom(a) === null || a.destroy_confirmed_at !== null || runEndedAt !== null) return 0;
  return a.dph_total ?? 0;
}

/** Time the attempt's instance has been running: from the first list that showed it running to the attempt's end (or now). */
function attemptRuntimeMs(a: SpendRow, runEndedAt: number | null, now: number): number {
  if (a.first_running_at === null) return 0;
  return Math.max(0, (a.ended_at ?? runEndedAt ?? now) - a.first_running_at);
}

export interface RunMoney {
  /** $ spent, every attempt included. */
  usd: number;
  /** $/h billed now. */
  usdPerHour: number;
  /** ms spent running, every attempt included. */
  runtimeMs: number;
  /** An instance is running now: the runtime grows. */
  runningNow: boolean;
}

export function runMoney(attempts: SpendRow[], runEndedAt: number | null, now: number): RunMoney {
  let usd = 0;
  let usdPerHour = 0;
  let runtimeMs = 0;
  let runningNow = false;
  for (const a of attempts) {
    usd += attemptSpend(a, runEndedAt, now);
    usdPerHour += attemptPrice(a, runEndedAt);
    runtimeMs += attemptRuntimeMs(a, runEndedAt, now);
    if (a.first_running_at !== null && a.ended_at === null && runEndedAt === null) runningNow = true;
  }
  return { usd, usdPerHour, runtimeMs, runningNow };
}

/** The run object's `cost`: dollars rounded to 1/10,000 of a cent, so a short run does not read $0. */
export function costView(attempts: SpendRow[], runEndedAt: number | null, now: number): { usd: number; usd_per_hour: number } {
  const m = runMoney(attempts, runEndedAt, now);
  return { usd: round6(m.usd), usd_per_hour: round6(m.usdPerHour) };
}

export const round6 = (x: number) => Math.round(x * 1e6) / 1e6;
