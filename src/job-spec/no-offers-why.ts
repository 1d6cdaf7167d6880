// Why a run found nothing to rent, in words: a cap too low and a spec no machine fits used to end
// with the same sentence ("No usable offer matched the spec"). When the last relax step's search
// leaves nothing usable, the run makes one more search with the same filters but without the price
// cap (cheapest first), and this module reads its answer: how many offers the filters match, and
// what the cheapest of them would bill, against the cap.
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
