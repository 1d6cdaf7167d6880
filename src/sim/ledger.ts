// Billing in sim time, derived from the status history (so it cannot drift from what clients saw).
// Compute ($/h = the offer's dph_base, or the bid in force at each moment) accrues while
// `loading`, `running` or `rebooting`; disk ($/h = disk GB × storage_cost / 720, pricing.ts)
// accrues from creation to destroy in every status; nothing accrues after destroy.
// `chargesBetween` bills any slice of an instance's life; the ledger is the slice from creation to
// now, and the charges endpoint (charges.ts) cuts the same money into days.
import type { SimTime } from './clock.js';
import type { SimInstanceHistory } from './instances.js';
import { billsCompute } from './lifecycle.js';

interface LedgerEntry {
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

/** What one instance accrued in a slice of sim time: dollars and billed sim hours of each kind. */
export interface Charges {
  compute_usd: number;
  compute_h: number;
  disk_usd: number;
  disk_h: number;
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

/** Total $ billed to the account up to `nowSim` (the ledger's total without building it). */
export function totalBilled(histories: readonly SimInstanceHistory[], nowSim: number): number {
  let usd = 0;
  for (const h of histories) {
    const c = chargesBetween(h, h.created_at.sim_s, nowSim);
    usd += c.compute_usd + c.disk_usd;
  }
  return usd;
}

function entryFor(h: SimInstanceHistory, nowSim: number): LedgerEntry {
  const c = chargesBetween(h, h.created_at.sim_s, nowSim);
  return {
    instance_id: h.id,
    label: h.label,
    compute_usd: c.compute_usd,
    disk_usd: c.disk_usd,
    total_usd: c.compute_usd + c.disk_usd,
    billing_now: h.destroyed_at === null,
    compute_dph: h.compute_dph,
    disk_dph: h.disk_dph,
  };
}

/** What `h` accrued from sim second `from` to `to`, clipped to its life (creation to destroy or `to`). */
export function chargesBetween(h: SimInstanceHistory, from: number, to: number): Charges {
  const start = Math.max(from, h.created_at.sim_s);
  const end = Math.min(to, h.destroyed_at?.sim_s ?? to);
  const out: Charges = { compute_usd: 0, compute_h: 0, disk_usd: 0, disk_h: 0 };
  if (!(end > start)) return out;
  for (let i = 0; i < h.statuses.length; i++) {
    const s = h.statuses[i]!;
    if (!billsCompute(s.status)) continue;
    const a = Math.max(start, s.at.sim_s);
    const b = Math.min(end, h.statuses[i + 1]?.at.sim_s ?? end);
    if (b <= a) continue;
    out.compute_usd += computeCost(h, a, b);
    out.compute_h += (b - a) / 3600;
  }
  out.disk_h = (end - start) / 3600;
  out.disk_usd = out.disk_h * h.disk_dph;
  return out;
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
