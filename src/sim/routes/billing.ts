// Billing: the charges report (show_charges.yaml), served from the ledger (charges.ts).
// It needs `billing_read`: permissions.mdx puts invoices under that category, and charges are in
// the same "Billing" group of the API, so a key holding only misc, user_read, instance_read and
// instance_write gets 403 here. As the yaml documents, a request without an Authorization header is
// 403 "This action requires login." and a key that matches no user is 404 auth_error.
import {
  chargesPage,
  CHARGES_DEFAULT_LIMIT,
  CHARGES_MAX_LIMIT,
  CONTRACT_TYPES,
  decodeChargesToken,
  type ChargesQuery,
} from '../charges.js';
import type { Route, RouteContext, RouteResult } from '../route.js';
import { invalidArgs } from '../sim-error.js';

/** show_charges.yaml's documented 400 bodies, verbatim (the first has no `error`). */
const MISSING_DAY = { success: false, msg: "Must provide both 'day' gte and lte filters for instance charges" };
const BAD_TOKEN = { success: false, error: 'invalid_token', msg: 'Invalid pagination token' };

function parseQuery(query: URLSearchParams): ChargesQuery | RouteResult {
  let filters: unknown;
  const raw = query.get('select_filters');
  try {
    filters = raw === null ? {} : JSON.parse(raw);
  } catch {
    throw invalidArgs('select_filters must be a JSON object.');
  }
  if (typeof filters !== 'object' || filters === null || Array.isArray(filters)) throw invalidArgs('select_filters must be a JSON object.');
  const f = filters as Record<string, unknown>;
  const unknown = Object.keys(f).find((k) => k !== 'day' && k !== 'type');
  if (unknown !== undefined) throw invalidArgs(`select_filters.${unknown.slice(0, 40)} is not a filter of charges (day, type).`);
  const day = f.day as Record<string, unknown> | undefined;
  const gte = day?.gte;
  const lte = day?.lte;
  if (typeof gte !== 'number' || typeof lte !== 'number' || !Number.isFinite(gte) || !Number.isFinite(lte))
    return { status: 400, body: MISSING_DAY };

  let types: readonly string[] = CONTRACT_TYPES;
  if (f.type !== undefined) {
    const list = (f.type as Record<string, unknown> | null)?.in;
    if (!Array.isArray(list) || list.some((t) => !(CONTRACT_TYPES as readonly unknown[]).includes(t))) {
      throw invalidArgs(`select_filters.type must be {"in": [...]} of ${CONTRACT_TYPES.join(', ')}.`);
    }
    types = list as string[];
  }

  const format = query.get('format') ?? 'table';
  if (format !== 'table' && format !== 'tree') throw invalidArgs('format must be table or tree.');
  const latest = query.get('latest_first') ?? 'true';
  if (!['true', 'false', 'True', 'False'].includes(latest)) throw invalidArgs('latest_first must be true or false.');
  const rawLimit = query.get('limit');
  const limit = rawLimit === null ? CHARGES_DEFAULT_LIMIT : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1) throw invalidArgs('limit must be an integer of at least 1.');

  const token = query.get('after_token');
  let afterId: number | null = null;
  if (token !== null && token !== '') {
    afterId = decodeChargesToken(token);
    if (afterId === null) return { status: 400, body: BAD_TOKEN };
  }
  return { gte, lte, types, latestFirst: latest.toLowerCase() === 'true', limit: Math.min(limit, CHARGES_MAX_LIMIT), afterId };
}

function charges({ world, query }: RouteContext): RouteResult {
  const q = parseQuery(query);
  if (!('gte' in q)) return q;
  return { body: chargesPage(world.instances.history(), world.clock, q) };
}

export const billingRoutes: Route[] = [
  {
    method: 'GET',
    path: '/api/v0/charges',
    auth: 'key',
    category: 'billing_read',
    group: 'charges',
    limited: 'detail',
    badKey404: true,
    missingKey403: true,
    handler: charges,
  },
];
