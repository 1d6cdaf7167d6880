// The warm section (issue #51, part 5): 20 tasks of one spec one after another, warm on and warm
// off, at the documented rate limits with a machine's first pull of the image at 60 sim s: the gap
// from a task's end to the next one's first output line, the spend, the creates. Rows here; the
// measurement is measure-warm.ts, which says how sim and wall seconds are put on one clock.
import { loadavg } from 'node:os';
import { runWarm, type WarmPlan, type WarmResult } from './measure-warm.js';
import { median, type BenchRow, type BenchSection } from './types.js';

const s1 = (x: number) => `${x.toFixed(1)} s`;
const usd = (x: number) => `$${x.toFixed(4)}`;
const maxOf = (xs: number[]) => (xs.length ? Math.max(...xs) : Number.NaN);

interface Figures {
  medianS: number;
  maxS: number;
}

function figures(r: WarmResult, from: 'end' | 'marker' = 'end'): Figures {
  const gaps = r.gaps.flatMap((g) => (from === 'end' ? [g.serviceS] : g.markerServiceS === null ? [] : [g.markerServiceS]));
  return { medianS: median(gaps), maxS: maxOf(gaps) };
}

function modeRow(r: WarmResult, target?: { maxS: number; coldMedianS: number; coldUsd: number }): BenchRow {
  const { plan } = r;
  const f = figures(r);
  const wall = r.gaps.map((g) => g.wallMs / 1000);
  const seen = r.gaps.flatMap((g) => (g.seenWallMs === null ? [] : [g.seenWallMs / 1000]));
  const marker = r.gaps.flatMap((g) => (g.markerWallMs === null ? [] : [g.markerWallMs / 1000]));
  const hows = r.gaps.reduce<Record<string, number>>((n, g) => ({ ...n, [g.how]: (n[g.how] ?? 0) + 1 }), {});
  const succeeded = r.tasks.filter((t) => t.state === 'succeeded').length;
  const goal = target
    ? {
        target: `median and max <= ${target.maxS} s and <= a fifth of cold's median (${s1(target.coldMedianS / 5)}); spend < cold's (${usd(target.coldUsd)})`,
        met:
          succeeded === plan.tasks &&
          r.gaps.length === plan.tasks - 1 &&
          f.maxS <= target.maxS &&
          f.medianS <= target.coldMedianS / 5 &&
          r.serviceUsd < target.coldUsd,
      }
    : {};
  return {
    metric: `warm ${plan.warm ? `on (idle_s ${plan.idleS})` : 'off'}: task end → next task's first output line, ${plan.tasks} tasks one after another`,
    value:
      `median ${s1(f.medianS)} · max ${s1(f.maxS)} (service s); spend ${usd(r.serviceUsd)} (service s), ` +
      `sim ledger ${usd(r.simUsd)} (sim s), berth costs ${usd(r.berthUsd)}` +
      (r.serviceChargesUsd !== null
        ? `, the service's charges ${usd(r.serviceChargesUsd)} (berth's comparison says ${usd(r.berthServiceUsd ?? 0)})`
        : '') +
      `; ${r.creates} creates, ${r.recycles} recycles, ${r.firstPulls} first pulls; ${succeeded}/${plan.tasks} succeeded, ${r.billingAfter} billing after`,
    ...goal,
    note:
      `gaps ${r.gaps.length} (tasks 2-${plan.tasks}), containers: ${Object.entries(hows)
        .map(([how, n]) => `${n} ${how}`)
        .join(', ')}; wall: median ${s1(median(wall))} · max ${s1(maxOf(wall))}; ` +
      `previous run's end → berth showing the line (its event stream, SSH follow): median ${s1(median(seen.length ? seen : [Number.NaN]))} over ${seen.length} (wall); ` +
      `previous task's end marker → first line: median ${s1(median(marker))} (wall); the mode took ${s1(r.wallS)} wall`,
  };
}

/** Cold's gaps split by how its container was made: a machine's first pull of the image, or a machine that had it. */
function byHowRow(cold: WarmResult, warm: WarmResult): BenchRow {
  const part = (r: WarmResult, how: string) => {
    const xs = r.gaps.filter((g) => g.how === how).map((g) => g.serviceS);
    return xs.length ? `${xs.length} × ${how}: median ${s1(median(xs))} · max ${s1(maxOf(xs))}` : `0 × ${how}`;
  };
  return {
    metric: 'the gaps by how the next container was made',
    value: `warm off: ${part(cold, 'create, first pull')}; ${part(cold, 'create, image cached')}. warm on: ${part(warm, 'recycle')} (service s)`,
    note:
      'a destroyed instance’s offer is back in the search at once (src/sim/catalog.ts), so a cold task often rents the machine it just left, which has the image: ' +
      'its load is cached_boot_s after provision_s, against a recycle’s recycle_s before the same cached_boot_s',
  };
}

/** The same gaps counted from each task's own end (its `done` line), berth's path to the run's end included. */
function markerRow(cold: WarmResult, warm: WarmResult): BenchRow {
  const c = figures(cold, 'marker');
  const w = figures(warm, 'marker');
  return {
    metric: "the same gaps from the task's own end (its `done` line) instead of berth's run end",
    value: `warm on: median ${s1(w.medianS)} · max ${s1(w.maxS)}; warm off: median ${s1(c.medianS)} · max ${s1(c.maxS)} (service s)`,
    target: `warm max <= 15 s and median <= a fifth of cold's (${s1(c.medianS / 5)})`,
    met: w.maxS <= 15 && w.medianS <= c.medianS / 5,
    note: "adds berth's own path from the task's end to the run's end (seeing the end, taking the outputs, the destroy or the hand-over), on the wall clock",
  };
}

export async function runWarmBench(opts: { quick: boolean }): Promise<BenchSection> {
  const tasks = opts.quick ? 5 : 20;
  const base: Omit<WarmPlan, 'warm'> = {
    tasks,
    idleS: 120,
    timeScale: 10,
    firstPullS: 60,
    cachedBootS: 3,
    seed: 51,
    timeoutMs: tasks * 90_000,
  };
  const loadBefore = loadavg();
  const cold = await runWarm({ ...base, warm: false });
  const warm = await runWarm({ ...base, warm: true });
  const loadAfter = loadavg();
  const c = figures(cold);
  return {
    title: 'Warm instances: task end → next first line (#51)',
    rows: [
      modeRow(cold),
      modeRow(warm, { maxS: 15, coldMedianS: c.medianS, coldUsd: cold.serviceUsd }),
      markerRow(cold, warm),
      byHowRow(cold, warm),
      {
        metric: 'how it was measured',
        value: `load average ${loadBefore.map((x) => x.toFixed(2)).join(' ')} before, ${loadAfter.map((x) => x.toFixed(2)).join(' ')} after`,
        note:
          `a real berth daemon at its defaults (config/default.json: rate limits, 10 s poll, SSH follow) against the simulator at its documented limits, ` +
          `time_scale ${base.timeScale}, lifecycle defaults (provision 5 s, boot_s 60-180, recycle_s 10) with first_pull_s ${base.firstPullS} and cached_boot_s ${base.cachedBootS}, ` +
          `a real sshd per instance; each task \`echo task-N-start <ms>; sleep 1; echo done <ms>\`, submitted when berth reports the last run ended (its updated_at once final). ` +
          `The gap ends when the container printed its first line (the line's own time). "service s": the simulator's phases (provisioning, recycling, loading) in sim seconds, ` +
          `berth's path, the rate limits and the task in wall seconds, as each would pass at the real service; raw wall figures in the notes. ` +
          `Spend: each instance's history billed on the same clock (compute while loading/running/recycling, disk for its life), the warm tail of idle_s included; ` +
          `the simulator's ledger bills sim seconds, so its raw figure counts wall-clock phases ${base.timeScale}× over; berth's costs bill wall hours, and so do the service's charges ` +
          `(the simulator divides them by the time scale, src/sim/charges.ts), each contract rounded to 3 decimals; "the service's charges" counts each instance once, ` +
          `while berth's own comparison (GET /v1/costs service.total_usd) adds an instance's whole charge once per row that names it (every taker's attempt and warm hold)`,
      },
    ],
  };
}
