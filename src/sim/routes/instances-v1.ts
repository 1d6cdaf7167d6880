// `GET /api/v1/instances/`, as show_instances.yaml documents it: keyset pages of at most 25
// (`limit` default 25, max 25, ≤ 0 means 5), `after_token` → `next_token` (null on the last page, a
// token this list did not issue is 400 invalid_token), `order_by` (id always appended as the
// tiebreaker, an unknown column is 400), `select_cols` (default ["*"], unknown names come back null),
// `select_filters` with the eight operators on stored columns (a computed column such as
// `dph_total` or `num_gpus` is 400 invalid_request), and the answer
// `{success, instances_found (this page), total_instances (all matching), label_counts, next_token,
// instances}`. Its rate limit (1.0 per identity) is the route's `list_v1` group.
//
// Where the description is silent: `limit` above 25 is cut to 25 (the schema's maximum; a client
// must follow next_token either way); a `limit` that is not an integer, a filter value of the
// wrong shape and an unknown operator are 400 invalid_request; null sorts last ascending (first
// descending), as in the service's PostgreSQL; a token is bound to the order it was issued for.
import { instanceRecord, type InstanceRecord } from '../instance-record.js';
import type { RouteContext, RouteResult } from '../route.js';
import { SimHttpError } from '../sim-error.js';

const PAGE_MAX = 25;
const PAGE_WHEN_NOT_POSITIVE = 5;

/**
 * Columns stored on the contract record: filterable and sortable. Everything else in the record
 * (dph_total, num_gpus, gpu_ram, ssh_host, ports, ...) is computed when it is shown.
 */
const STORED_COLUMNS: ReadonlySet<string> = new Set([
  'id',
  'machine_id',
  'host_id',
  'label',
  'actual_status',
  'intended_status',
  'cur_state',
  'next_state',
  'status_msg',
  'image_uuid',
  'image_runtype',
  'gpu_name',
  'verification',
  'geolocation',
  'is_bid',
  'start_date',
  'disk_space',
  'public_ipaddr',
  'template_id',
]);

const OPERATORS = new Set(['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'notin']);

type Order = Array<{ col: string; dir: 'asc' | 'desc' }>;
type Filter = { col: string; op: string; value: unknown };

function invalidRequest(text: string): SimHttpError {
  return new SimHttpError(400, { success: false, error: 'invalid_request', msg: `Error in query parameters: ${text}` });
}

function invalidToken(): SimHttpError {
  return new SimHttpError(400, {
    success: false,
    error: 'invalid_token',
    msg: 'Error in query parameters: after_token is not a valid token',
  });
}

function jsonParam(ctx: RouteContext, name: string, fallback: unknown): unknown {
  const raw = ctx.query.get(name);
  if (raw === null || raw === '') return fallback;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    throw invalidRequest(`${name} is not valid JSON`);
  }
}

function pageSize(ctx: RouteContext): number {
  const raw = ctx.query.get('limit');
  if (raw === null || raw === '') return PAGE_MAX;
  const n = Number(raw);
  if (!Number.isInteger(n)) throw invalidRequest('limit must be an integer');
  return n <= 0 ? PAGE_WHEN_NOT_POSITIVE : Math.min(n, PAGE_MAX);
}

function orderOf(ctx: RouteContext): Order {
  const raw = jsonParam(ctx, 'order_by', []);
  if (!Array.isArray(raw)) throw invalidRequest('order_by must be a JSON array of {"col", "dir"}');
  const order: Order = [];
  for (const item of raw) {
    const col = item && typeof item === 'object' ? (item as Record<string, unknown>).col : undefined;
    if (typeof col !== 'string' || !STORED_COLUMNS.has(col)) throw invalidRequest(`${String(col)} is not a valid sort key`);
    order.push({ col, dir: (item as Record<string, unknown>).dir === 'desc' ? 'desc' : 'asc' });
  }
  if (!order.some((o) => o.col === 'id')) order.push({ col: 'id', dir: 'asc' });
  return order;
}

function filtersOf(ctx: RouteContext): Filter[] {
  const raw = jsonParam(ctx, 'select_filters', {});
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw invalidRequest('select_filters must be a JSON object');
  const out: Filter[] = [];
  for (const [col, ops] of Object.entries(raw as Record<string, unknown>)) {
    if (!STORED_COLUMNS.has(col)) throw invalidRequest(`${col} is not a valid search key`);
    if (!ops || typeof ops !== 'object' || Array.isArray(ops)) throw invalidRequest(`the filter on ${col} must be an object {op: value}`);
    for (const [op, value] of Object.entries(ops as Record<string, unknown>)) {
      if (!OPERATORS.has(op)) throw invalidRequest(`${op} is not a valid operator`);
      if ((op === 'in' || op === 'notin') !== Array.isArray(value)) {
        throw invalidRequest(`${col}.${op} takes ${op === 'in' || op === 'notin' ? 'a list' : 'a single value'}`);
      }
      out.push({ col, op, value });
    }
  }
  return out;
}

function columnsOf(ctx: RouteContext): string[] | null {
  const raw = jsonParam(ctx, 'select_cols', ['*']);
  if (!Array.isArray(raw) || raw.some((c) => typeof c !== 'string'))
    throw invalidRequest('select_cols must be a JSON array of column names');
  return raw.includes('*') ? null : (raw as string[]);
}

/** A filter value as the column holds it: numbers may come as numeric strings. */
function coerce(stored: unknown, value: unknown): unknown {
  if (typeof stored === 'number' && typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value)))
    return Number(value);
  return value;
}

function matches(record: InstanceRecord, f: Filter): boolean {
  const stored = record[f.col] ?? null;
  const v = Array.isArray(f.value) ? f.value.map((x) => coerce(stored, x)) : coerce(stored, f.value);
  switch (f.op) {
    case 'eq':
      return stored === v;
    case 'neq':
      return stored !== v;
    case 'in':
      return (v as unknown[]).includes(stored);
    case 'notin':
      return !(v as unknown[]).includes(stored);
    default: {
      if (stored === null || v === null || typeof stored !== typeof v) return false;
      const a = stored as number | string;
      const b = v as number | string;
      return f.op === 'gt' ? a > b : f.op === 'gte' ? a >= b : f.op === 'lt' ? a < b : a <= b;
    }
  }
}

/** Ascending order of two column values, nulls last. */
function compareValues(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  if (typeof a === typeof b) return (a as number | string) < (b as number | string) ? -1 : 1;
  return String(a) < String(b) ? -1 : 1;
}

function compareRows(order: Order, a: Record<string, unknown>, b: Record<string, unknown>): number {
  for (const { col, dir } of order) {
    const c = compareValues(a[col] ?? null, b[col] ?? null);
    if (c !== 0) return dir === 'asc' ? c : -c;
  }
  return 0;
}

/** Opaque to clients: base64 of `{"values": {col: value, ...}}` of the last row, as the service's tokens look. */
function encodeToken(order: Order, row: InstanceRecord): string {
  const values = Object.fromEntries(order.map(({ col }) => [col, row[col] ?? null]));
  return Buffer.from(JSON.stringify({ values })).toString('base64');
}

function decodeToken(token: string, order: Order): Record<string, unknown> {
  let values: unknown;
  try {
    values = (JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { values?: unknown }).values;
  } catch {
    throw invalidToken();
  }
  const keys = values && typeof values === 'object' && !Array.isArray(values) ? Object.keys(values) : [];
  const wanted = order.map((o) => o.col);
  if (keys.length !== wanted.length || !wanted.every((c) => keys.includes(c))) throw invalidToken();
  return values as Record<string, unknown>;
}

export function listInstancesV1(ctx: RouteContext): RouteResult {
  const limit = pageSize(ctx);
  const order = orderOf(ctx);
  const filters = filtersOf(ctx);
  const columns = columnsOf(ctx);
  const token = ctx.query.get('after_token');
  const after = token ? decodeToken(token, order) : null;

  ctx.world.syncMinBids(); // outbid instances show as stopped in the list that follows a market move
  const matching = ctx.world.instances
    .list()
    .map(instanceRecord)
    .filter((r) => filters.every((f) => matches(r, f)))
    .sort((a, b) => compareRows(order, a, b));
  const labelCounts: Record<string, number> = {};
  for (const r of matching) {
    const label = typeof r.label === 'string' ? r.label : '';
    labelCounts[label] = (labelCounts[label] ?? 0) + 1;
  }
  const rest = after ? matching.filter((r) => compareRows(order, r, after) > 0) : matching;
  const page = rest.slice(0, limit);
  const more = rest.length > page.length;
  const shown = columns === null ? page : page.map((r) => Object.fromEntries(columns.map((c) => [c, r[c] ?? null])));
  return {
    body: {
      success: true,
      instances_found: page.length,
      total_instances: matching.length,
      label_counts: labelCounts,
      next_token: more ? encodeToken(order, page.at(-1)!) : null,
      instances: shown,
    },
  };
}
