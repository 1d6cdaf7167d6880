// Outputs (issue #40): a task that leaves outputs has them taken in `collecting` after its end and
// before its instance's destroy, bounded by its own deadline (files.outputs_timeout_s from the end),
// a limit or a cancel; the task's end still decides how the run ends. Fake time throughout.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  FakeWorld,
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

const OUTPUTS = { task: true, outputs: true, outputsTimeoutS: 600 };

async function running(world: FakeWorld, limits = {}) {
  const run = startRun(world, { limits: { ...OUTPUTS, ...limits } });
  run.actor.send({ type: 'ADMIT' });
  await tick(0);
  const id = currentInstanceId(run.actor);
  await poll(run.actor, status(id, 'loading'));
  await poll(run.actor, status(id, 'running'));
  return { ...run, id };
}

/** The follower (or the probe) read attempt 1's end now. */
async function taskEnds(actor: RunActor, exitCode: number) {
  actor.send({ type: 'TASK_END', n: 1, exitCode, onstart: false, at: Date.now() });
  await tick(0);
}

describe('run machine: outputs', () => {
  it('takes the outputs after the task ends and before the destroy, then ends succeeded', async () => {
    const world = new FakeWorld();
    world.collectMs = 5_000;
    const { actor, emitted, id } = await running(world);
    const endedAt = Date.now();
    await taskEnds(actor, 0);
    expect(stateOf(actor)).toBe('collecting');
    expect(world.destroys).toEqual([]);
    expect(world.collects).toEqual([{ runId: 'r1', n: 1, instanceId: id, until: endedAt + 600_000, stopped: false }]);
    await tick(5_000);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    const types = emitted.map((e) => e.type);
    expect(types.indexOf('task.ended')).toBeLessThan(types.indexOf('outputs.started'));
    expect(types.indexOf('outputs.ended')).toBeLessThan(types.indexOf('destroy.requested'));
    expect(emitted.find((e) => e.type === 'outputs.ended')).toMatchObject({ result: { state: 'kept', files: 1 } });
  });

  it('takes them for a task that exited non-zero too, and the run fails with its exit code', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await running(world);
    await taskEnds(actor, 3);
    expect(world.collects).toHaveLength(1);
    await tick(0);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['task_failed']);
  });

  it('reads the end from the log of a stopped instance, then collects (told the instance is stopped)', async () => {
    const world = new FakeWorld();
    const { actor, id } = await running(world);
    world.taskExits.set(id, 0);
    await poll(actor, status(id, 'stopped', { intended_status: 'stopped' }));
    expect(world.collects).toEqual([expect.objectContaining({ instanceId: id, stopped: true })]);
  });

  it('a task without outputs is destroyed at once (no collect)', async () => {
    const world = new FakeWorld();
    const { actor } = await running(world, { outputs: false });
    await taskEnds(actor, 0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collects).toEqual([]);
  });

  it('stops the transfer at files.outputs_timeout_s and destroys the instance, saying so', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const { actor, emitted, id } = await running(world, { outputsTimeoutS: 60 });
    await taskEnds(actor, 0);
    await tick(59_000);
    expect(stateOf(actor)).toBe('collecting');
    await tick(1_000);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collectsAborted).toBe(1);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    expect(emitted.find((e) => e.type === 'outputs.cut')).toMatchObject({ why: 'files.outputs_timeout_s passed' });
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
  });

  it('a limit reached during the transfer waits for its deadline (said once); the task that ended still decides the run', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const { actor, emitted } = await running(world);
    const endedAt = Date.now();
    await taskEnds(actor, 0);
    await tick(10_000);
    actor.send({ type: 'EXPIRE', reason: { kind: 'budget', message: 'budget_usd reached' } });
    actor.send({ type: 'EXPIRE', reason: { kind: 'budget', message: 'budget_usd reached' } });
    await tick(0);
    expect(stateOf(actor)).toBe('collecting');
    expect(world.collectsAborted).toBe(0);
    expect(emitted.filter((e) => e.type === 'outputs.over_limit')).toEqual([
      expect.objectContaining({ reason: { kind: 'budget', message: 'budget_usd reached' }, until: endedAt + 600_000 }),
    ]);
    // The collection's own deadline, files.outputs_timeout_s from the task's end, is the most it holds the instance.
    await tick(endedAt + 600_000 - Date.now());
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collectsAborted).toBe(1);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
  });

  it('a cancel during the transfer that says not to take them (--no-outputs, a second cancel) destroys at once', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const { actor, emitted } = await running(world);
    await taskEnds(actor, 1);
    actor.send({ type: 'CANCEL', at: Date.now(), now: true });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(emitted.find((e) => e.type === 'outputs.cut')).toMatchObject({ why: 'the run was cancelled without its outputs' });
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
  });

  it('a first cancel during the transfer lets it finish, and the run ends cancelled; a cancel carried from the store changes nothing', async () => {
    const world = new FakeWorld();
    world.collectMs = 5_000;
    const { actor } = await running(world);
    await taskEnds(actor, 1);
    actor.send({ type: 'CANCEL', at: Date.now() });
    actor.send({ type: 'CANCEL' });
    await tick(0);
    expect(stateOf(actor)).toBe('collecting');
    expect(world.collectsAborted).toBe(0);
    await tick(5_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
  });

  it('a collect that fails goes on to the destroy (never holds the instance)', async () => {
    const world = new FakeWorld();
    world.collectAnswer = Object.assign(new Error('SSH to direct 1.2.3.4:22 failed'), { code: 'ssh_unreachable' });
    const { actor, emitted } = await running(world);
    await taskEnds(actor, 0);
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(emitted.find((e) => e.type === 'outputs.cut')).toMatchObject({ why: expect.stringMatching(/SSH to direct/) });
  });

  it('a snapshot restored while collecting collects again, within the same deadline (a daemon killed mid-download)', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const first = await running(world, { outputsTimeoutS: 120 });
    await taskEnds(first.actor, 0);
    await tick(30_000);
    const snapshot = first.actor.getPersistedSnapshot();
    first.actor.stop();

    const again = startRun(world, { limits: { ...OUTPUTS, outputsTimeoutS: 120 }, snapshot });
    await tick(0);
    expect(stateOf(again.actor)).toBe('collecting');
    expect(world.collects).toHaveLength(2);
    // The deadline is the one set at the task's end: 90 s are left, not 120.
    await tick(89_000);
    expect(stateOf(again.actor)).toBe('collecting');
    await tick(1_000);
    expect(stateOf(again.actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([first.id]);
  });
});
