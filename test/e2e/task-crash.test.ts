// A daemon process SIGKILLed while its task ends (issue #19): the container stops itself with no
// daemon to see it; the restarted daemon finds the stop in its lists, reads the end marker, records
// the end once and destroys the instance. Checked against the simulator's own history and ledger.
import { expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

const world = useSpawnedWorld();

it('SIGKILL while the task ends: the restarted daemon records the end once and leaves nothing billing', async () => {
  sim = await world.sim({
    seed: 11,
    config: { ...FAST_SIM, onstart_exec: { enabled: true, timeout_s: 30 }, logs: { upload_delay_s: 0 } },
  });
  const home = world.home();
  const s = { home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG };
  daemon = await world.spawn(s);
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', run: 'sleep 2; echo all done' }));
  expect(created.status).toBe(201);
  const runId = created.body.id;
  const running = await daemon.waitFor(runId, isRunning, 20_000);
  const instanceId = running.instance!.id;
  await daemon.kill9();

  // With no daemon alive, the task ends and its container stops its own instance.
  for (let i = 0; i < 200; i++) {
    const h = sim.history().find((x) => x.id === instanceId)!;
    if (h.statuses.at(-1)?.status === 'stopped') break;
    await sleep(50);
  }
  expect(
    sim
      .history()
      .find((x) => x.id === instanceId)!
      .statuses.at(-1)?.status,
  ).toBe('stopped');

  daemon = await world.spawn(s);
  const done = await daemon.waitFor(runId, isEnded, 20_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  const events = await daemon.api<Array<{ type: string }>>('GET', `/v1/runs/${runId}/events`);
  expect(events.body.filter((e) => e.type === 'task.ended')).toHaveLength(1);
  expect(events.body.filter((e) => e.type === 'run.succeeded')).toHaveLength(1);
  expect(
    sim
      .history()
      .filter((h) => h.label?.includes(runId))
      .map((h) => h.id),
  ).toEqual([instanceId]);
  expect(sim.billingNow()).toEqual([]);
});
