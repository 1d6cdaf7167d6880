// From a resolved spec to the offer search body, at a given rung of the relax ladder, and the
// client-side check of what the search returned. The rules berth never relaxes are applied here,
// after the ladder, so that no relax step (the spec's or the configured default) can weaken them:
// the price cap, at least one direct port (SSH), rentable offers only, and the offers and machines
// the run has blocked. Since the server is not trusted with the price cap, `usableOffers` checks
// the returned offers again, on the price the instance will actually be billed.
//
// Two facts of search_offers.yaml shape the body:
// - `dph_total` is priced for `allocated_storage` GB of disk (default 8), while an instance is
//   billed for its own disk: every search says `allocated_storage = disk_gb`, so the cap filter
//   compares the price of the disk berth will ask for.
// - Absent `verified`, `rentable` and `rented` mean `eq true`, `eq true` and `eq false`: deleting
//   one of them widens nothing. berth sends its defaults for them explicitly (verified only, not
//   rented: the service's own), and a relax step that drops one sends the form that widens,
//   `{"in": [true, false]}`.
import type { RelaxStep } from '../config/schema.js';
import type { Offer, SearchQuery } from '../client/types.js';
import type { ResolvedJobSpec } from './schema.js';
import { overCap } from '../money-rules.js';
import { gpuMemoryInMb, isGpuMemoryField } from './gpu-memory.js';

/** Offers and machines a run no longer tries (their instance failed, see SPEC 4, rule 1). */
export interface Blocked {
  offerIds: number[];
  machineIds: number[];
}

type Filters = Record<string, Record<string, unknown>>;

/** Filters the service applies when they are absent; berth sends them explicitly. */
const SERVICE_DEFAULTED_FILTERS: Readonly<Filters> = {
  verified: { eq: true },
  rentable: { eq: true },
  rented: { eq: false },
};

/** What a dropped service-defaulted filter is sent as: either value. */
const EITHER = { in: [true, false] };

/**
 * storage_cost is $ per GB per month (search_offers.yaml); the hours of that month. The service's
 * own example divides by 720 (show_instance.yaml: diskHour 0.0020740 = 0.14933 × 10 GB / 720), the
 * smaller of the usual readings (720, 730), so the disk is never priced below what it bills.
 */
const HOURS_PER_MONTH = 720;

/** Number of relax steps, i.e. the highest `relaxLevel` buildSearchQuery accepts. */
export function relaxStepCount(spec: ResolvedJobSpec): number {
  return spec.relax.length;
}

/** The search body with relax steps 0..relaxLevel-1 applied, then berth's fixed rules. */
export function buildSearchQuery(spec: ResolvedJobSpec, relaxLevel: number, blocked: Blocked): SearchQuery {
  if (!Number.isInteger(relaxLevel) || relaxLevel < 0 || relaxLevel > relaxStepCount(spec)) {
    throw new RangeError(`relax level ${relaxLevel} is outside 0..${relaxStepCount(spec)}`);
  }
  const filters: Filters = { ...SERVICE_DEFAULTED_FILTERS, ...spec.search.filters };
  for (const step of spec.relax.slice(0, relaxLevel)) applyStep(filters, step);
  // GPU memory in GB (`"16GB"`) as the MB the service compares (./gpu-memory.ts).
  for (const field of Object.keys(filters)) if (isGpuMemoryField(field)) filters[field] = gpuMemoryInMb(filters[field]!);

  filters['dph_total'] = { lte: spec.max_price_per_hour };
  filters['direct_port_count'] = withPortFloor(filters['direct_port_count']);
  filters['rentable'] = { eq: true };
  excludeIds(filters, 'id', blocked.offerIds);
  excludeIds(filters, 'machine_id', blocked.machineIds);

  return {
    ...filters,
    allocated_storage: spec.disk_gb,
    order: spec.search.order,
    type: spec.search.type,
    limit: spec.search.limit,
  };
}

function applyStep(filters: Filters, step: RelaxStep): void {
  for (const field of step.drop ?? []) {
    if (field in SERVICE_DEFAULTED_FILTERS) filters[field] = { ...EITHER };
    else delete filters[field];
  }
  for (const [field, ops] of Object.entries(step.set ?? {})) filters[field] = { ...ops };
}

/** Keeps the user's bounds on the port count but never lets its floor go below 1. */
function withPortFloor(ops: Record<string, unknown> = {}): Record<string, unknown> {
  const gte = typeof ops['gte'] === 'number' ? Math.max(1, ops['gte']) : 1;
  return { ...ops, gte };
}

/** Adds `ids` to the field's `notin` list, keeping any values the user already excluded. */
function excludeIds(filters: Filters, field: string, ids: number[]): void {
  if (ids.length === 0) return;
  const ops = filters[field] ?? {};
  const already = Array.isArray(ops['notin']) ? (ops['notin'] as unknown[]) : [];
  filters[field] = { ...ops, notin: [...new Set([...already, ...ids])] };
}

/** One line for the run's event log, e.g. `dropped filter verified; set gpu_name in [RTX 4090, RTX 3090]`. */
export function describeRelaxStep(step: RelaxStep): string {
  const parts: string[] = [];
  if (step.drop?.length) parts.push(`dropped ${step.drop.length === 1 ? 'filter' : 'filters'} ${step.drop.join(', ')}`);
  for (const [field, ops] of Object.entries(step.set ?? {})) {
    const bounds = Object.entries(ops).map(([op, value]) => `${op} ${formatValue(value)}`);
    parts.push(`set ${field} ${bounds.join(' ')}`);
  }
  return parts.join('; ');
}

function formatValue(value: unknown): string {
  return Array.isArray(value) ? `[${value.map(String).join(', ')}]` : String(value);
}

const price = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/**
 * What an instance made from `offer` with `diskGb` of disk is billed per hour, or null when the
 * offer does not say enough to know. The disk part is `storage_cost` × disk / 720 when the offer
 * states storage_cost, else what its dph_total adds to dph_base (priced for the disk asked for).
 * On demand: the larger of dph_total and dph_base + disk, so a price quoted for a smaller disk
 * never passes. A bid: the bid plus the disk.
 */
export function billedPricePerHour(offer: Offer, diskGb: number, bidPrice?: number): number | null {
  const total = price(offer.dph_total);
  const base = price(offer['dph_base']);
  const disk = diskPricePerHour(offer, diskGb);
  if (bidPrice !== undefined) return disk === undefined ? null : bidPrice + disk;
  if (total === undefined) return null;
  return base !== undefined && disk !== undefined ? Math.max(total, base + disk) : total;
}

/** What `diskGb` of the offer's storage bills per hour, or undefined when the offer does not say. */
export function diskPricePerHour(offer: Offer, diskGb: number): number | undefined {
  const total = price(offer.dph_total);
  const base = price(offer['dph_base']);
  const storage = price(offer['storage_cost']);
  if (storage !== undefined) return (storage * diskGb) / HOURS_PER_MONTH;
  return total !== undefined && base !== undefined ? Math.max(0, total - base) : undefined;
}

/** The billed price of `offer` for this spec (its disk, and its bid if it bids). */
export function billedPriceFor(offer: Offer, spec: ResolvedJobSpec): number | null {
  if (spec.search.type !== 'bid') return billedPricePerHour(offer, spec.disk_gb);
  const bid = bidFor(offer, spec);
  return bid === null ? null : billedPricePerHour(offer, spec.disk_gb, bid);
}

/**
 * The compute bid a create on `offer` sends: the spec's price, or for `"min"` the offer's current
 * `min_bid` (null when the offer does not state one: its price is then unknown and it is not tried).
 */
function bidFor(offer: Offer, spec: Pick<ResolvedJobSpec, 'bid_price'>): number | null {
  if (spec.bid_price === 'min') return price(offer['min_bid']) ?? null;
  return spec.bid_price ?? null;
}

/**
 * The offers a run may actually try: billed within the price cap, with a direct port, and not
 * blocked. An offer that does not state enough to know its price or its port count is not trusted.
 */
export function usableOffers(offers: Offer[], spec: ResolvedJobSpec, blocked: Blocked): Offer[] {
  const offerIds = new Set(blocked.offerIds);
  const machineIds = new Set(blocked.machineIds);
  return offers.filter((o) => {
    const billed = billedPriceFor(o, spec);
    return (
      billed !== null &&
      !overCap(billed, spec.max_price_per_hour) &&
      typeof o.direct_port_count === 'number' &&
      o.direct_port_count >= 1 &&
      !offerIds.has(o.id) &&
      !machineIds.has(o.machine_id)
    );
  });
}
