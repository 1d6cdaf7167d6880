// Tasks on a service that is not kind to them (issue #37 items 5 and 6), a spawned daemon against
// the simulator:
// - hosts whose SSH never answers from the daemon's network: a task needs no way in, so it runs and
//   ends on its first instance instead of being destroyed `unreachable` while it works;
// - a container started again after its task ended (a host reboot, an interruptible instance whose
//   bid wins again, a stop and a start): the service runs onstart again at every container start
//   ("This script runs automatically on container startup", vast-ai/docs
//   guides/reference/faq/instances.mdx), so the wrapper's done-file says the same end again instead
//   of running the task a second time; the run ends as the task did.
import { expect, it } from 'vitest';
import type { RunningSimulator, SimConfigInput } from '../../src/sim/index.js';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { DaemonProcess, DaemonSetup } from '../helpers/daemon-process.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

const world = useSpawnedWorld();

async function start(simConfig: SimConfigInput, config: Record<string, unknown> = {}): Promise<DaemonSetup> {
  sim = await world.sim({
    seed: 11,
    config: {
      ...FAST_SIM,
      logs: { upload_delay_s: 0 },
      ...simConfig,
      onstart_exec: { enabled: true, timeout_s: 30, no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] },
    },
  });
  const home = world.home();
  const s = { home, simUrl: sim.url, apiKey: sim.apiKey, config: { ...FAST_CONFIG, ...config } };
  daemon = await world.spawn(s);
  return s;
}

const historyOf = (id: number) => sim!.history().find((h) => h.id === id)!;

async function until(check: () => boolean, what: string, ms = 20_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await sleep(50)) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
  }
}

/** A call to the simulator's service API with the account's key, as a user (or the service) makes it. */
async function service(method: string, path: string, body: unknown): Promise<number> {
  const res = await fetch(`${sim!.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${sim!.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res.status;
}

async function submit(spec: Record<string, unknown>): Promise<string> {
  const res = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec(spec));
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id;
}

it('a task on hosts whose SSH never answers runs and succeeds on its first instance', async () => {
  // Every host holds SSH connections without a byte; SSH readiness would give up after 1 s.
  await start({ profile_rates: { ssh_hang: 1 } }, { readiness: { ssh_timeout_s: 1 } });
  // No ready_when: a task's plan is ready when the service lists its instance running.
  const runId = await submit({ boot_timeout_s: 30, run: 'sleep 3; echo trained' });
  const done = await daemon!.waitFor(runId, isEnded, 40_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  expect(done.attempts[0]!.logs).toMatch(/trained\n\nberth-task-end run=\S+ attempt=1 exit=0/);
  expect(sim!.billingNow()).toEqual([]);
}, 60_000);

it('a task whose container is started again after it ended (reboot, outbid that ends, stop and start) is not run again; each run ends as its task did', async () => {
  // Read through the logs endpoint, as without SSH, so that the log's second marker (said again at the restart) is what is kept.
  const s = await start(
    {},
    { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1, task_probe_interval_s: 1, task_follow_max: 0 } },
  );
  // Each run of the task appends to a counter among the container's files, which survive its restarts.
  const task = (exit: number) => `sleep 2; echo ran >> "$HOME/count"; echo "task runs: $(wc -l < "$HOME/count")"; exit ${exit}`;
  const slim = 'nvidia/cuda:12.4.1-base-ubuntu22.04'; // no curl or wget: the container keeps running after its end
  const rebooted = await submit({ name: 'rebooted', image: slim, run: task(0) });
  const resumed = await submit({
    name: 'resumed',
    image: slim,
    search: { ...(jobSpec().search as object), type: 'bid' },
    bid_price: 'min',
    run: task(0),
  });
  const restarted = await submit({ name: 'restarted', run: task(3) }); // stops itself with curl
  const instanceOf = async (id: string) => (await daemon!.waitFor(id, isRunning, 20_000)).instance!.id;
  const [rebootedId, resumedId, restartedId] = [await instanceOf(rebooted), await instanceOf(resumed), await instanceOf(restarted)];
  // The daemon goes away while the tasks run, so that their ends wait for it to come back.
  await daemon!.kill9();

  const ended = (id: number) => historyOf(id).onstart?.run === 1;
  await until(() => [rebootedId, resumedId, restartedId].every(ended), 'the three tasks to end');
  await until(() => historyOf(restartedId).statuses.at(-1)?.status === 'stopped', 'the self-stop');

  // A host reboot (reboot_instance.yaml: docker stop/start).
  expect(await service('PUT', `/api/v0/instances/reboot/${rebootedId}/`, {})).toBe(200);
  // An interruptible instance outbid, then resumed when its bid wins again.
  const machine = historyOf(resumedId).machine_id;
  expect(sim!.raiseMinBid(machine, 50).outbid).toContain(resumedId);
  sim!.raiseMinBid(machine, -60);
  // A stopped instance started again.
  expect(await service('PUT', `/api/v0/instances/${restartedId}/`, { state: 'running' })).toBe(200);

  const startedAgain = (id: number) => historyOf(id).onstart?.run === 2;
  await until(() => [rebootedId, resumedId, restartedId].every(startedAgain), 'each container to start again and its onstart to end');
  await until(() => historyOf(restartedId).statuses.at(-1)?.status === 'stopped', 'the second self-stop');

  daemon = await world.spawn(s);
  for (const [runId, state, outcome] of [
    [rebooted, 'succeeded', 'succeeded'],
    [resumed, 'succeeded', 'succeeded'],
    [restarted, 'failed', 'task_failed'],
  ] as const) {
    const done = await daemon.waitFor(runId, isEnded, 40_000);
    expect(done.state, runId).toBe(state);
    expect(done.attempts.map((a) => a.outcome)).toEqual([outcome]);
    // The task ran once: its side effect happened once, its end was said again at the restart.
    const logs = done.attempts[0]!.logs!;
    expect(logs).toContain('task runs: 1');
    expect(logs).not.toContain('task runs: 2');
    expect(logs.match(/^berth-task-end /gm)).toHaveLength(2);
  }
  expect((await daemon.waitFor(restarted, isEnded)).error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
  expect(sim!.billingNow()).toEqual([]);
}, 120_000);
