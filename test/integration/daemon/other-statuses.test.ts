// The service's other statuses (issue #49) against the real simulator: statuses berth does not know
// and an early `stopped` blip while an instance boots (faults.boot_detour) keep the instance, which
// goes on to run; a stop that lasts is still judged and destroyed, and nothing is left billing.
import { afterEach, describe, expect, it } from 'vitest';
import { cancelAndCheckNothingBills, isRunning, jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** Every instance the simulator made for the run, and whether it was destroyed. */
const madeFor = (w: World, runId: string) =>
  w.sim
    .history()
    .filter((h) => h.label?.includes(runId))
    .map((h) => ({ id: h.id, destroyed: h.destroyed_at !== null, statuses: h.statuses.map((s) => s.status) }));

describe('the service’s other statuses while booting', () => {
  it('an early stopped blip (15 lists of it) is not a loss: the run reaches running on its first instance', async () => {
    // 150 sim s = 1.5 wall s of `stopped`, intended running, right after provisioning.
    world = await startWorld({ sim: { faults: { boot_detour: [{ status: 'stopped', s: 150 }] } } });
    const run = await submit(world, jobSpec({ boot_timeout_s: 20, ready_when: 'status' }));
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['running']);
    const made = madeFor(world, run.id);
    expect(made).toHaveLength(1);
    expect(made[0]!.statuses).toEqual([null, 'stopped', 'loading', 'running']);
    expect(made[0]!.destroyed).toBe(false);
    expect(running.instance!.id).toBe(made[0]!.id);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('statuses berth does not know, and those it waits on, read as still starting: no instance destroyed that would have run', async () => {
    const detour = ['frozen', 'restarting', 'rebooting', 'recycling', 'migrating'].map((status) => ({ status, s: 40 }));
    world = await startWorld({ sim: { faults: { boot_detour: [{ status: null, s: 40 }, ...detour] } } });
    const run = await submit(world, jobSpec({ boot_timeout_s: 20, ready_when: 'status' }));
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['running']);
    const made = madeFor(world, run.id);
    expect(made).toHaveLength(1);
    // Provisioning's null, then the detour's.
    expect(made[0]!.statuses).toEqual([null, null, 'frozen', 'restarting', 'rebooting', 'recycling', 'migrating', 'loading', 'running']);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('a stop that outlasts the boot deadline is destroyed as a boot timeout; the next offer runs and nothing is left billing', async () => {
    // 2000 sim s = 20 wall s stopped: past the 3 s boot deadline.
    world = await startWorld({ sim: { faults: { boot_detour: [{ status: 'stopped', s: 2000 }] } } });
    const run = await submit(world, jobSpec({ boot_timeout_s: 3, ready_when: 'status' }));
    await expect.poll(() => madeFor(world!, run.id).length, { timeout: 10_000 }).toBe(1);
    world.sim.setFaults({ boot_detour: [] });
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['boot_timeout', 'running']);
    const [first, second] = madeFor(world, run.id);
    expect(first!.destroyed).toBe(true);
    expect(first!.statuses).not.toContain('running');
    expect(second!.destroyed).toBe(false);
    await cancelAndCheckNothingBills(world, run.id);
  });
});

describe('a task whose instance blips stopped while booting', () => {
  it('runs once, on its first instance, and ends succeeded', async () => {
    world = await startWorld({
      sim: {
        onstart_exec: { enabled: true, timeout_s: 30 },
        logs: { upload_delay_s: 0 },
        faults: { boot_detour: [{ status: 'stopped', s: 150 }] },
      },
      config: { polling: { interval_s: 0.2 } },
    });
    const run = await submit(world, jobSpec({ boot_timeout_s: 20, ready_when: 'status', run: 'echo training; sleep 0.5; echo done' }));
    const done = await world.waitFor(run.id, (r) => r.state === 'succeeded' || r.state === 'failed' || r.state === 'cancelled', 30_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    const [only] = world.sim.history().filter((h) => h.label?.includes(run.id));
    expect(only!.statuses.map((s) => s.status)).toContain('stopped');
    expect(only!.onstart_runs).toBe(1);
    expect(world.sim.billingNow()).toEqual([]);
  });
});

describe('a create that lost its offer to another create on it (double-bought)', () => {
  it('with docker’s port error, fails over at once: destroyed, the next offer runs, nothing left billing', async () => {
    world = await startWorld({ sim: { faults: { double_buy_rate: 1 } } });
    // A boot deadline far longer than the test: only the sign can end the first attempt in time.
    const run = await submit(world, jobSpec({ boot_timeout_s: 600, ready_when: 'status' }));
    await expect.poll(() => madeFor(world!, run.id).length, { timeout: 10_000 }).toBe(1);
    world.sim.setFaults({ double_buy_rate: 0 });
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['exited', 'running']);
    expect(running.attempts[0]!.detail).toMatch(/another container holds its ports/);
    const [lost, next] = madeFor(world, run.id);
    expect(lost!.destroyed).toBe(true);
    expect(lost!.statuses).not.toContain('running');
    expect(next!.destroyed).toBe(false);
    expect(world.sim.stats().offers_double_bought).toBe(1);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('without a sign (it loads for ever), the boot deadline ends it; then the next offer runs', async () => {
    world = await startWorld({ sim: { faults: { double_buy_rate: 1, double_buy_sign: 'silent' } } });
    const run = await submit(world, jobSpec({ boot_timeout_s: 3, ready_when: 'status' }));
    await expect.poll(() => madeFor(world!, run.id).length, { timeout: 10_000 }).toBe(1);
    world.sim.setFaults({ double_buy_rate: 0 });
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['boot_timeout', 'running']);
    expect(madeFor(world, run.id)[0]!.destroyed).toBe(true);
    await cancelAndCheckNothingBills(world, run.id);
  });
});
