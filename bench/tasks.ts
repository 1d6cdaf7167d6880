// The tasks section (issue #19): how soon a task's instance is destroyed once the task ended and the
// container stopped itself, at 1 and 100 tasks ending together. Rows here; the measurement is
// measure-tasks.ts.
import { runTasks, type TasksResult } from './measure-tasks.js';
import { median, quantile, type BenchRow, type BenchSection } from './types.js';

const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

function row(r: TasksResult, goal: boolean): BenchRow {
  const { plan, stopToDestroyMs: ms } = r;
  const boundMs = plan.pollS * 1000 + 1000;
  const p99 = quantile(ms, 0.99);
  const allDone = r.succeeded === plan.tasks && r.billingAfter === 0;
  return {
    metric: `task end → destroy, ${plan.tasks} task${plan.tasks === 1 ? '' : 's'} ending together, ${plan.documented ? 'documented limits' : 'limits raised'}`,
    value: `median ${s(median(ms))} · p99 ${s(p99)} · max ${s(Math.max(...ms))}; ${r.succeeded}/${plan.tasks} succeeded, ${r.billingAfter} billing after`,
    ...(goal ? { target: `p99 <= ${s(boundMs)} (interval + 1 s)`, met: allDone && p99 <= boundMs } : {}),
    note:
      `wall time from the container's own stop (the wrapper, after its end marker) to the destroy reaching the simulator; a real berth daemon, ${plan.pollS} s poll interval` +
      (plan.documented
        ? '; the simulator at its documented limits (v1 list 1/s with 25 a page, destroy 3/s, logs 1/s) and berth at its defaults (other 0.9/s, destroy 3/s): each end costs one log read and one destroy, so 100 ends take at least 100 log reads at ~1/s; this row shows the service-bound tail, no goal'
        : '; the simulator with no rate limits and berth at 50 calls/s, so that what is timed is berth’s own path (list, log read, destroy)'),
  };
}

export async function runTasksBench(opts: { quick: boolean }): Promise<BenchSection> {
  const rows: BenchRow[] = [];
  rows.push(row(await runTasks({ tasks: 1, documented: false, pollS: 1, timeoutMs: 120_000 }), true));
  rows.push(row(await runTasks({ tasks: 100, documented: false, pollS: 1, timeoutMs: 240_000 }), true));
  if (!opts.quick) rows.push(row(await runTasks({ tasks: 100, documented: true, pollS: 2, timeoutMs: 600_000 }), false));
  return { title: 'Tasks: end → destroy (#19)', rows };
}
