// The task probe (issues #29, #37) on a fake clock: its own loop reads each running task's log, the
// most overdue first, one read started per gap (half this daemon's `other` rate), each task due
// again an interval after its read ended; an end marker found ends the task, within the bound the
// probe states, however slow the reads; a task that leaves the runs has its read abandoned.
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskEndInput, TaskEndOutput } from '../../../../machines/run-types.js';
import { probeBoundMs, TaskProbe } from '../../../../src/daemon/task-end/task-probe.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

let probe: TaskProbe | undefined;
afterEach(() => {
  probe?.stop();
  probe = undefined;
});

interface Setup {
  intervalMs?: number;
  otherPerS?: () => number;
  /** How long a read of this task takes, ms (3 s by default). */
  readMs?: (t: TaskEndInput) => number;
  /** When this task's end marker is in its log (the clock's now); never by default. */
  endsAt?: (t: TaskEndInput) => number;
  /** Whether the task is followed over SSH now. */
  followed?: (t: TaskEndInput) => boolean;
}

function setup(tasks: () => TaskEndInput[], opts: Setup = {}) {
  const clock = new FakeClock(0);
  const reads: Array<{ at: number; input: TaskEndInput }> = [];
  const ended: Array<{ runId: string; n: number; exitCode: number; at: number }> = [];
  const aborted: TaskEndInput[] = [];
  probe = new TaskProbe({
    clock,
    log: silentLogger(),
    tasks,
    intervalMs: opts.intervalMs ?? 20_000,
    otherPerS: opts.otherPerS ?? (() => 0.9),
    readEnd: (input, signal) =>
      new Promise<TaskEndOutput>((resolve, reject) => {
        const at = clock.now();
        reads.push({ at, input });
        signal.addEventListener('abort', () => (aborted.push(input), reject(new Error('aborted'))));
        // The log is as it was when the read asked for it; the answer comes once the read is done.
        const ended = (opts.endsAt?.(input) ?? Number.POSITIVE_INFINITY) <= at;
        clock.setTimer(() => resolve({ exitCode: ended ? 0 : null, at: clock.now() }), opts.readMs?.(input) ?? 3_000);
      }),
    ended: (runId, n, end) => ended.push({ runId, n, exitCode: end.exitCode, at: clock.now() }),
    ...(opts.followed ? { followed: opts.followed } : {}),
  });
  probe.start();
  return { clock, probe, reads, ended, aborted };
}

const task = (i: number): TaskEndInput => ({ runId: `run${i}`, n: 1, instanceId: 100 + i });

describe('task probe', () => {
  it('makes no log read for a task followed over SSH, abandons one in flight, and reads it at once when the follow fails', async () => {
    const t = task(1);
    let followed = false;
    // Reads of 30 s: the first is still in flight at the next tick (an interval later).
    const s = setup(() => [t], { followed: () => followed, readMs: () => 30_000 });
    await s.clock.advance(1_000);
    expect(s.reads.map((r) => r.at)).toEqual([0]);
    followed = true;
    await s.clock.advance(60_000);
    // The read in flight when the follow began is abandoned, and none is made while it lasts.
    expect(s.aborted).toEqual([t]);
    expect(s.reads.map((r) => r.at)).toEqual([0]);
    followed = false;
    const failedAt = s.clock.now();
    await s.clock.advance(20_000);
    // Due at once, as a task new to the probe: read at its next tick.
    expect(s.reads.map((r) => r.at - failedAt)).toEqual([-61_000, 19_000]);
  });

  it('reads a running task at once, then an interval after each read ended, and ends it when its log holds the marker', async () => {
    const t = task(1);
    const s = setup(() => [t]);
    await s.clock.advance(65_000);
    // Reads of 3 s: 0, 3 + 20, 26 + 20.
    expect(s.reads.map((r) => r.at)).toEqual([0, 23_000, 46_000]);
    expect(s.ended).toEqual([]);
    probe!.stop();
    const s2 = setup(() => [t], { endsAt: () => 10_000 });
    await s2.clock.advance(30_000);
    expect(s2.ended).toEqual([{ runId: 'run1', n: 1, exitCode: 0, at: 26_000 }]);
  });

  it('keeps within half the other group: 90 tasks at 0.9/s are read at most 0.45 times a second, each within its bound', async () => {
    const tasks = Array.from({ length: 90 }, (_, i) => task(i));
    const s = setup(() => tasks);
    await s.clock.advance(1_000_000);
    // The first read at 0, then one a gap of 1 / 0.45 s.
    expect((s.reads.length - 1) / 1_000).toBeLessThanOrEqual(0.45 + 1e-9);
    const byRun = new Map<string, number[]>();
    for (const r of s.reads) byRun.set(r.input.runId, [...(byRun.get(r.input.runId) ?? []), r.at]);
    expect(byRun.size).toBe(90);
    // Between two reads of one task: at most the bound less one read (its own).
    const bound = probeBoundMs({ tasks: 90, intervalMs: 20_000, otherPerS: 0.9, readMs: 3_000 });
    for (const ats of byRun.values()) for (let i = 1; i < ats.length; i++) expect(ats[i]! - ats[i - 1]!).toBeLessThanOrEqual(bound - 3_000);
  });

  it("takes half of this daemon's share, not of the key's: at a share of 1/2 it starts at most 0.225 reads a second, and follows a share that changes", async () => {
    const tasks = Array.from({ length: 20 }, (_, i) => task(i));
    let perS = 0.45;
    const s = setup(() => tasks, { otherPerS: () => perS, intervalMs: 1_000 });
    await s.clock.advance(400_000);
    expect(s.reads.length).toBeLessThanOrEqual(400 * 0.225 + 1);
    expect(s.reads.length).toBeGreaterThanOrEqual(400 * 0.225 - 1);
    // The other daemon leaves: the whole rate is this one's again.
    perS = 0.9;
    const before = s.reads.length;
    await s.clock.advance(400_000);
    // (the tick armed before the change still waits the old gap)
    expect(s.reads.length - before).toBeGreaterThanOrEqual(400 * 0.45 - 2);
    expect(s.reads.length - before).toBeLessThanOrEqual(400 * 0.45 + 1);
  });

  it('one-page account, interval shorter than the list limit, reads slower than the spacing: the two late tasks of ten, at the tail, end within the stated bound', async () => {
    // Ten tasks; every read takes 12 s (slow uploads), five times the gap of 2.2 s; the interval is
    // two poll intervals of 0.2 s. The eight at the head keep running; the two at the tail end late.
    const tasks = Array.from({ length: 10 }, (_, i) => task(i));
    const endAt = 60_000;
    // A task whose end was seen leaves the runs, as its run ends.
    const s = setup(() => tasks.filter((t) => !s.ended.some((e) => e.runId === t.runId)), {
      intervalMs: 400,
      readMs: () => 12_000,
      endsAt: (t) => (t.instanceId >= 108 ? endAt : Number.POSITIVE_INFINITY),
    });
    const bound = probeBoundMs({ tasks: 10, intervalMs: 400, otherPerS: 0.9, readMs: 12_000 });
    expect(bound).toBeCloseTo(400 + 11 * 2222.22 + 24_000, 0);
    await s.clock.advance(endAt + bound);
    expect(s.ended.map((e) => e.runId).sort()).toEqual(['run8', 'run9']);
    for (const e of s.ended) expect(e.at - endAt).toBeLessThanOrEqual(bound);
    // And fair: every task of the ten was read, none more than twice as often as another.
    const counts = tasks.map((t) => s.reads.filter((r) => r.input.runId === t.runId).length);
    expect(Math.min(...counts)).toBeGreaterThanOrEqual(Math.floor(Math.max(...counts) / 2));
  });

  it('abandons the read of a task that left the runs (its run ended or moved on)', async () => {
    let tasks = [task(1)];
    const s = setup(() => tasks, { intervalMs: 2_000 });
    await s.clock.advance(1_000);
    expect(s.reads).toHaveLength(1);
    tasks = [];
    // The next tick (one gap, 2.2 s, after the first) learns it left.
    await s.clock.advance(2_000);
    expect(s.aborted).toEqual([task(1)]);
  });

  it('stops: no read is started after stop, and the one in flight is abandoned', async () => {
    const s = setup(() => [task(1), task(2)]);
    await s.clock.advance(1_000);
    expect(s.reads).toHaveLength(1);
    s.probe.stop();
    await s.clock.advance(60_000);
    expect(s.reads).toHaveLength(1);
    expect(s.aborted).toEqual([task(1)]);
  });
});
