// The poller section of `npm run bench`: how soon a booting instance is seen running with 0, 100
// and 1,000 other instances on the account, berth's poller against the full-sweep poller it
// replaced (measure-poller.ts), at the default 10 s interval and the default list rate limit.
import { measurePoller, type PollerKind, type PollerResult } from './measure-poller.js';
import { median, quantile, type BenchRow, type BenchSection } from './types.js';

const INTERVAL_S = 10;
const SIZES = [0, 100, 1000];

const s1 = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : 'n/a');
const summary = (r: PollerResult) =>
  `median ${s1(median(r.detectionMs))} · p99 ${s1(quantile(r.detectionMs, 0.99))} · max ${s1(Math.max(...r.detectionMs))}` +
  (r.missed > 0 ? ` · ${r.missed} not seen in time` : '');

export async function runPollerBench(opts: { quick: boolean }): Promise<BenchSection> {
  const watched = opts.quick ? 10 : 30;
  const rows: BenchRow[] = [];
  for (const others of SIZES) {
    const results: Partial<Record<PollerKind, PollerResult>> = {};
    // One after the other, each on its own simulator: neither shares the list budget with the other.
    for (const kind of ['targeted', 'full-sweep'] as const) {
      results[kind] = await measurePoller({ kind, others, watched, intervalS: INTERVAL_S, seed: 21 + others }, 240_000);
    }
    const berth = results.targeted!;
    const old = results['full-sweep']!;
    const targetMs = INTERVAL_S * 1000 + 1000;
    const p99 = quantile(berth.detectionMs, 0.99);
    rows.push({
      metric: `detection with ${others.toLocaleString('en-US')} other instances: berth`,
      value: summary(berth),
      target: `p99 <= ${s1(targetMs)} (interval + 1 s)`,
      met: berth.missed === 0 && p99 <= targetMs,
      note: `${berth.detectionMs.length} instances created and watched until running; ${berth.listCallsPerMin.toFixed(1)} list calls/min, ${berth.rateLimited} answered 429`,
    });
    rows.push({
      metric: `detection with ${others.toLocaleString('en-US')} other instances: full-sweep poller`,
      value: summary(old),
      note: `the poller berth had: every page (25 instances) of the account every interval; ${old.listCallsPerMin.toFixed(1)} list calls/min, ${old.rateLimited} answered 429`,
    });
  }
  return {
    title: `Instance polling: detection at ${INTERVAL_S} s interval, list rate ${'0.9'}/s${opts.quick ? ' (quick: 10 instances per size)' : ''}`,
    rows,
  };
}
