// Tasks (issue #19): a run with `run` ends when its task does, decided on the end marker in the
// container's log and never on a status alone; max_restarts starts a failed task again on a fresh
// instance; a stop without a marker is an outbid or a loss, and the run recovers on another offer.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { migrateRunSnapshot } from '../../../machines/run-migrations.js';
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

const TASK = { task: true };

async function admitted(world: FakeWorld, limits = {}) {
  const run = startRun(world, { limits: { ...TASK, ...limits } });
  run.actor.send({ type: 'ADMIT' });
  await tick(0);
  return run;
}

async function bootToRunning(actor: RunActor) {
  const id = currentInstanceId(actor);
  await poll(actor, status(id, 'loading'));
  await poll(actor, status(id, 'running'));
  return id;
}

/** What a list shows once the wrapper stopped its own instance. */
const selfStopped = (id: number) => status(id, 'stopped', { intended_status: 'stopped' });

describe('run machine: tasks', () => {
  it('ends succeeded when the log says exit 0, destroying the instance first', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = await bootToRunning(actor);
    world.taskExits.set(id, 0);
    await poll(actor, selfStopped(id));
    // Stopped by its task: the read is told so (it may go on for minutes, the disk only billing).
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id, stoppedByTask: true }]);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(actor.getSnapshot().context.error).toBeNull();
    expect(emitted.filter((e) => e.type === 'task.ended')).toEqual([{ type: 'task.ended', n: 1, instanceId: id, exitCode: 0 }]);
    expect(emitted.at(-1)).toEqual({ type: 'run.succeeded' });
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
  });

  it('fails with task_failed and the exit code once max_restarts is spent, each try on a fresh instance', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { maxRestarts: 1 });
    const first = await bootToRunning(actor);
    world.taskExits.set(first, 3);
    await poll(actor, selfStopped(first));
    await confirmGone(actor);
    // A fresh instance, found by a new search; the failed task spent no attempt and blocked nothing.
    expect(stateOf(actor)).toBe('booting');
    const second = currentInstanceId(actor);
    expect(second).not.toBe(first);
    expect(actor.getSnapshot().context).toMatchObject({ taskRestarts: 1, spentAttempts: 0, blockedMachines: [] });
    await bootToRunning(actor);
    world.taskExits.set(second, 3);
    await poll(actor, selfStopped(second));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['task_failed', 'task_failed']);
    expect(world.destroys.map((d) => d.instanceId)).toEqual([first, second]);
  });

  it('a task that stopped its own instance but whose log could not be read ends failed with its exit code unknown, never run again (issue #37)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = await bootToRunning(actor);
    world.taskUnread.add(id);
    await poll(actor, selfStopped(id));
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id, stoppedByTask: true }]);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error).toMatchObject({
      kind: 'exit_unknown',
      message: expect.stringMatching(/exit code is unknown; it is not run again/),
    });
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['exit_unknown']);
    expect(world.serviceCreates).toHaveLength(1);
  });

  it('a stop the task did not make (intended_status running) whose log could not be read is still judged a loss', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const first = await bootToRunning(actor);
    world.taskUnread.add(first);
    await poll(actor, status(first, 'stopped', { intended_status: 'running' }));
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: first }]);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['lost']);
    expect(stateOf(actor)).toBe('booting');
  });

  it('treats a stop without an end marker as a loss and recovers on another offer', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const first = await bootToRunning(actor);
    // Stopped, but not by the task: its log holds no marker.
    await poll(actor, status(first, 'stopped'));
    expect(world.taskReads).toHaveLength(1);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['lost']);
    expect(stateOf(actor)).toBe('booting');
    const second = await bootToRunning(actor);
    world.taskExits.set(second, 0);
    await poll(actor, selfStopped(second));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
  });

  it('never reads a log for a run without a task', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world, { task: false });
    const id = await bootToRunning(actor);
    world.taskExits.set(id, 0);
    await poll(actor, selfStopped(id));
    expect(world.taskReads).toHaveLength(0);
    expect(stateOf(actor)).toBe('destroying');
  });

  it('reads the end of a task that finished before any list showed it running', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    world.taskExits.set(id, 0);
    await poll(actor, selfStopped(id));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
  });

  it('the boot deadline passing while the end of a task stopped before it ran is read waits for the read: the task ran once and succeeded (issue #49)', async () => {
    const world = new FakeWorld();
    // The upload of its log takes longer than what is left of the boot deadline.
    world.taskReadMs = LIMITS.bootTimeoutS * 1000 + 5_000;
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    world.taskExits.set(id, 0);
    await poll(actor, selfStopped(id));
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    // Past the deadline, still reading: nothing judged, no destroy.
    expect(actor.getSnapshot().value).toEqual({ booting: 'checkingTask' });
    expect(world.destroys).toHaveLength(0);
    await tick(5_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
    expect(world.serviceCreates).toHaveLength(1);
  });

  it('a task stopped before it ran whose read ends past the boot deadline without a marker is judged by the deadline then, with a last look', async () => {
    const world = new FakeWorld();
    world.taskReadMs = LIMITS.bootTimeoutS * 1000 + 5_000;
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'exited', { intended_status: 'running' }));
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    expect(actor.getSnapshot().value).toEqual({ booting: 'checkingTask' });
    expect(world.destroys).toHaveLength(0);
    await tick(5_000);
    // The read found no marker: the stop is judged as a boot failure, as without a task, and the
    // deadline's wait, begun again, looked once more as of then.
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toHaveLength(1);
    expect(endedAttempts(emitted)[0]!.outcome).not.toBe('succeeded');
    expect(world.looks.length).toBeGreaterThanOrEqual(1);
  });

  it('a task whose instance no list showed stopped before the boot deadline, its last look showing it stopped by the task, has its end read first: succeeded (issue #49, the task fuzzer)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    world.taskExits.set(id, 0);
    world.lookAnswer = { instance: selfStopped(id), reachable: null };
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id, stoppedByTask: true }]);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
  });

  it('the same last look with no end marker in the log: judged boot_timeout once the log was read', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    world.lookAnswer = { instance: status(id, 'exited', { intended_status: 'running' }), reachable: null };
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    expect(world.taskReads).toHaveLength(1);
    await tick(1_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted)).toHaveLength(1);
    expect(endedAttempts(emitted)[0]!.outcome).not.toBe('succeeded');
  });

  it('a task whose boot deadline came with no list answering (a loaded machine) has its end read, bounded, before boot_timeout: the task that ended succeeded (issue #49, the task fuzzer)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    world.taskExits.set(id, 0);
    world.lookAnswer = null;
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    // Not listed stopped: its GPU may bill while the log is read, so the read is bounded.
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id, withinMs: 30_000 }]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
  });

  it('the same with no end in the log: boot_timeout once read, and the next attempt boots', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    await poll(actor, status(id, 'loading'));
    world.lookAnswer = null;
    await tick(LIMITS.bootTimeoutS * 1000 + 1_000);
    expect(world.taskReads).toHaveLength(1);
    await tick(1_000);
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['boot_timeout']);
    expect(stateOf(actor)).toBe('booting');
  });

  it('an instance that exits while booting, with no end marker in its log, fails over as exited and the run is never running', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = currentInstanceId(actor);
    const states: string[] = [];
    actor.subscribe((s) => states.push(typeof s.value === 'string' ? s.value : Object.keys(s.value)[0]!));
    await poll(actor, status(id, 'loading'));
    await poll(actor, status(id, 'exited', { intended_status: 'running' }));
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id }]);
    expect(stateOf(actor)).toBe('destroying');
    expect(states).not.toContain('running');
    expect(emitted.some((e) => e.type === 'attempt.running')).toBe(false);
    await confirmGone(actor);
    // A boot failure: the machine is blocked and the attempt spent, as for a run without a task.
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['exited']);
    expect(actor.getSnapshot().context.blockedMachines).toHaveLength(1);
    expect(stateOf(actor)).toBe('booting');
  });

  it('resumes a version 4 snapshot stored running as watching its instance', async () => {
    const world = new FakeWorld();
    const { actor } = startRun(world, { limits: { ...TASK } });
    actor.send({ type: 'ADMIT' });
    await tick(0);
    const id = await bootToRunning(actor);
    const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as { value: unknown; context: Record<string, unknown> };
    actor.stop();
    // As version 4 stored it: `running` a leaf, no task fields.
    const { taskRestarts: _r, taskExit: _e, ...v4context } = stored.context;
    const current = { ...(v4context['current'] as Record<string, unknown>) };
    delete current['taskChecked'];
    const v4 = { ...stored, value: 'running', context: { ...v4context, current } };
    const migrated = migrateRunSnapshot(v4, 4, 5, { ...LIMITS, ...TASK });
    expect(migrated?.['value']).toEqual({ running: 'watching' });
    const again = startRun(world, { limits: TASK, snapshot: migrated as never });
    world.taskExits.set(id, 0);
    await poll(again.actor, selfStopped(id));
    await confirmGone(again.actor);
    expect(stateOf(again.actor)).toBe('succeeded');
  });
});

// Issue #29: the end of a task that happened wins over a limit reached later, a loss counts from
// when berth learned of it, and the task probe ends a task whose instance could not stop itself.
describe('run machine: tasks that end late, limits and losses (issue #29)', () => {
  const EXPIRED = { kind: 'max_runtime' as const, message: 'The run reached max_runtime_s.' };

  it('a limit reached while the log of a stopped task is read waits for it: the task that exited 0 succeeded', async () => {
    const world = new FakeWorld();
    world.taskReadMs = 5_000; // a slow upload
    const { actor, emitted } = await admitted(world);
    const id = await bootToRunning(actor);
    world.taskExits.set(id, 0);
    await poll(actor, selfStopped(id));
    actor.send({ type: 'EXPIRE', reason: EXPIRED });
    // Stopped by its task: the read (begun for the stop) waits as long as it takes, disk billing only.
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id, stoppedByTask: true }]);
    await tick(5_000);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['succeeded']);
  });

  it('a limit reached when the daemon had not seen the stop (it was down) reads the log before the destroy', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    const id = await bootToRunning(actor);
    // The task ended and stopped its instance while no list was made; the limit comes first.
    world.taskExits.set(id, 2);
    actor.send({ type: 'EXPIRE', reason: EXPIRED });
    await tick(0);
    // Listed running when the limit came: the GPU may bill while the log is read, so the read is bounded.
    expect(world.taskReads).toEqual([{ runId: 'r1', n: 1, instanceId: id, withinMs: 30_000 }]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error).toMatchObject({ kind: 'task_failed', exit_code: 2 });
  });

  it('a limit reached while the task runs (no marker in its log) ends the run expired', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    await bootToRunning(actor);
    actor.send({ type: 'EXPIRE', reason: EXPIRED });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('expired');
    expect(actor.getSnapshot().context.error).toEqual(EXPIRED);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['expired']);
  });

  it('a task stopped by the service hours after its creation recovers on the next offer instead of failing its deadline', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world, { deadlineS: 600 });
    const first = await bootToRunning(actor);
    await tick(4 * 3600 * 1000); // a four-hour task, far past deadline_s
    // The service stopped it (credit ran out): no marker in its log.
    await poll(actor, status(first, 'stopped', { intended_status: 'stopped' }));
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['lost']);
    expect(endedAttempts(emitted)[0]!.detail).toMatch(/not by berth/);
    expect(stateOf(actor)).toBe('booting');
    expect(actor.getSnapshot().context.deadlineAt).toBeGreaterThan(Date.now());
  });

  it('an outbid task gets one bid raise, then waits rebid_wait_s before the next', async () => {
    const world = new FakeWorld();
    const bid = { price: 0.2, stepPct: 10, onOutbid: 'rebid' as const, rebidWaitS: 60 };
    const { actor } = await admitted(world, { bid });
    const id = await bootToRunning(actor);
    await tick(3600 * 1000);
    await poll(actor, status(id, 'stopped', { intended_status: 'running' }));
    expect(stateOf(actor)).toBe('rebidding');
    await tick(1_000);
    expect(world.bids).toHaveLength(1);
    await tick(58_000);
    expect(world.bids).toHaveLength(1);
    await tick(2_000);
    expect(world.bids).toHaveLength(2);
  });

  it('the probe reads the end of a task whose instance still runs (no curl, no wget): destroyed, succeeded', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const id = await bootToRunning(actor);
    // An end of another attempt is not this one's.
    actor.send({ type: 'TASK_END', n: 9, exitCode: 0, onstart: false, at: 0 });
    await tick(0);
    expect(stateOf(actor)).toBe('running');
    actor.send({ type: 'TASK_END', n: 1, exitCode: 0, onstart: false, at: 0 });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([id]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('succeeded');
    expect(emitted.filter((e) => e.type === 'task.ended')).toHaveLength(1);
  });

  it('a workdir that never arrived (stage=workdir) fails the attempt over as unreachable: no task ended, another offer tried (issue #40)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const first = await bootToRunning(actor);
    // Read from the probe while the instance runs.
    actor.send({ type: 'TASK_END', n: 1, exitCode: 1, onstart: false, workdir: true, at: 0 });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    const second = currentInstanceId(actor);
    expect(second).not.toBe(first);
    expect(actor.getSnapshot().context).toMatchObject({ taskRestarts: 0, spentAttempts: 1, taskExit: null });
    // Read from the log of the instance the wrapper stopped.
    await bootToRunning(actor);
    world.taskExits.set(second, 1);
    world.taskWorkdir.add(second);
    await poll(actor, selfStopped(second));
    await confirmGone(actor);
    expect(endedAttempts(emitted).map((a) => a.outcome)).toEqual(['unreachable', 'unreachable']);
    expect(endedAttempts(emitted)[0]!.detail).toMatch(/did not receive the workdir in time/);
    expect(emitted.filter((e) => e.type === 'task.ended')).toEqual([]);
  });

  it('a workdir upload berth gave up (its key refused) gives the instance up at once, saying why, and fails over (issue #48)', async () => {
    const world = new FakeWorld();
    const { actor, emitted } = await admitted(world);
    const first = await bootToRunning(actor);
    actor.send({ type: 'TASK_END', n: 1, exitCode: 1, onstart: false, workdir: true, workdirRefused: 'ssh_auth_refused', at: 0 });
    await tick(0);
    expect(stateOf(actor)).toBe('destroying');
    expect(world.destroys.map((d) => d.instanceId)).toEqual([first]);
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('booting');
    expect(endedAttempts(emitted).map((a) => [a.outcome, a.detail])).toEqual([
      ['unreachable', `the workdir could not be put on instance ${first} (ssh_auth_refused): the task never started`],
    ]);
    expect(emitted.filter((e) => e.type === 'task.ended')).toEqual([]);
  });

  it('an onstart that failed before the task fails the run with that reason', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    const id = await bootToRunning(actor);
    world.taskExits.set(id, 1);
    world.taskOnstart.add(id);
    await poll(actor, selfStopped(id));
    await confirmGone(actor);
    expect(stateOf(actor)).toBe('failed');
    expect(actor.getSnapshot().context.error).toMatchObject({
      kind: 'task_failed',
      exit_code: 1,
      message: 'The onstart script exited with code 1 before the task started.',
    });
  });

  it('resumes a version 6 snapshot: an end recorded before was the task’s own', async () => {
    const world = new FakeWorld();
    const { actor } = await admitted(world);
    await bootToRunning(actor);
    const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as { context: Record<string, unknown> };
    actor.stop();
    const { taskOnstart: _o, ...v6context } = stored.context;
    const migrated = migrateRunSnapshot({ ...stored, context: v6context }, 6, 7, { ...LIMITS, ...TASK });
    expect(migrated?.context['taskOnstart']).toBe(false);
  });
});
