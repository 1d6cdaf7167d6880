// Idle autostop against the real simulator (issue #19): gpu_util is read from the lists berth
// already makes; an idle instance is destroyed after idle_timeout_s (the run ends expired with
// error.kind "idle", after one idle.warning), a busy one is not, and a host that reports no
// gpu_util is never taken for idle.
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../../src/wire/control-api.js';
import {
  cancelAndCheckNothingBills,
  isEnded,
  isRunning,
  jobSpec,
  offersInTryOrder,
  startWorld,
  submit,
  type World,
} from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('idle autostop', () => {
  it('destroys an idle instance after idle_timeout_s, warning once before, while a busy one keeps running', async () => {
    world = await startWorld({
      sim: { onstart_exec: { enabled: true, timeout_s: 60 } },
      config: { polling: { interval_s: 0.1 }, runs: { idle_warning_s: 0.5 } },
    });
    const busy = await submit(world, jobSpec({ name: 'busy', ready_when: 'status', onstart: 'sleep 60', idle_timeout_s: 1.5 }));
    const idle = await submit(world, jobSpec({ name: 'idle', ready_when: 'status', idle_timeout_s: 1.5 }));
    const ended: Run = await world.waitFor(idle.id, isEnded, 30_000);
    expect(ended.state).toBe('expired');
    expect(ended.error?.kind).toBe('idle');
    expect(ended.instance).toBeNull();
    const events = await world.api<Array<{ type: string }>>('GET', `/v1/runs/${idle.id}/events`);
    expect(events.body.filter((e) => e.type === 'idle.warning')).toHaveLength(1);
    // The busy one, running as long as the idle one took and longer, is still running.
    await sleep(2000);
    const still = (await world.api<Run>('GET', `/v1/runs/${busy.id}`)).body;
    expect(still.state).toBe('running');
    expect(world.sim.billingNow().map((h) => h.id)).toEqual([still.instance!.id]);
    await cancelAndCheckNothingBills(world, busy.id);
  });

  it('never takes a host that reports no gpu_util for idle', async () => {
    world = await startWorld({ config: { polling: { interval_s: 0.1 } } });
    const spec = jobSpec({ ready_when: 'status', idle_timeout_s: 0.5 });
    for (const o of (await offersInTryOrder(world, spec)).slice(0, 3)) world.sim.setOfferProfile(o.id, 'no_gpu_util');
    const run = await submit(world, spec);
    await world.waitFor(run.id, isRunning, 20_000);
    await sleep(2000);
    expect((await world.api<Run>('GET', `/v1/runs/${run.id}`)).body.state).toBe('running');
    await cancelAndCheckNothingBills(world, run.id);
  });
});
