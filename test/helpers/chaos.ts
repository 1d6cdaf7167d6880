// What the chaos tests share (test/chaos/): the seed that fixes their schedule, and berth's
// promises checked against the simulator's ledger and full instance history, not against berth's
// own view: no instance billing without a live owner, no attempt creating two instances, no run
// holding two at once, berth's record telling the ledger's story.
//
// The seed is fixed per commit (every run of the suite on one commit, in CI or here, plays the same
// schedule, so a failure reproduces), unless CHAOS_SEED names one; it is printed either way.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator, SimInstanceHistory } from '../../src/sim/index.js';
import { packagePath } from '../../src/package-path.js';

/** CHAOS_SEED, or a hash of the commit under test (GITHUB_SHA, else git HEAD), or of the date without git. */
export function chaosSeed(): { seed: number; from: string } {
  const given = process.env.CHAOS_SEED;
  if (given !== undefined && given !== '') {
    const seed = Number(given);
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`CHAOS_SEED must be a whole number >= 0, got "${given}"`);
    return { seed, from: 'CHAOS_SEED' };
  }
  let commit = process.env.GITHUB_SHA;
  try {
    commit ??= execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: packagePath(),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    // not a git checkout: the date keeps the seed fixed for the day
  }
  const basis = commit ? `commit ${commit}` : `date ${new Date().toISOString().slice(0, 10)}`;
  return { seed: parseInt(createHash('sha256').update(basis).digest('hex').slice(0, 8), 16) % 1e9, from: basis };
}

/** The run and attempt a berth label names. */
function labelParts(h: SimInstanceHistory): { runId: string; n: number } | null {
  const p = h.label?.split(':');
  return p && p.length === 4 && p[0] === 'berth' ? { runId: p[2]!, n: Number(p[3]) } : null;
}

/** The simulator's instances of berth's runs, by run id. */
export function instancesByRun(sim: RunningSimulator): Map<string, SimInstanceHistory[]> {
  const byRun = new Map<string, SimInstanceHistory[]>();
  for (const h of sim.history()) {
    const parts = labelParts(h);
    if (parts) byRun.set(parts.runId, [...(byRun.get(parts.runId) ?? []), h]);
  }
  return byRun;
}

/**
 * Every settled run (`runs`, as berth shows them) against the simulator's history and ledger:
 * every instance berth made belongs to a submitted run; what still bills is exactly the running
 * runs' instances; no attempt made two instances nor more instances than attempts; no run held two
 * live instances at once; each run's attempts name exactly its instances in the simulator, the
 * destroyed ones ended, the live one current; an ended run holds none.
 */
export function checkAgainstLedger(sim: RunningSimulator, runs: RunView[], submitted: Set<string>, why: (msg: string) => string): void {
  const ENDED = new Set(['failed', 'cancelled', 'expired']);
  const byRun = instancesByRun(sim);
  // Every instance berth made belongs to a submitted run.
  expect(
    [...byRun.keys()].filter((id) => !submitted.has(id)),
    why('instances of unknown runs'),
  ).toEqual([]);

  // No instance billing without a live owner: what still bills is exactly the running runs' instances.
  const billing = sim
    .billingNow()
    .map((h) => h.id)
    .sort();
  const owned = runs
    .filter((r) => r.state === 'running')
    .map((r) => r.instance!.id)
    .sort();
  expect(billing, why('instances billing without a live owner')).toEqual(owned);

  for (const r of runs) {
    const instances = (byRun.get(r.id) ?? []).sort((a, b) => a.created_at.wall_ms - b.created_at.wall_ms);
    // No attempt created more than one instance.
    const perAttempt = new Map<number, number>();
    for (const h of instances) perAttempt.set(labelParts(h)!.n, (perAttempt.get(labelParts(h)!.n) ?? 0) + 1);
    expect(
      [...perAttempt.values()].every((c) => c === 1),
      why(`run ${r.id}: an attempt made two instances`),
    ).toBe(true);
    // The number of creates never exceeds the attempts recorded.
    expect(instances.length, why(`run ${r.id}: more instances than attempts`)).toBeLessThanOrEqual(r.attempts.length);
    for (const n of perAttempt.keys())
      expect(n, why(`run ${r.id}: instance for unrecorded attempt ${n}`)).toBeLessThanOrEqual(r.attempts.length);
    // The run never held two live instances at once.
    for (let i = 1; i < instances.length; i++) {
      const prev = instances[i - 1]!;
      expect(prev.destroyed_at, why(`run ${r.id}: instance ${prev.id} never destroyed before the next`)).not.toBeNull();
      expect(prev.destroyed_at!.wall_ms, why(`run ${r.id}: instances ${prev.id} and ${instances[i]!.id} overlap`)).toBeLessThanOrEqual(
        instances[i]!.created_at.wall_ms,
      );
    }
    // The run's record tells the same story as the ledger: the same instances, and each one
    // destroyed in the simulator is an ended attempt in berth, the one still alive its current one.
    const recorded = r.attempts.filter((a) => a.instance_id !== null);
    expect(recorded.map((a) => a.instance_id).sort(), why(`run ${r.id}: instances differ from the simulator's`)).toEqual(
      instances.map((h) => h.id).sort(),
    );
    for (const h of instances) {
      const attempt = r.attempts.find((a) => a.instance_id === h.id)!;
      if (h.destroyed_at === null) {
        expect(r.instance?.id, why(`run ${r.id}: live instance ${h.id} is not the run's current one`)).toBe(h.id);
      } else {
        expect(attempt.outcome, why(`run ${r.id}: destroyed instance ${h.id} has no ended attempt`)).not.toBeNull();
        expect(attempt.outcome === 'running' && r.state === 'running' && r.instance?.id === h.id, why(`run ${r.id}`)).toBe(false);
      }
    }
    if (ENDED.has(r.state)) expect(r.instance, why(`ended run ${r.id} still holds an instance`)).toBeNull();
  }
}

/** A span of wall time (ms since epoch). */
export interface WallSpan {
  from: number;
  to: number;
}

/**
 * How long, in wall ms, the daemon was down (`down`: from its SIGKILL to its next start being
 * ready) after the moment a budget run's instances had billed `budgetUsd` less one poll
 * interval's worth (when berth sends its EXPIRE): no daemon can destroy anything then, so that
 * spend is not the money guard's to answer for. Billing is read from the simulator's history
 * (each instance from its create to its destroy, at `dph` per wall hour: the ledger's sim-time
 * total over the time scale); 0 when the run never reached its budget.
 */
export function downtimeAfterBudget(
  instances: SimInstanceHistory[],
  dph: number,
  budgetUsd: number,
  pollS: number,
  down: WallSpan[],
): number {
  const now = Date.now();
  const lives = instances.map((h) => ({ from: h.created_at.wall_ms, to: h.destroyed_at?.wall_ms ?? now })).sort((a, b) => a.from - b.from);
  // The wall moment the spend reached the EXPIRE threshold, instance life by instance life.
  let leftMs = (Math.max(0, budgetUsd - (dph * pollS) / 3600) / dph) * 3_600_000;
  let at: number | undefined;
  for (const life of lives) {
    const span = life.to - life.from;
    if (span >= leftMs) {
      at = life.from + leftMs;
      break;
    }
    leftMs -= span;
  }
  if (at === undefined) return 0;
  const end = Math.max(...lives.map((l) => l.to));
  return down.reduce((sum, d) => sum + Math.max(0, Math.min(d.to, end) - Math.max(d.from, at)), 0);
}
