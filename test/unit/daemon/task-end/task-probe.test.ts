// The task probe (issue #29) on a fake clock: each running task's log is read every interval, spaced
// further with many tasks so that the reads keep within half the `other` group's rate; an end
// marker found ends the task; a task that leaves the round has its read abandoned.
import { describe, expect, it } from 'vitest';
import type { TaskEndInput, TaskEndOutput } from '../../../../machines/run-types.js';
import { TaskProbe } from '../../../../src/daemon/task-end/task-probe.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

function setup(opts: { intervalMs?: number; otherPerS?: number; ends?: Map<number, number> } = {}) {
  const clock = new FakeClock();
  const reads: Array<{ at: number; input: TaskEndInput }> = [];
  const ended: Array<{ runId: string; n: number; exitCode: number }> = [];
  const aborted: TaskEndInput[] = [];
  const probe = new TaskProbe({
    clock,
    log: silentLogger(),
    intervalMs: opts.intervalMs ?? 20_000,
    otherPerS: opts.otherPerS ?? 0.9,
    readEnd: (input, signal) =>
      new Promise<TaskEndOutput>((resolve, reject) => {
        reads.push({ at: clock.now(), input });
        signal.addEventListener('abort', () => (aborted.push(input), reject(new Error('aborted'))));
        // A read takes 3 s (request and upload).
        clock.setTimer(() => resolve({ exitCode: opts.ends?.get(input.instanceId) ?? null, at: clock.now() }), 3_000);
      }),
    ended: (runId, n, end) => ended.push({ runId, n, exitCode: end.exitCode }),
  });
  return { clock, probe, reads, ended, aborted };
}

const task = (i: number): TaskEndInput => ({ runId: `run${i}`, n: 1, instanceId: 100 + i });

/** Poll rounds every `everyMs` for `forMs`, each handing the probe `tasks`. */
async function rounds(s: ReturnType<typeof setup>, tasks: () => TaskEndInput[], forMs: number, everyMs = 1_000) {
  for (let t = 0; t < forMs; t += everyMs) {
    s.probe.round(tasks());
    await s.clock.advance(everyMs);
  }
}

describe('task probe', () => {
  it('reads a running task every interval and ends it when its log holds the marker', async () => {
    const s = setup({ ends: new Map() });
    const t = task(1);
    await rounds(s, () => [t], 65_000);
    // First read one spacing after the task was first seen, then every 20 s.
    expect(s.reads.map((r) => r.at - s.reads[0]!.at)).toEqual([0, 20_000, 40_000]);
    expect(s.ended).toEqual([]);
    const ends = new Map([[101, 0]]);
    const s2 = setup({ ends });
    await rounds(s2, () => [t], 25_000);
    expect(s2.ended).toEqual([{ runId: 'run1', n: 1, exitCode: 0 }]);
  });

  it('with many tasks keeps within half the other group: 90 tasks at 0.9/s are each read every 200 s', async () => {
    const s = setup();
    const tasks = Array.from({ length: 90 }, (_, i) => task(i));
    expect(s.probe.spacingMs(90)).toBe(200_000);
    await rounds(s, () => tasks, 1_000_000);
    const perS = s.reads.length / 1_000;
    expect(perS).toBeLessThanOrEqual(0.45 + 1e-9);
    // Every task was read within one spacing of its first round (the bound: spacing + one read),
    // and none twice within its spacing.
    const start = s.clock.now() - 1_000_000;
    for (let i = 0; i < 90; i++) expect(s.reads.find((r) => r.input.runId === `run${i}`)!.at - start).toBeLessThanOrEqual(200_000);
    const byRun = new Map<string, number[]>();
    for (const r of s.reads) byRun.set(r.input.runId, [...(byRun.get(r.input.runId) ?? []), r.at]);
    expect(byRun.size).toBe(90);
    for (const ats of byRun.values()) for (let i = 1; i < ats.length; i++) expect(ats[i]! - ats[i - 1]!).toBeGreaterThanOrEqual(200_000);
  });

  it('abandons the read of a task that left the round (its run ended or moved on)', async () => {
    const s = setup({ intervalMs: 2_000 });
    let tasks = [task(1)];
    // One task at 0.9/s: spaced max(2 s, 1 / 0.45 s) = 2.22 s.
    await rounds(s, () => tasks, 4_000);
    expect(s.reads).toHaveLength(1);
    tasks = [];
    await rounds(s, () => tasks, 1_000);
    expect(s.aborted).toEqual([task(1)]);
  });
});
