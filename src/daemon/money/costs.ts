// `berth costs` (GET /v1/costs): spend per run and per instance from berth's own records (the
// attempts table, ./spend.ts), and, where the key may read billing (billing_read), the service's
// charges for the same instances (`GET /api/v0/charges/`) beside them with the difference.
//
// The service charges whole UTC days (a contract's charges are per day, filtered by the day's
// 00:00 UTC key), so the report starts at 00:00 UTC of the --since day and ends now, for both
// figures: berth's spend is cut to that window and the service's days are the same days. berth's
// figure is the higher one by design: it counts from the create's sending to the confirmed destroy,
// at the full billed price in every status, while the service bills from the instance's own start to
// the destroy, compute only while it loads or runs, and rounds each contract to 3 decimals.
import type { Charge } from '../../client/marketplace-client.js';
import { BerthError, toRunError } from '../../errors.js';
import type { Store } from '../../store/index.js';
import type { CostsReport } from '../../wire/control-api.js';
import { round6 } from '../../store/spend.js';
import { billsSince, usdSince } from '../instances/holdings.js';

const DAY_MS = 86_400_000;

export type { CostsReport };
type RunCosts = CostsReport['runs'][number];

/** `--since`: a date (`2026-11-20`, read as UTC) or an ISO time; the report starts at 00:00 UTC of its day. */
export function parseSince(text: string | null, now: number): number | undefined {
  if (text === null || text === '') return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00Z`) : Date.parse(text);
  if (!Number.isFinite(ms) || ms > now) {
    throw new BerthError(
      'bad_request',
      `since must be a date (YYYY-MM-DD, UTC) or an ISO time not in the future, got "${text.slice(0, 40)}".`,
    );
  }
  return ms;
}

const dayStart = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;

export async function costsReport(
  store: Store,
  now: number,
  sinceMs: number | undefined,
  charges?: (range: { fromS: number; toS: number }) => Promise<Charge[]>,
): Promise<CostsReport> {
  // Without --since: every record berth keeps (store.retention_days of them).
  const bills = billsSince(store, sinceMs === undefined ? -Infinity : dayStart(sinceMs), now);
  const from = dayStart(sinceMs ?? bills.reduce((m, b) => Math.min(m, b.since), now));
  const byRun = new Map<string, RunCosts>();
  for (const b of bills.sort((x, y) => x.runId.localeCompare(y.runId) || x.n - y.n)) {
    let run = byRun.get(b.runId);
    if (!run) {
      const row = store.runs.get(b.runId);
      run = { id: b.runId, name: row?.name ?? '?', state: row?.state ?? '?', usd: 0, usd_per_hour: 0, instances: [] };
      byRun.set(b.runId, run);
    }
    const usd = b.usd(from);
    run.usd += usd;
    run.usd_per_hour += b.usdPerHour;
    run.instances.push({
      attempt: b.n,
      instance_id: b.instanceId,
      usd: round6(usd),
      service_usd: null,
      difference_usd: null,
      ...(b.warmHoldId !== undefined ? { warm: true } : {}),
    });
  }
  const runs = [...byRun.values()].map((r) => ({ ...r, usd: round6(r.usd), usd_per_hour: round6(r.usd_per_hour) }));
  // Spend per UTC day (the dashboard's chart): what was spent since a day's start less what was
  // spent since the next day's, so the days add up to the total.
  const days: CostsReport['days'] = [];
  for (let day = from; day <= now; day += DAY_MS) {
    const usd = usdSince(bills, day) - usdSince(bills, day + DAY_MS);
    days.push({ day: new Date(day).toISOString().slice(0, 10), usd: round6(usd) });
  }
  const report: CostsReport = {
    since: new Date(from).toISOString(),
    until: new Date(now).toISOString(),
    runs,
    days,
    total_usd: round6(runs.reduce((s, r) => s + r.usd, 0)),
    total_usd_per_hour: round6(runs.reduce((s, r) => s + r.usd_per_hour, 0)),
    service: { compared: false, note: 'not asked', total_usd: null },
  };
  if (!charges) return report;

  let got: Charge[];
  try {
    got = await charges({ fromS: from / 1000, toS: Math.floor(now / 1000) });
  } catch (err) {
    const e = toRunError(err);
    report.service.note =
      e.kind === 'permission'
        ? "the API key lacks billing_read, so the service's charges cannot be read: berth's own figures only"
        : `the service's charges could not be read (${e.kind}: ${e.message}): berth's own figures only`;
    return report;
  }
  const byInstance = new Map<number, number>();
  for (const c of got) {
    const m = /^instance-(\d+)$/.exec(c.source);
    if (m) byInstance.set(Number(m[1]), (byInstance.get(Number(m[1])) ?? 0) + c.amount);
  }
  // A warm instance (issue #51) is named by several rows (the attempt that made it, its warm holds,
  // the attempts that took it): its one charge is shared among them by what berth counts for each,
  // so the rows add up to the service's figure once.
  const berthByInstance = new Map<number, number>();
  for (const run of runs)
    for (const i of run.instances)
      if (i.instance_id !== null) berthByInstance.set(i.instance_id, (berthByInstance.get(i.instance_id) ?? 0) + i.usd);
  const rowsOf = new Map<number, number>();
  for (const run of runs)
    for (const i of run.instances) if (i.instance_id !== null) rowsOf.set(i.instance_id, (rowsOf.get(i.instance_id) ?? 0) + 1);
  let total = 0;
  for (const run of runs) {
    for (const inst of run.instances) {
      if (inst.instance_id === null) continue;
      // An instance the report does not list was charged nothing on these days.
      const charged = byInstance.get(inst.instance_id) ?? 0;
      const berth = berthByInstance.get(inst.instance_id)!;
      const service = berth > 0 ? (charged * inst.usd) / berth : charged / rowsOf.get(inst.instance_id)!;
      inst.service_usd = round6(service);
      inst.difference_usd = round6(inst.usd - service);
      total += service;
    }
  }
  const contracts = berthByInstance.size;
  report.service = { compared: true, note: serviceNote(report.total_usd, total, contracts), total_usd: round6(total) };
  return report;
}

/**
 * What the comparison means, in words that match the figures: berth's figure is the higher by
 * design, but a report that says so under a service total above it (a simulator under a time scale
 * once did) contradicts itself. The service rounds each contract to 3 decimals, hence the margin.
 */
export function serviceNote(berthUsd: number, serviceUsd: number, contracts: number): string {
  const days = "the service's charges (GET /api/v0/charges/) for the same whole UTC days";
  if (serviceUsd <= berthUsd + 0.0005 * contracts) {
    return `${days}; berth counts from the create to the confirmed destroy at the full billed price, so its figure is the higher`;
  }
  return `${days}; they are above berth's figure, which counts from the create to the confirmed destroy at the full billed price and should be the higher: the instances with a negative DIFF were billed for time berth did not record`;
}
