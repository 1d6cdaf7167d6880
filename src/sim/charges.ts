// The charges report (`GET /api/v0/charges/`, show_charges.yaml): the ledger's money per instance
// contract, cut into UTC days.
//
// The service stores charges per contract and day, and `select_filters.day` {gte, lte} filters on
// that day column. The reading taken here, the strictest the yaml allows: a day's charges are
// included when the day's key, its 00:00 UTC in unix seconds, lies within [gte, lte]; a day is
// never cut inside. So a range that starts at 12:00 leaves out that whole day, and one that ends at
// 12:00 takes that whole day, up to now. The yaml's own example supports the day keys: start
// 1730419200 and end 1730678400 (both midnights, 3 days apart) for "4 days" and "96.000 hours".
// Hence a contract's `start`/`end` are its first and last included day keys, `description` counts
// those days, and `amount` is their charges rounded to 3 decimals (as documented), with a `gpu`
// (compute) and a `disk` item. Days are wall UTC days; the money in them is the ledger's (sim time),
// mapped through the clock, and then counted in wall time (divided by the time scale): a client
// such as berth records what an instance costs by the wall clock, so at `--time-scale 30` the
// report must not say 30 times what its own records say.
import type { SimClock } from './clock.js';
import type { SimInstanceHistory } from './instances.js';
import { chargesBetween, type Charges } from './ledger.js';

const DAY_S = 86_400;
/** show_charges.yaml: "Server maximum 500"; default 100. */
export const CHARGES_MAX_LIMIT = 500;
export const CHARGES_DEFAULT_LIMIT = 100;
export const CONTRACT_TYPES = ['instance', 'volume', 'serverless'] as const;

export interface ChargesQuery {
  gte: number;
  lte: number;
  /** Contract types wanted; the simulator has instances only. */
  types: readonly string[];
  latestFirst: boolean;
  limit: number;
  /** Keyset: the last contract id of the previous page. */
  afterId: number | null;
}

interface ChargeItem {
  start: number;
  end: number;
  type: 'gpu' | 'disk';
  source: null;
  description: string;
  amount: number;
  metadata: Record<string, never>;
  items: [];
}

interface ContractCharge {
  start: number;
  end: number;
  type: 'instance';
  source: string;
  description: string;
  amount: number;
  metadata: { label?: string; template_id?: number };
  items: ChargeItem[];
}

export interface ChargesPage {
  success: true;
  count: number;
  total: number;
  next_token: string | null;
  results: ContractCharge[];
}

export function chargesPage(histories: readonly SimInstanceHistory[], clock: SimClock, q: ChargesQuery): ChargesPage {
  const all: ContractCharge[] = [];
  const ordered = q.types.includes('instance') ? [...histories].sort((a, b) => (q.latestFirst ? b.id - a.id : a.id - b.id)) : [];
  for (const h of ordered) {
    const c = contractCharge(h, clock, q.gte, q.lte);
    if (c) all.push(c);
  }
  const idOf = (c: ContractCharge) => Number(c.source.slice('instance-'.length));
  const rest = q.afterId === null ? all : all.filter((c) => (q.latestFirst ? idOf(c) < q.afterId! : idOf(c) > q.afterId!));
  const page = rest.slice(0, q.limit);
  const more = rest.length > page.length;
  return {
    success: true,
    count: page.length,
    total: all.length,
    next_token: more ? encodeChargesToken(idOf(page.at(-1)!)) : null,
    results: page,
  };
}

/** The yaml's token shape: base64 of `{"values": {"id": N}}`. Opaque to clients. */
function encodeChargesToken(lastId: number): string {
  return Buffer.from(JSON.stringify({ values: { id: lastId } })).toString('base64');
}

/** The last id of a token, or null when it is not one this service issued. */
export function decodeChargesToken(token: string): number | null {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { values?: { id?: unknown } };
    const id = parsed.values?.id;
    return typeof id === 'number' && Number.isInteger(id) ? id : null;
  } catch {
    return null;
  }
}

/** The contract's charges on the days whose key lies in [gte, lte]; undefined when none does. */
function contractCharge(h: SimInstanceHistory, clock: SimClock, gte: number, lte: number): ContractCharge | undefined {
  const lifeStart = h.created_at.wall_ms / 1000;
  const lifeEnd = h.destroyed_at ? h.destroyed_at.wall_ms / 1000 : clock.wallMs() / 1000;
  const firstDay = Math.max(dayKey(lifeStart), Math.ceil(gte / DAY_S) * DAY_S);
  const lastDay = Math.min(dayKey(lifeEnd), Math.floor(lte / DAY_S) * DAY_S);
  if (lastDay < firstDay) return undefined;

  const sum: Charges = { compute_usd: 0, compute_h: 0, disk_usd: 0, disk_h: 0 };
  const nowSim = clock.simS();
  for (let day = firstDay; day <= lastDay; day += DAY_S) {
    const from = clock.simAtWall(day * 1000);
    const to = Math.min(nowSim, clock.simAtWall((day + DAY_S) * 1000));
    const c = chargesBetween(h, from, to);
    sum.compute_usd += c.compute_usd;
    sum.compute_h += c.compute_h;
    sum.disk_usd += c.disk_usd;
    sum.disk_h += c.disk_h;
  }
  // Billed hours and money in wall time (exact under one time scale; after a change of scale, at the new one).
  const wallPerSim = 1 / clock.timeScale();
  sum.compute_usd *= wallPerSim;
  sum.compute_h *= wallPerSim;
  sum.disk_usd *= wallPerSim;
  sum.disk_h *= wallPerSim;
  const days = (lastDay - firstDay) / DAY_S + 1;
  const item = (type: 'gpu' | 'disk', usd: number, hours: number): ChargeItem => ({
    start: firstDay,
    end: lastDay,
    type,
    source: null,
    description: `${hours.toFixed(3)} hours at $${(usd / hours).toFixed(3)}/hour`,
    amount: round3(usd),
    metadata: {},
    items: [],
  });
  const items: ChargeItem[] = [];
  if (sum.compute_h > 0) items.push(item('gpu', sum.compute_usd, sum.compute_h));
  if (sum.disk_h > 0) items.push(item('disk', sum.disk_usd, sum.disk_h));
  const metadata: ContractCharge['metadata'] = {};
  if (h.label !== null) metadata.label = h.label;
  if (h.template_id !== null) metadata.template_id = h.template_id;
  return {
    start: firstDay,
    end: lastDay,
    type: 'instance',
    source: `instance-${h.id}`,
    description: `Instance ${h.id} Charges - ${days} day${days === 1 ? '' : 's'}`,
    amount: round3(sum.compute_usd + sum.disk_usd),
    metadata,
    items,
  };
}

const dayKey = (unixS: number) => Math.floor(unixS / DAY_S) * DAY_S;
const round3 = (x: number) => Math.round(x * 1000) / 1000;
