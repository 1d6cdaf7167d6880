// Outputs taken however a task's run ends (issue #48): a cancel, a limit or a price over the cap
// while the task runs stops it and takes its outputs (collecting, with `stopTask`) before the
// destroy, within files.outputs_timeout_s of when that happened; `now` (`--no-outputs`, a second
// cancel) destroys at once. Fake time throughout.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FakeWorld, confirmGone, currentInstanceId, endedAttempts, poll, startRun, stateOf, status, tick } from './harness.js';

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

describe('run machine: outputs at a cancel or a limit', () => {
  it('a cancel while the task runs stops it and takes its outputs, then destroys; the run ends cancelled', async () => {
    const world = new FakeWorld();
    world.collectMs = 5_000;
    const { actor, emitted, id } = await running(world);
    const at = Date.now();
    actor.send({ type: 'CANCEL', at });
    await tick(0);
    expect(stateOf(actor)).toBe('collecting');
    expect(world.destroys).toEqual([]);
    expect(world.collects).toEqual([{ runId: 'r1', n: 1, instanceId: id, until: at + 600_000, stopped: false, stopTask: true }]);
    await tick(5_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
    const types = emitted.map((e) => e.type);
    expect(types.indexOf('outputs.ended')).toBeLessThan(types.indexOf('destroy.requested'));
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['cancelled']);
  });

  it('a cancel with `now` (--no-outputs) destroys at once, no collect', async () => {
    const world = new FakeWorld();
    const { actor } = await running(world);
    actor.send({ type: 'CANCEL', at: Date.now(), now: true });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collects).toEqual([]);
  });

  it('a cancel carried from the store without a time destroys at once (no collection without a deadline)', async () => {
    const world = new FakeWorld();
    const { actor } = await running(world);
    actor.send({ type: 'CANCEL' });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collects).toEqual([]);
  });

  it('a second cancel while collecting after the first destroys at once', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const { actor } = await running(world);
    actor.send({ type: 'CANCEL', at: Date.now() });
    await tick(1_000);
    expect(stateOf(actor)).toBe('collecting');
    actor.send({ type: 'CANCEL', at: Date.now(), now: true });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collectsAborted).toBe(1);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('cancelled');
  });

  it('a cancelled collection is bounded by files.outputs_timeout_s from the cancel', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const { actor, emitted } = await running(world, { outputsTimeoutS: 60 });
    actor.send({ type: 'CANCEL', at: Date.now() });
    await tick(59_000);
    expect(stateOf(actor)).toBe('collecting');
    await tick(1_000);
    expect(stateOf(actor)).toBe('destroying');
    expect(emitted.find((e) => e.type === 'outputs.cut')).toMatchObject({ why: 'files.outputs_timeout_s passed' });
  });

  it('a limit while the task runs: its log is read first, and without an end the task is stopped and its outputs taken; the run ends expired', async () => {
    const world = new FakeWorld();
    world.collectMs = 5_000;
    const { actor, id } = await running(world);
    actor.send({ type: 'EXPIRE', reason: { kind: 'max_runtime', message: 'max_runtime_s (60 s) reached' } });
    await tick(0);
    expect(world.taskReads).toHaveLength(1);
    expect(stateOf(actor)).toBe('collecting');
    expect(world.collects).toEqual([expect.objectContaining({ instanceId: id, stopTask: true })]);
    await tick(5_000);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('expired');
    expect(actor.getSnapshot().context.error).toMatchObject({ kind: 'max_runtime' });
  });

  it('a limit whose log read shows the task ended takes the outputs without a stop, and the end decides the run', async () => {
    const world = new FakeWorld();
    const { actor, id } = await running(world);
    world.taskExits.set(id, 0);
    actor.send({ type: 'EXPIRE', reason: { kind: 'budget', message: 'budget_usd reached' } });
    await tick(0);
    expect(world.collects).toEqual([expect.not.objectContaining({ stopTask: true })]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
  });

  it('a limit on a task without outputs destroys as before', async () => {
    const world = new FakeWorld();
    const { actor } = await running(world, { outputs: false });
    actor.send({ type: 'EXPIRE', reason: { kind: 'budget', message: 'budget_usd reached' } });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.collects).toEqual([]);
  });

  it('a host price over the cap stops the task and takes its outputs before the fail-over', async () => {
    const world = new FakeWorld();
    world.collectMs = 5_000;
    const { actor, emitted, id } = await running(world);
    await poll(actor, status(id, 'running', { dph_total: 5 }));
    expect(stateOf(actor)).toBe('collecting');
    expect(world.collects).toEqual([expect.objectContaining({ instanceId: id, stopTask: true })]);
    await tick(5_000);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['price_over_cap']);
    expect(actor.getSnapshot().context.current?.n).toBe(2);
  });

  it('a snapshot restored while collecting after a cancel stops the task again and collects within the same deadline', async () => {
    const world = new FakeWorld();
    world.collectMs = 3_600_000;
    const first = await running(world, { outputsTimeoutS: 120 });
    first.actor.send({ type: 'CANCEL', at: Date.now() });
    await tick(30_000);
    const snapshot = first.actor.getPersistedSnapshot();
    first.actor.stop();
    const again = startRun(world, { limits: { ...OUTPUTS, outputsTimeoutS: 120 }, snapshot });
    // The driver carries the stored cancel again, as the first it hears: the collection goes on.
    again.actor.send({ type: 'CANCEL', at: Date.now() });
    await tick(0);
    expect(stateOf(again.actor)).toBe('collecting');
    expect(world.collects).toHaveLength(2);
    expect(world.collects[1]).toMatchObject({ stopTask: true });
    await tick(90_000);
    expect(stateOf(again.actor)).toBe('destroying');
    await confirmGone(again.actor);
    expect(stateOf(again.actor)).toBe('cancelled');
  });
});
