// Price increases a host asks for on a running contract, in the shape the official CLI reads
// (vast-cli `vastai/api/price_increase.py`; not in the docs yet). A row is `pending` until the
// renter accepts it (the new price applies from then on) or rejects it (tombstoned, the price stays),
// or until its cutover time passes unanswered (a scenario: the new price applies anyway). Answering
// a row that is not pending is 404 `no_pending_price_increase`.
import type { LiveInstance } from './instances.js';

export interface PendingRow {
  pending_price_increase_id: number;
  contract_id: number;
  host_id: number;
  new_gpu_costpersec: number | null;
  new_disk_ram_costpersec: number | null;
  new_bwu_cost: number | null;
  new_bwd_cost: number | null;
  new_platform_fee: number | null;
  old_gpu_costpersec: number | null;
  old_disk_ram_costpersec: number | null;
  old_bwu_cost: number | null;
  old_bwd_cost: number | null;
  old_platform_fee: number | null;
  contract_end_date: number | null;
  ask_end_date: number | null;
  created_at: number;
}

interface Row extends PendingRow {
  status: 'pending' | 'accepted' | 'rejected' | 'applied';
  /** Sim second at which an unanswered increase applies anyway; null: never. */
  cutoverSimS: number | null;
  /** The new compute $/h. */
  newDph: number;
}

export class PriceIncreases {
  private readonly rows = new Map<number, Row>();
  private nextId = 1;

  /** A host asks `pct` percent more for the instance's compute; returns the row. */
  raise(inst: LiveInstance, pct: number, nowUnix: number, cutoverSimS: number | null): PendingRow {
    const oldDph = inst.hist.compute_dph;
    const newDph = Math.round(oldDph * (1 + pct / 100) * 1e6) / 1e6;
    const row: Row = {
      pending_price_increase_id: this.nextId++,
      contract_id: inst.hist.id,
      host_id: inst.hist.host_id,
      new_gpu_costpersec: newDph / 3600,
      new_disk_ram_costpersec: null,
      new_bwu_cost: null,
      new_bwd_cost: null,
      new_platform_fee: null,
      old_gpu_costpersec: oldDph / 3600,
      old_disk_ram_costpersec: null,
      old_bwu_cost: null,
      old_bwd_cost: null,
      old_platform_fee: null,
      contract_end_date: nowUnix + 30 * 86_400,
      ask_end_date: nowUnix + 60 * 86_400,
      created_at: nowUnix,
      status: 'pending',
      cutoverSimS,
      newDph,
    };
    this.rows.set(row.pending_price_increase_id, row);
    return publicRow(row);
  }

  /** The pending rows of live contracts. */
  pending(isLive: (contractId: number) => boolean): PendingRow[] {
    return [...this.rows.values()].filter((r) => r.status === 'pending' && isLive(r.contract_id)).map(publicRow);
  }

  /** Answers a pending row: the row (its new $/h with it) or null when there is none pending. */
  answer(id: number, answer: 'accept' | 'reject'): { row: PendingRow; newDph: number } | null {
    const row = this.rows.get(id);
    if (!row || row.status !== 'pending') return null;
    row.status = answer === 'accept' ? 'accepted' : 'rejected';
    return { row: publicRow(row), newDph: row.newDph };
  }

  /** Unanswered rows whose cutover has come: marked applied and returned, for the world to apply. */
  due(nowSimS: number): Array<{ contractId: number; newDph: number }> {
    const out: Array<{ contractId: number; newDph: number }> = [];
    for (const row of this.rows.values()) {
      if (row.status !== 'pending' || row.cutoverSimS === null || row.cutoverSimS > nowSimS) continue;
      row.status = 'applied';
      out.push({ contractId: row.contract_id, newDph: row.newDph });
    }
    return out;
  }
}

function publicRow({ status: _s, cutoverSimS: _c, newDph: _n, ...row }: Row): PendingRow {
  return row;
}
