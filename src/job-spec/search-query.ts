// From a resolved spec to the offer search body, at a given rung of the relax ladder, and the
// client-side check of what the search returned. The rules berth never relaxes are applied here,
// after the ladder, so that no relax step (the spec's or the configured default) can weaken them:
// the price cap, at least one direct port (SSH), rentable offers only, and the offers and machines
// the run has blocked. Since the server is not trusted with the price cap, `usableOffers` checks
// the returned offers again.
import type { RelaxStep } from '../config/schema.js';
import type { Offer, SearchQuery } from '../client/types.js';
import type { ResolvedJobSpec } from './schema.js';

/** Offers and machines a run no longer tries (their instance failed, see SPEC 4, rule 1). */
export interface Blocked {
  offerIds: number[];
  machineIds: number[];
}

type Filters = Record<string, Record<string, unknown>>;

/** Number of relax steps, i.e. the highest `relaxLevel` buildSearchQuery accepts. */
export function relaxStepCount(spec: ResolvedJobSpec): number {
  return spec.relax.length;
}

/** The search body with relax steps 0..relaxLevel-1 applied, then berth's fixed rules. */
export function buildSearchQuery(spec: ResolvedJobSpec, relaxLevel: number, blocked: Blocked): SearchQuery {
  if (!Number.isInteger(relaxLevel) || relaxLevel < 0 || relaxLevel > relaxStepCount(spec)) {
    throw new RangeError(`relax level ${relaxLevel} is outside 0..${relaxStepCount(spec)}`);
  }
  const filters: Filters = { ...spec.search.filters };
  for (const step of spec.relax.slice(0, relaxLevel)) applyStep(filters, step);

  filters['dph_total'] = { lte: spec.max_price_per_hour };
  filters['direct_port_count'] = withPortFloor(filters['direct_port_count']);
  filters['rentable'] = { eq: true };
  excludeIds(filters, 'id', blocked.offerIds);
  excludeIds(filters, 'machine_id', blocked.machineIds);

  return { ...filters, order: spec.search.order, type: spec.search.type, limit: spec.search.limit };
}

function applyStep(filters: Filters, step: RelaxStep): void {
  for (const field of step.drop ?? []) delete filters[field];
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

/**
 * The offers a run may actually try: within the price cap, with a direct port, and not blocked.
 * An offer that does not state its price or port count is not trusted either.
 */
export function usableOffers(offers: Offer[], spec: ResolvedJobSpec, blocked: Blocked): Offer[] {
  const offerIds = new Set(blocked.offerIds);
  const machineIds = new Set(blocked.machineIds);
  return offers.filter(
    (o) =>
      typeof o.dph_total === 'number' &&
      o.dph_total <= spec.max_price_per_hour &&
      typeof o.direct_port_count === 'number' &&
      o.direct_port_count >= 1 &&
      !offerIds.has(o.id) &&
      !machineIds.has(o.machine_id),
  );
}
