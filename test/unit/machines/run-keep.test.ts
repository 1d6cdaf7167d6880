// keep_on_failure_s (issue #50): a task that fails for good (no restart left) keeps its instance in
// `keeping` for SSH until its bound, after its outputs are taken; a cancel, a limit or the instance's
// loss meanwhile destroys it at once; the run still ends failed task_failed with the exit code.
// A failure that is restarted is never kept. Fake time throughout.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  FakeWorld,
  LIMITS,
  confirmGone,
  currentInstanceId,
  endedAttempts,
  poll,
  startRun,
  stateOf,
  status,
  tick,
  type RunActor,
} from './harness.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const KEEP = { task: true, keepOnFailureS: 60 };

async function toRunning(actor: RunActor): Promise<number> {
  const id = currentInstanceId(actor);
  await poll(actor, status(id, 'loading'));
  await poll(actor, status(id, 'running'));
  expect(stateOf(actor)).toBe('running');
  return id;
}

async function running(world: FakeWorld, limits = {}) {
  const run = startRun(world, { limits: { ...KEEP, ...limits } });
  run.actor.send({ type: 'ADMIT' });
  await tick(0);
  return { ...run, id: await toRunning(run.actor) };
}

/** The follower (or the probe) read attempt n's end now. */
async function taskEnds(actor: RunActor, exitCode: number, n = 1) {
  actor.send({ type: 'TASK_END', n, exitCode, onstart: false, at: Date.now() });
  await tick(0);
}

const failedWith = (actor: RunActor, exitCode: number) => {
  expect(stateOf(actor)).toBe('failed');
  expect(actor.getSnapshot().context.error).toMatchObject({ kind: 'task_failed', exit_code: exitCode });
};

describe('run machine: keep_on_failure_s', () => {
  it('keeps a failed task instance until the bound, then destroys it and fails with the exit code', async () => {
    const world = new FakeWorld();
    const { actor, emitted, id } = await running(world);
    const endedAt = Date.now();
    await taskEnds(actor, 3);
    expect(stateOf(actor)).toBe('keeping');
    expect(emitted.find((e) => e.type === 'task.kept')).toEqual({ type: 'task.kept', n: 1, instanceId: id, until: endedAt + 60_000 });
    expect(actor.getSnapshot().context.current!.keepUntil).toBe(endedAt + 60_000);
    // Lists of it running go on while it is kept: nothing is judged.
    await poll(actor, status(id, 'running'));
    await tick(58_000);
    expect(stateOf(actor)).toBe('keeping');
    expect(world.destroys).toEqual([]);
    await tick(2_000);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    failedWith(actor, 3);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['task_failed']);
    expect(emitted.some((e) => e.type === 'task.keep_ended')).toBe(false);
  });

  it('keeps an instance whose onstart failed too, read from its log', async () => {
    const world = new FakeWorld();
    const { actor } = await running(world);
    actor.send({ type: 'TASK_END', n: 1, exitCode: 0, onstart: true, at: Date.now() });
    await tick(0);
    expect(stateOf(actor)).toBe('keeping');
  });

  it('never keeps a success, nor a failure without keep_on_failure_s', async () => {
    for (const [limits, code] of [
      [{}, 0],
      [{ keepOnFailureS: 0 }, 3],
    ] as const) {
      const world = new FakeWorld();
      const { actor } = await running(world, limits);
      await taskEnds(actor, code);
      expect(stateOf(actor)).toBe('destroying');
    }
  });

  it('a cancel during the keep destroys at once; the run still ends failed with the exit code', async () => {
    const world = new FakeWorld();
    const { actor, emitted, id } = await running(world);
    await taskEnds(actor, 2);
    await tick(10_000);
    actor.send({ type: 'CANCEL' });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    expect(emitted.find((e) => e.type === 'task.keep_ended')).toMatchObject({ why: 'the run was cancelled' });
    await confirmGone(actor);
    failedWith(actor, 2);
  });

  it('a limit reached during the keep destroys at once; the run ends failed with the exit code', async () => {
    const world = new FakeWorld();
    const { actor, emitted, id } = await running(world);
    await taskEnds(actor, 2);
    await tick(5_000);
    actor.send({ type: 'EXPIRE', reason: { kind: 'budget', message: 'budget_usd reached' } });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    expect(emitted.find((e) => e.type === 'task.keep_ended')).toMatchObject({
      why: expect.stringMatching(/limit was reached: budget_usd/),
    });
    await confirmGone(actor);
    failedWith(actor, 2);
  });

  it('a kept instance no longer listed (its container destroyed itself) ends the keep', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await running(world);
    await taskEnds(actor, 1);
    for (let i = 0; i < LIMITS.missingPollsToLose; i++) await poll(actor, null);
    expect(stateOf(actor)).not.toBe('keeping');
    expect(emitted.find((e) => e.type === 'task.keep_ended')).toMatchObject({ why: 'the instance is no longer listed' });
    await confirmGone(actor);
    failedWith(actor, 1);
  });

  it('a failure that is restarted is not kept: only the last one is', async () => {
    const world = new FakeWorld();
    const { actor, id: first } = await running(world, { maxRestarts: 1 });
    await taskEnds(actor, 3);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    const second = await toRunning(actor);
    expect(second).not.toBe(first);
    await taskEnds(actor, 3, 2);
    expect(stateOf(actor)).toBe('keeping');
    await tick(60_000);
    await confirmGone(actor);
    failedWith(actor, 3);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([first, second]);
  });

  it('takes the outputs first, then keeps', async () => {
    const world = new FakeWorld();
    world.collectMs = 5_000;
    const { actor, emitted } = await running(world, { outputs: true, outputsTimeoutS: 600 });
    const endedAt = Date.now();
    await taskEnds(actor, 4);
    expect(stateOf(actor)).toBe('collecting');
    await tick(5_000);
    await tick(10);
    expect(stateOf(actor)).toBe('keeping');
    const types = emitted.map((e) => e.type);
    expect(types.indexOf('outputs.ended')).toBeLessThan(types.indexOf('task.kept'));
    // The keep's 60 s count from when the outputs were taken, not from the task's end.
    const kept = emitted.find((e) => e.type === 'task.kept') as { until: number };
    expect(kept.until).toBeGreaterThanOrEqual(endedAt + 5_000 + 60_000);
    expect(kept.until).toBeLessThanOrEqual(Date.now() + 60_000);
  });

  it('a restored snapshot resumes the same bound', async () => {
    const world = new FakeWorld();
    const { actor, id } = await running(world);
    await taskEnds(actor, 3);
    const until = actor.getSnapshot().context.current!.keepUntil!;
    await tick(20_000);
    const stored = actor.getPersistedSnapshot();
    actor.stop();
    const restored = startRun(world, { limits: KEEP, snapshot: stored }).actor;
    await tick(0);
    expect(stateOf(restored)).toBe('keeping');
    expect(restored.getSnapshot().context.current!.keepUntil).toBe(until);
    await tick(until - Date.now() - 1);
    expect(world.destroys).toEqual([]);
    await tick(1);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
  });
});

describe('run machine: a destroy that hands the instance to a warm hold (issue #51)', () => {
  it('settles the run at once with the task outcome, reporting the hold, and waits for no list', async () => {
    const world = new FakeWorld();
    world.handOver = () => ({ holdId: 7, idleUntil: Date.now() + 600_000 });
    const run = startRun(world, { limits: { task: true } });
    run.actor.send({ type: 'ADMIT' });
    await tick(0);
    const id = await toRunning(run.actor);
    await taskEnds(run.actor, 0);
    expect(stateOf(run.actor)).toBe('succeeded');
    expect(world.destroys.map((d) => [d.instanceId, d.outcome])).toEqual([[id, 'succeeded']]);
    expect(run.emitted.find((e) => e.type === 'instance.warm')).toMatchObject({ n: 1, instanceId: id, holdId: 7 });
    expect(run.emitted.some((e) => e.type === 'destroy.confirmed')).toBe(false);
    expect(endedAttempts(run.emitted).map((a) => a.outcome)).toEqual(['succeeded']);
  });

  it('a failed task handed over still fails with its exit code; a pool that keeps nothing destroys as ever', async () => {
    const world = new FakeWorld();
    world.handOver = (input) => (input.outcome === 'task_failed' ? { holdId: 8, idleUntil: Date.now() + 60_000 } : undefined);
    const failed = await running(world, { keepOnFailureS: 0 });
    await taskEnds(failed.actor, 2);
    failedWith(failed.actor, 2);
    const other = new FakeWorld();
    const plain = await running(other, { keepOnFailureS: 0 });
    await taskEnds(plain.actor, 0);
    expect(stateOf(plain.actor)).toBe('destroying');
  });
});
