// Offer search as search_offers.yaml documents `POST /api/v0/bundles/`: `{field: {op: value}}`
// filters, `order`, `limit`, `type` and `allocated_storage`.
//  - Absent `verified`, `rentable` and `rented` filters take their documented defaults
//    ({eq: true}, {eq: true}, {eq: false}); a client widens them explicitly
//    (`{"verified": {"in": [true, false]}}`).
//  - Prices: `dph_total` = compute (dph_base, or min_bid for `bid`) + allocated_storage GB of disk
//    at storage_cost $/GB/month (pricing.ts); filters and order see the priced values.
//  - `gpu_name` treats "_" as " " (the CLI's "RTX_4090"); `geolocation` compares two-letter country
//    codes ("Texas, US" is "US"); `driver_version` compares versions, also as the CLI's integer form
//    (535.86.05 → 535086005); numbers and booleans sent as strings are coerced.
//  - `rentable` is false while the offer is rented; `rented` is true when this account has an
//    instance on the offer's machine.
//  - A key that is neither an offer field nor a parameter is refused: the docs list the keys.
import type { Catalog, SimOffer } from './catalog.js';
import { priced } from './catalog.js';
import { DEFAULT_ALLOCATED_GB, diskDph, round } from './pricing.js';
import { invalidRequest } from './sim-error.js';
import type { Json } from './validate.js';

const OPERATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'notin'] as const;
type Operator = (typeof OPERATORS)[number];
type Scalar = string | number | boolean | null;

interface Filter {
  field: keyof SimOffer;
  op: Operator;
  value: Scalar | Scalar[];
}

export interface SearchLimits {
  default_limit: number;
  max_limit: number;
}

/** Body keys that are parameters, not filters. */
const PARAMETERS = new Set(['order', 'limit', 'type', 'allocated_storage']);

/** search_offers.yaml's defaults for filters the query leaves out. */
const DEFAULT_FILTERS: Json = { verified: { eq: true }, rentable: { eq: true }, rented: { eq: false } };

interface Pricing {
  gb: number;
  bid: boolean;
}

export function searchOffers(catalog: Catalog, body: Json, limits: SearchLimits): SimOffer[] {
  const type = parseType(body.type);
  const pricing: Pricing = { gb: parseStorage(body.allocated_storage), bid: type === 'bid' };
  const sample = catalog.offers[0]!;
  const filters = parseFilters({ ...DEFAULT_FILTERS, ...body }, sample);
  const order = parseOrder(body.order, sample);
  const limit = parseLimit(body.limit, limits);
  const value = (o: SimOffer, f: keyof SimOffer) => valueOf(catalog, o, f, pricing);

  const hits: SimOffer[] = [];
  for (const offer of catalog.offers) {
    if (filters.every((f) => matches(value(offer, f.field), f))) hits.push(offer);
  }
  if (order.length > 0) hits.sort((a, b) => compareBy(a, b, order, value));
  return hits.slice(0, limit).map((o) => view(catalog, o, pricing));
}

/** The offer as returned: priced for this query, with the live rentable/rented flags. */
function view(catalog: Catalog, o: SimOffer, p: Pricing): SimOffer {
  const base = p.gb === DEFAULT_ALLOCATED_GB ? (p.bid ? catalog.bidView(o.id)! : o) : priced(o, p.gb, p.bid);
  const rentable = !catalog.isRented(o.id);
  const rented = catalog.accountUsesMachine(o.machine_id);
  return base.rentable === rentable && base.rented === rented ? base : { ...base, rentable, rented };
}

/** A field's value for this query, computed without copying the offer. */
function valueOf(catalog: Catalog, o: SimOffer, field: keyof SimOffer, p: Pricing): unknown {
  switch (field) {
    case 'rentable':
      return !catalog.isRented(o.id);
    case 'rented':
      return catalog.accountUsesMachine(o.machine_id);
    case 'is_bid':
      return p.bid;
    case 'gpu_name':
      return o.gpu_name;
    case 'geolocation':
      return countryCode(o.geolocation);
    case 'driver_version':
      return versionNumber(o.driver_version);
    case 'storage_total_cost':
      return diskDph(p.gb, o.storage_cost);
    case 'dph_total':
    case 'dlperf_per_dphtotal':
    case 'flops_per_dphtotal': {
      const total = (p.bid ? o.min_bid : o.dph_base) + diskDph(p.gb, o.storage_cost);
      if (field === 'dph_total') return total;
      return round((field === 'dlperf_per_dphtotal' ? o.dlperf : o.total_flops) / total, 3);
    }
    default:
      return o[field];
  }
}

function parseType(type: unknown): 'ondemand' | 'bid' | 'reserved' {
  if (type === undefined || type === null || type === 'on-demand' || type === 'ondemand') return 'ondemand';
  if (type === 'bid' || type === 'reserved') return type;
  throw invalidRequest(`type must be "ondemand" (or "on-demand"), "bid" or "reserved", got ${JSON.stringify(type)}.`);
}

function parseStorage(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_ALLOCATED_GB;
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) throw invalidRequest('allocated_storage must be a positive number of GB.');
  return n;
}

function parseFilters(body: Json, sample: SimOffer): Filter[] {
  const filters: Filter[] = [];
  for (const [field, spec] of Object.entries(body)) {
    if (PARAMETERS.has(field)) continue;
    if (!Object.hasOwn(sample, field)) throw invalidRequest(`Error in query parameters: ${field} is not a valid search key.`);
    const key = field as keyof SimOffer;
    if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
      throw invalidRequest(`filter ${field} must be an object like {"eq": value}.`);
    }
    for (const [op, raw] of Object.entries(spec as Json)) {
      if (!(OPERATORS as readonly string[]).includes(op)) {
        throw invalidRequest(`unknown operator "${op}" on ${field}; use one of ${OPERATORS.join(', ')}.`);
      }
      if (op === 'in' || op === 'notin') {
        if (!Array.isArray(raw)) throw invalidRequest(`${field}.${op} must be an array.`);
        filters.push({ field: key, op: op as Operator, value: raw.map((v) => coerce(v, key, sample)) });
      } else {
        filters.push({ field: key, op: op as Operator, value: coerce(raw, key, sample) });
      }
    }
  }
  return filters;
}

/** Brings a query value to the form `valueOf` gives the field (the CLI sends strings). */
function coerce(v: unknown, field: keyof SimOffer, sample: SimOffer): Scalar {
  if (v === null) return null;
  if (field === 'gpu_name' && typeof v === 'string') return v.replaceAll('_', ' ');
  if (field === 'geolocation' && typeof v === 'string') return v.trim().toUpperCase();
  if (field === 'driver_version') {
    const n = typeof v === 'number' ? v : typeof v === 'string' ? versionNumber(v) : NaN;
    if (Number.isFinite(n)) return n;
  } else if (typeof sample[field] === 'number') {
    const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
    if (typeof n === 'number' && Number.isFinite(n)) return n;
    if (typeof v === 'boolean') return v ? 1 : 0;
  } else if (typeof sample[field] === 'boolean') {
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'True' || v === 1 || v === '1') return true;
    if (v === 'false' || v === 'False' || v === 0 || v === '0') return false;
  } else if (typeof v === 'string' || typeof v === 'number') {
    return String(v);
  }
  throw invalidRequest(`value ${JSON.stringify(v)} does not fit field ${field} (${typeof sample[field]}).`);
}

/** "Texas, US" → "US": the documented filter takes two-letter country codes. */
function countryCode(geolocation: string): string {
  return geolocation
    .slice(geolocation.lastIndexOf(',') + 1)
    .trim()
    .toUpperCase();
}

/** "535.86.05" → 535086005, the CLI's integer form; an integer string passes through. */
function versionNumber(v: string): number {
  const parts = v.trim().split('.');
  if (parts.length === 1) return /^\d+$/.test(parts[0]!) ? Number(parts[0]) : NaN;
  if (parts.length !== 3 || !parts.every((p) => /^\d{1,3}$/.test(p))) return NaN;
  return Number(parts.map((p) => p.padStart(3, '0')).join(''));
}

function matches(actual: unknown, f: Filter): boolean {
  const v = f.value;
  switch (f.op) {
    case 'eq':
      return actual === v;
    case 'neq':
      return actual !== v;
    case 'gt':
      return v !== null && (actual as number) > (v as number);
    case 'gte':
      return v !== null && (actual as number) >= (v as number);
    case 'lt':
      return v !== null && (actual as number) < (v as number);
    case 'lte':
      return v !== null && (actual as number) <= (v as number);
    case 'in':
      return (v as Scalar[]).includes(actual as Scalar);
    case 'notin':
      return !(v as Scalar[]).includes(actual as Scalar);
  }
}

type Order = Array<[keyof SimOffer, 1 | -1]>;

function parseOrder(order: unknown, sample: SimOffer): Order {
  if (order === undefined || order === null) return [['score', -1]];
  if (!Array.isArray(order)) throw invalidRequest('order must be a list of [field, "asc"|"desc"] pairs.');
  return order.map((pair): [keyof SimOffer, 1 | -1] => {
    // A bare field name sorts ascending; a leading "-" sorts descending (the CLI's own syntax).
    if (typeof pair === 'string') {
      const desc = pair.startsWith('-');
      return [checkField(desc ? pair.slice(1) : pair, sample), desc ? -1 : 1];
    }
    if (!Array.isArray(pair) || typeof pair[0] !== 'string') {
      throw invalidRequest('order must be a list of [field, "asc"|"desc"] pairs.');
    }
    const dir = pair[1] ?? 'asc';
    if (dir !== 'asc' && dir !== 'desc') throw invalidRequest(`order direction must be "asc" or "desc", got ${JSON.stringify(dir)}.`);
    return [checkField(pair[0], sample), dir === 'desc' ? -1 : 1];
  });
}

function checkField(field: string, sample: SimOffer): keyof SimOffer {
  if (!Object.hasOwn(sample, field)) throw invalidRequest(`cannot order by unknown field ${field}.`);
  return field as keyof SimOffer;
}

function compareBy(a: SimOffer, b: SimOffer, order: Order, value: (o: SimOffer, f: keyof SimOffer) => unknown): number {
  for (const [field, dir] of order) {
    const x = value(a, field) as number | string;
    const y = value(b, field) as number | string;
    if (x === y) continue;
    return (x < y ? -1 : 1) * dir;
  }
  return a.id - b.id; // stable, repeatable tie-break
}

function parseLimit(limit: unknown, limits: SearchLimits): number {
  if (limit === undefined || limit === null) return limits.default_limit;
  const n = typeof limit === 'string' ? Number(limit) : limit;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw invalidRequest('limit must be a positive integer.');
  return Math.min(n, limits.max_limit);
}
