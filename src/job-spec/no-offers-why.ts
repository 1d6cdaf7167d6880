// Why a run found nothing to rent, in words: a cap too low and a spec no machine fits used to end
// with the same sentence ("No usable offer matched the spec"). When the last relax step's search
// leaves nothing usable, the run makes one more search with the same filters but without the price
// cap (cheapest first), and this module reads its answer: how many offers the filters match, and
// what the cheapest of them would bill, against the cap.
//
// When even that search finds nothing, the filters themselves exclude every offer, and the message
// names the filter that excluded the most (issue #41: a GPU-name typo said only "no offer matches").
// That takes one more search, the widest the run could make (none of the spec's filters, no cap,
// cheapest first), and counts on its offers how many each filter of the run's query rejects. One
// call whatever the number of filters: searching once without each filter in turn would take one
// search per filter, from the 10 a minute the runs share (search_offers.yaml x-rate-limit).
import type { Offer, SearchQuery } from '../client/types.js';
import { billedPriceFor, buildSearchQuery, type Blocked } from './search-query.js';
import type { ResolvedJobSpec } from './schema.js';
import { overCap } from '../money-rules.js';

/** Offers read to explain: enough to count a few and find the cheapest. */
const EXPLAIN_LIMIT = 64;

/** The search of the explanation: the run's own query at `relaxLevel`, without the price cap, cheapest first. */
export function uncappedQuery(spec: ResolvedJobSpec, relaxLevel: number, blocked: Blocked): SearchQuery {
  const query: SearchQuery = { ...buildSearchQuery(spec, relaxLevel, blocked), order: [['dph_total', 'asc']], limit: EXPLAIN_LIMIT };
  delete query['dph_total'];
  return query;
}

/**
 * The widest search the run could make: rentable offers with a direct port, priced for its disk,
 * none of the spec's filters, no cap, cheapest first. Its answer is the market `excludedMost` reads.
 * `verified` and `rented` are sent in the forms the service reads as "either" and "not rented"
 * (search_offers.yaml: absent, they mean eq true and eq false; ./search-query.ts).
 */
export function marketQuery(spec: ResolvedJobSpec): SearchQuery {
  return {
    verified: { in: [true, false] },
    rentable: { eq: true },
    rented: { eq: false },
    direct_port_count: { gte: 1 },
    allocated_storage: spec.disk_gb,
    order: [['dph_total', 'asc']],
    type: spec.search.type,
    limit: EXPLAIN_LIMIT,
  };
}

/** The keys of a search body that are not filters. */
const NOT_FILTERS = new Set(['allocated_storage', 'order', 'type', 'limit']);

/** Whether `value` passes one operator of a filter; undefined when the offer's value cannot be compared. */
function passes(op: string, bound: unknown, value: unknown): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  switch (op) {
    case 'eq':
      return value === bound;
    case 'neq':
      return value !== bound;
    case 'in':
      return Array.isArray(bound) ? bound.includes(value) : undefined;
    case 'notin':
      return Array.isArray(bound) ? !bound.includes(value) : undefined;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (typeof value !== 'number' || typeof bound !== 'number') return undefined;
      return op === 'gt' ? value > bound : op === 'gte' ? value >= bound : op === 'lt' ? value < bound : value <= bound;
    }
    default:
      return undefined;
  }
}

function describeFilter(field: string, ops: Record<string, unknown>): string {
  const bounds = Object.entries(ops).map(([op, v]) => `${op} ${Array.isArray(v) ? `[${v.map(String).join(', ')}]` : String(v)}`);
  return `${field} (${bounds.join(', ')})`;
}

/**
 * Which filter of the run's query at `relaxLevel` excluded the most of `market` (the answer to
 * `marketQuery`), e.g. "of the 64 cheapest rentable offers, gpu_name (eq RTX 4900) excludes 64,
 * the most"; null when the market is empty or no filter could be compared on its offers. The price
 * cap is left out: this is asked when the filters match nothing at any price.
 */
export function excludedMost(spec: ResolvedJobSpec, relaxLevel: number, blocked: Blocked, market: Offer[]): string | null {
  if (market.length === 0) return null;
  const query = buildSearchQuery(spec, relaxLevel, blocked);
  let best: { field: string; ops: Record<string, unknown>; excluded: number } | undefined;
  for (const [field, raw] of Object.entries(query)) {
    if (NOT_FILTERS.has(field) || field === 'dph_total' || typeof raw !== 'object' || raw === null || Array.isArray(raw)) continue;
    const ops = raw as Record<string, unknown>;
    const excluded = market.filter((o) => Object.entries(ops).some(([op, bound]) => passes(op, bound, o[field]) === false)).length;
    if (excluded > 0 && (best === undefined || excluded > best.excluded)) best = { field, ops, excluded };
  }
  if (!best) return null;
  const sample =
    market.length >= EXPLAIN_LIMIT ? `of the ${market.length} cheapest rentable offers` : `of the ${market.length} rentable offers`;
  return `${sample}, ${describeFilter(best.field, best.ops)} excludes ${best.excluded}, the most`;
}

/** `$0.17/h`, `$0.162/h`: the price as people read it, at most 3 decimals, at least 2. */
function perHour(x: number): string {
  return `$${trim(x)}/h`;
}

function trim(x: number): string {
  const s = x.toFixed(3);
  return s.endsWith('0') ? s.slice(0, -1) : s;
}

/**
 * What excluded the offers, e.g. "12 offers match the filters; the cheapest costs $0.17/h with 20 GB
 * of disk, above max_price_per_hour ($0.01)". `offers` is the answer to `uncappedQuery`.
 */
export function noOffersWhy(spec: ResolvedJobSpec, offers: Offer[]): string {
  if (offers.length === 0) return 'no offer matches the filters, whatever its price';
  const count =
    offers.length >= EXPLAIN_LIMIT
      ? `at least ${offers.length} offers match`
      : `${offers.length} offer${offers.length === 1 ? ' matches' : 's match'}`;
  const priced = offers
    .map((o) => billedPriceFor(o, spec))
    .filter((p): p is number => p !== null)
    .sort((a, b) => a - b);
  const cap = `max_price_per_hour ($${trim(spec.max_price_per_hour)})`;
  const cheapest = priced[0];
  if (cheapest === undefined) return `${count} the filters, but none states a price berth can read`;
  if (overCap(cheapest, spec.max_price_per_hour)) {
    return `${count} the filters; the cheapest costs ${perHour(cheapest)} with ${spec.disk_gb} GB of disk, above ${cap}`;
  }
  const within = priced.filter((p) => !overCap(p, spec.max_price_per_hour)).length;
  return `${count} the filters and ${within} of them ${within === 1 ? 'is' : 'are'} within ${cap}, but none could be used: blocked after failed attempts, or taken by other runs`;
}
