// The sweep section (issue #20): many runs at once at the service's documented limits, berth's
// shared searches against one search per run (runs.search_share_s 0) side by side. Sizes and rows
// here; the measurement is measure-sweep.ts.
import { runSweep, type SweepPlan, type SweepResult } from './measure-sweep.js';
import type { BenchRow, BenchSection } from './types.js';

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function row(r: SweepResult, target?: { lastS?: number; searches?: number }): BenchRow {
  const { plan } = r;
  const name = `${plan.runs} runs, ${plan.specs === 1 ? 'one spec' : `${plan.specs} specs`}, ${plan.share ? 'shared searches' : 'one search per run'}`;
  const metLast = target?.lastS === undefined || r.lastRunningMs <= target.lastS * 1000;
  const metSearches = target?.searches === undefined || r.searches <= target.searches;
  const targets = [
    ...(target?.lastS !== undefined ? [`last running <= ${target.lastS} s`] : []),
    ...(target?.searches !== undefined ? [`<= ${target.searches} searches`] : []),
  ];
  return {
    metric: name,
    value:
      `${r.running}/${plan.runs} running, last at ${r.running === plan.runs ? s(r.lastRunningMs) : `> ${s(plan.timeoutMs)}`}; ` +
      `${r.searches} searches, ${(r.calls / plan.runs).toFixed(1)} calls a run, ${r.rateLimited} 429s`,
    ...(targets.length ? { target: targets.join(', '), met: r.running === plan.runs && metLast && metSearches } : {}),
    note:
      'a real berth daemon (default client limits) against the simulator at its documented limits (search 10/min, create 4.5/s, ' +
      'v1 list 1/s with 25 a page), 30× time, 20% of machines faulty (exited, unknown, offline, stuck loading); counts from the simulator',
  };
}

export async function runSweepBench(opts: { quick: boolean }): Promise<BenchSection> {
  const plan = (runs: number, specs: number, share: boolean, timeoutMs: number): SweepPlan => ({ runs, specs, share, timeoutMs, seed: 20 });
  const rows: BenchRow[] = [];
  rows.push(row(await runSweep(plan(30, 1, true, 180_000)), { searches: 5 }));
  rows.push(row(await runSweep(plan(30, 1, false, 240_000))));
  if (!opts.quick) {
    rows.push(row(await runSweep(plan(100, 1, true, 240_000)), { lastS: 180 }));
    // 5 specs, no relax steps: <= 3 searches per distinct spec.
    rows.push(row(await runSweep(plan(100, 5, true, 240_000)), { searches: 15 }));
  }
  // At 10 searches a minute, 100 runs that each search need 10 minutes before the last one tries an offer.
  if (!opts.quick) rows.push(row(await runSweep(plan(100, 1, false, 900_000))));
  return { title: 'Sweeps at the documented limits (#20)', rows };
}
