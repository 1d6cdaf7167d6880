// Billing in sim time, derived from the status history (so it cannot drift from what clients saw).
// Compute ($/h = the offer's dph_base, or the bid in force at each moment) accrues while
// `loading`, `running` or `rebooting`; disk ($/h = disk GB × storage_cost / 720, pricing.ts)
// accrues from creation to destroy in every status; nothing accrues after destroy.
import type { SimTime } from './clock.js';
import type { SimInstanceHistory } from './instances.js';
import { billsCompute } from './lifecycle.js';

export interface LedgerEntry {
  instance_id: number;
  label: string | null;
  compute_usd: number;
  disk_usd: number;
  total_usd: number;
  /** Still accruing (not destroyed). */
  billing_now: boolean;
  compute_dph: number;
  disk_dph: number;
}

export interface Ledger {
  at: SimTime;
  compute_usd: number;
  disk_usd: number;
  total_usd: number;
  /** Ids of the instances accruing a charge now. */
  billing_now: number[];
  instances: LedgerEntry[];
}

export function computeLedger(histories: readonly SimInstanceHistory[], at: SimTime): Ledger {
  const instances = histories.map((h) => entryFor(h, at.sim_s));
  const sum = (f: (e: LedgerEntry) => number) => instances.reduce((s, e) => s + f(e), 0);
  return {
    at,
    compute_usd: sum((e) => e.compute_usd),
    disk_usd: sum((e) => e.disk_usd),
    total_usd: sum((e) => e.total_usd),
    billing_now: instances.filter((e) => e.billing_now).map((e) => e.instance_id),
    instances,
  };
}

function entryFor(h: SimInstanceHistory, nowSim: number): LedgerEntry {
  const end = h.destroyed_at?.sim_s ?? nowSim;
  let compute = 0;
  for (let i = 0; i < h.statuses.length; i++) {
    const s = h.statuses[i]!;
    if (!billsCompute(s.status)) continue;
    const until = Math.min(end, h.statuses[i + 1]?.at.sim_s ?? end);
    compute += computeCost(h, s.at.sim_s, until);
  }
  const diskS = Math.max(0, end - h.created_at.sim_s);
  const disk = (diskS / 3600) * h.disk_dph;
  return {
    instance_id: h.id,
    label: h.label,
    compute_usd: compute,
    disk_usd: disk,
    total_usd: compute + disk,
    billing_now: h.destroyed_at === null,
    compute_dph: h.compute_dph,
    disk_dph: h.disk_dph,
  };
}

/** $ of compute from sim second `from` to `to`, each part at the price in force then. */
function computeCost(h: SimInstanceHistory, from: number, to: number): number {
  let usd = 0;
  const changes = h.compute_dph_changes;
  for (let i = 0; i < changes.length; i++) {
    const a = Math.max(from, changes[i]!.at.sim_s);
    const b = Math.min(to, changes[i + 1]?.at.sim_s ?? Infinity);
    if (b > a) usd += ((b - a) / 3600) * changes[i]!.dph;
  }
  return usd;
}
