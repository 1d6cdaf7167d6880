// Offer search as `POST /api/v0/bundles/` does it: `{field: {op: value}}` filters on any offer
// field, `order`, `limit` and `type`. Values are coerced to the field's type the way the service
// accepts the official CLI's strings ("1" for 1, "true" for true). Fields no offer has are ignored,
// as the service ignores the CLI's extras (e.g. `allocated_storage: 5.0`).
import type { Catalog, SimOffer } from './catalog.js';
import { invalidArgs } from './sim-error.js';
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
const PARAMETERS = new Set(['order', 'limit', 'type', 'allocated_storage', 'disable_bundling', 'extra_ids']);

export function searchOffers(catalog: Catalog, body: Json, limits: SearchLimits): SimOffer[] {
  const bid = parseType(body.type);
  const pool = bid ? catalog.bidOffers : catalog.offers;
  const sample = catalog.offers[0]!;
  const filters = parseFilters(body, sample);
  const order = parseOrder(body.order, sample);
  const limit = parseLimit(body.limit, limits);

  const hits: SimOffer[] = [];
  for (const offer of pool) {
    if (catalog.isRented(offer.id)) continue;
    if (filters.every((f) => matches(offer[f.field], f))) hits.push(offer);
  }
  if (order.length > 0) hits.sort((a, b) => compareBy(a, b, order));
  return hits.slice(0, limit);
}

function parseType(type: unknown): boolean {
  if (type === undefined || type === null || type === 'on-demand' || type === 'ondemand') return false;
  if (type === 'bid' || type === 'interruptible') return true;
  throw invalidArgs(`type must be "on-demand", "ondemand" or "bid", got ${JSON.stringify(type)}.`);
}

function parseFilters(body: Json, sample: SimOffer): Filter[] {
  const filters: Filter[] = [];
  for (const [field, spec] of Object.entries(body)) {
    if (PARAMETERS.has(field)) continue;
    if (!(field in sample)) continue;
    const key = field as keyof SimOffer;
    if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
      throw invalidArgs(`filter ${field} must be an object like {"eq": value}.`);
    }
    for (const [op, raw] of Object.entries(spec as Json)) {
      if (!(OPERATORS as readonly string[]).includes(op)) {
        throw invalidArgs(`unknown operator "${op}" on ${field}; use one of ${OPERATORS.join(', ')}.`);
      }
      const like = sample[key];
      if (op === 'in' || op === 'notin') {
        if (!Array.isArray(raw)) throw invalidArgs(`${field}.${op} must be an array.`);
        filters.push({ field: key, op: op as Operator, value: raw.map((v) => coerce(v, like, field)) });
      } else {
        filters.push({ field: key, op: op as Operator, value: coerce(raw, like, field) });
      }
    }
  }
  return filters;
}

/** Brings a query value to the type of the field (the CLI sends numbers and booleans as strings). */
function coerce(v: unknown, like: unknown, field: string): Scalar {
  if (v === null) return null;
  if (typeof like === 'number') {
    const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
    if (typeof n === 'number' && Number.isFinite(n)) return n;
    if (typeof v === 'boolean') return v ? 1 : 0;
  } else if (typeof like === 'boolean') {
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'True' || v === 1 || v === '1') return true;
    if (v === 'false' || v === 'False' || v === 0 || v === '0') return false;
  } else if (typeof v === 'string' || typeof v === 'number') {
    return String(v);
  }
  throw invalidArgs(`value ${JSON.stringify(v)} does not fit field ${field} (${typeof like}).`);
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
  if (!Array.isArray(order)) throw invalidArgs('order must be a list of [field, "asc"|"desc"] pairs.');
  return order.map((pair): [keyof SimOffer, 1 | -1] => {
    // A bare field name sorts ascending; a leading "-" sorts descending (the CLI's own syntax).
    if (typeof pair === 'string') {
      const desc = pair.startsWith('-');
      return [checkField(desc ? pair.slice(1) : pair, sample), desc ? -1 : 1];
    }
    if (!Array.isArray(pair) || typeof pair[0] !== 'string') {
      throw invalidArgs('order must be a list of [field, "asc"|"desc"] pairs.');
    }
    const dir = pair[1] ?? 'asc';
    if (dir !== 'asc' && dir !== 'desc') throw invalidArgs(`order direction must be "asc" or "desc", got ${JSON.stringify(dir)}.`);
    return [checkField(pair[0], sample), dir === 'desc' ? -1 : 1];
  });
}

function checkField(field: string, sample: SimOffer): keyof SimOffer {
  if (!(field in sample)) throw invalidArgs(`cannot order by unknown field ${field}.`);
  return field as keyof SimOffer;
}

function compareBy(a: SimOffer, b: SimOffer, order: Order): number {
  for (const [field, dir] of order) {
    const x = a[field];
    const y = b[field];
    if (x === y) continue;
    return (x < y ? -1 : 1) * dir;
  }
  return a.id - b.id; // stable, repeatable tie-break
}

function parseLimit(limit: unknown, limits: SearchLimits): number {
  if (limit === undefined || limit === null) return limits.default_limit;
  const n = typeof limit === 'string' ? Number(limit) : limit;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw invalidArgs('limit must be a positive integer.');
  return Math.min(n, limits.max_limit);
}
