// The service's other statuses (issue #49): what berth makes of each `actual_status` besides
// running and the failures. While booting, any of them is "still starting" until the boot deadline;
// a stop berth did not ask for is a loss only once it lasts (STOPPED_BLIP_MS); after the instance
// ran, a status that is neither running nor failed is waited on for a boot's length, then lost.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { STOPPED_BLIP_MS } from '../../../machines/run-rules.js';
import { FakeWorld, LIMITS, confirmGone, currentInstanceId, endedAttempts, poll, startRun, stateOf, status, tick } from './harness.js';

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

async function admitted(world: FakeWorld, limits = {}) {
  const run = startRun(world, { limits });
  run.actor.send({ type: 'ADMIT' });
  await tick(0);
  return run;
}

const STILL_STARTING = [null, 'loading', 'created', 'frozen', 'restarting', 'rebooting', 'recycling', 'migrating_to_mars'];

describe('run machine: statuses other than running and the failures', () => {
  it.each(STILL_STARTING)('reads %s while booting as still starting: the instance reaches running, nothing destroyed', async (actual) => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, actual));
    // Lists of the same status keep coming (the driver passes them on for what lasts).
    for (let i = 0; i < 5; i++) {
      await tick(10_000);
      await poll(actor, status(id, actual));
    }
    expect(stateOf(actor)).toBe('booting');
    await poll(actor, status(id, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(currentInstanceId(actor)).toBe(id);
    expect(world.destroys).toEqual([]);
    expect(endedAttempts(emitted)).toEqual([]);
  });

  it.each(STILL_STARTING)('reads %s that lasts while booting as a boot timeout at the deadline', async (actual) => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, actual));
    await tick(LIMITS.bootTimeoutS * 1000 - 5_000);
    expect(world.destroys).toEqual([]);
    await tick(10_000);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['boot_timeout']);
  });

  it.each(['exited', 'unknown', 'offline'])('still ends the attempt at once on %s while booting (SPEC 3 rule 1)', async (actual) => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    await poll(actor, status(id, actual));
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual([actual]);
  });

  it('an early stopped blip while booting is not a loss: the run reaches running on the same instance', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, null));
    await poll(actor, status(id, 'stopped'));
    await tick(STOPPED_BLIP_MS / 2);
    await poll(actor, status(id, 'stopped'));
    expect(stateOf(actor)).toBe('booting');
    await poll(actor, status(id, 'loading'));
    await poll(actor, status(id, 'running'));
    expect(stateOf(actor)).toBe('running');
    expect(currentInstanceId(actor)).toBe(id);
    expect(world.destroys).toEqual([]);
    expect(endedAttempts(emitted)).toEqual([]);
  });

  it('a stop that lasts STOPPED_BLIP_MS while booting is a loss, destroyed before the boot deadline', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'stopped'));
    await tick(STOPPED_BLIP_MS - 1_000);
    await poll(actor, status(id, 'stopped'));
    expect(world.destroys).toEqual([]);
    await tick(1_000);
    await poll(actor, status(id, 'stopped'));
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['lost']);
    expect(stateOf(actor)).toBe('booting');
  });

  it('a stop the list never shows again is still destroyed at the boot deadline', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'stopped'));
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['boot_timeout']);
  });

  it('a stop someone made (intended_status stopped) while booting a run without a task is a loss at once', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    await poll(actor, status(id, 'stopped', { intended_status: 'stopped' }));
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['lost']);
  });

  it('after it ran, an unasked stop is still a loss at once', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'running'));
    await poll(actor, status(id, 'stopped'));
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
  });

  it.each(['frozen', 'restarting', 'rebooting', 'recycling', 'loading', null, 'migrating_to_mars'])(
    'after it ran, %s is waited on for a boot length: back to running, nothing destroyed',
    async (actual) => {
      const world = new FakeWorld();
      const { actor, emitted } = await admitted(world);
      const id = currentInstanceId(actor);
      await poll(actor, status(id, 'running'));
      await poll(actor, status(id, actual));
      await tick(LIMITS.bootTimeoutS * 1000 - 5_000);
      await poll(actor, status(id, actual));
      expect(stateOf(actor)).toBe('running');
      await poll(actor, status(id, 'running'));
      await tick(LIMITS.bootTimeoutS * 1000);
      await poll(actor, status(id, 'running'));
      expect(stateOf(actor)).toBe('running');
      expect(world.destroys).toEqual([]);
      expect(endedAttempts(emitted)).toEqual([]);
    },
  );

  it.each(['frozen', 'restarting', 'migrating_to_mars'])(
    'after it ran, %s that lasts a boot length is lost and the run fails over',
    async (actual) => {
      const world = new FakeWorld();
      const { actor, emitted } = await admitted(world);
      const id = currentInstanceId(actor);
      await poll(actor, status(id, 'running'));
      await poll(actor, status(id, actual));
      await tick(LIMITS.bootTimeoutS * 1000);
      await poll(actor, status(id, actual));
      expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
      await confirmGone(actor);
      const [ended] = endedAttempts(emitted);
      expect(ended).toMatchObject({ outcome: 'lost' });
      expect(ended!.detail).toMatch(/for 60 s after it ran/);
      expect(stateOf(actor)).toBe('booting');
      expect(currentInstanceId(actor)).not.toBe(id);
    },
  );

  it("a task's blip while booting has its log read once, and the task's own stop later is read again (its end, not a loss)", async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { task: true });
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'stopped'));
    expect(world.taskReads).toHaveLength(1);
    await tick(0);
    expect(stateOf(actor)).toBe('booting');
    expect(world.destroys).toEqual([]);
    await poll(actor, status(id, 'loading'));
    await poll(actor, status(id, 'running'));
    expect(stateOf(actor)).toBe('running');
    world.taskExits.set(id, 0);
    await poll(actor, status(id, 'stopped', { intended_status: 'stopped' }));
    expect(world.taskReads).toHaveLength(2);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
    expect(world.serviceCreates).toHaveLength(1);
  });

  it('a create that lost its offer (docker cannot bind its ports) fails over at once, not at the boot deadline', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    const msg =
      'Error response from daemon: driver failed programming external connectivity on endpoint C.1: Bind for 0.0.0.0:22 failed: port is already allocated';
    await poll(actor, status(id, 'created', { status_msg: msg }));
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    const [ended] = endedAttempts(emitted);
    expect(ended).toMatchObject({ outcome: 'exited' });
    expect(ended!.detail).toMatch(/another container holds its ports/);
    expect(stateOf(actor)).toBe('booting');
    expect(currentInstanceId(actor)).not.toBe(id);
  });

  it('an on-demand create the service made stopped (success: false naming it) is recorded and destroyed at once; the next offer boots', async () => {
    const world = new FakeWorld();
    world.createResults.set(1, {
      kind: 'created',
      instanceId: 555,
      createdAt: Date.now(),
      createdStopped: 'instance 555 was created but the service answered success: false',
    });
    const { actor, emitted } = await admitted(world);
    await tick(0);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([555]);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted)).toMatchObject([{ outcome: 'create_failed', detail: expect.stringMatching(/success: false/) }]);
    expect(stateOf(actor)).toBe('booting');
    expect(currentInstanceId(actor)).not.toBe(555);
  });

  it("a task's blip whose log read outlasts it: the instance runs meanwhile, and the task's own stop later is still read", async () => {
    const world = new FakeWorld();
    world.taskReadMs = 5_000;
    const { actor, emitted } = await admitted(world, { task: true });
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'stopped'));
    expect(world.taskReads).toHaveLength(1);
    // While the log is read, the blip is over.
    await poll(actor, status(id, 'loading'));
    await poll(actor, status(id, 'running'));
    await tick(5_000);
    expect(stateOf(actor)).toBe('running');
    world.taskExits.set(id, 0);
    await poll(actor, status(id, 'stopped', { intended_status: 'stopped' }));
    expect(world.taskReads).toHaveLength(2);
    await tick(5_000);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
    expect(world.serviceCreates).toHaveLength(1);
  });
});
