// Tasks whose end a spawned daemon learns late or without the self-stop (issue #29), checked against
// the simulator's history and ledger:
// - a laptop closed overnight: the daemon is SIGKILLed while its task runs, the task ends and stops
//   its instance, and the daemon comes back after max_runtime_s: the task's end wins (succeeded,
//   its output read before the destroy), not `expired`;
// - an image with neither curl nor wget: the wrapper cannot stop its instance, and the daemon's own
//   log reads (the task probe) end the task;
// - uploads that answer 403 AccessDenied until written, as on the service (issue #37): tasks in both
//   kinds of image succeed on their first instance with their output kept, none run twice;
// - an onstart service started with `&` that logs 50 lines a second: the marker, asked for by
//   itself (`filter`), is found however far the service's lines pushed it from the log's end.
import { expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator, SimConfigInput } from '../../src/sim/index.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

const world = useSpawnedWorld();

async function start(simConfig: SimConfigInput = {}, config: Record<string, unknown> = {}) {
  sim = await world.sim({
    seed: 11,
    config: {
      ...FAST_SIM,
      logs: { upload_delay_s: 0 },
      ...simConfig,
      onstart_exec: { enabled: true, timeout_s: 30, ...simConfig.onstart_exec },
    },
  });
  const home = world.home();
  const s = { home, simUrl: sim.url, apiKey: sim.apiKey, config: { ...FAST_CONFIG, ...config } };
  daemon = await world.spawn(s);
  return s;
}

const lastStatus = (id: number) =>
  sim!
    .history()
    .find((x) => x.id === id)!
    .statuses.at(-1)?.status;

it('a task that ended while the daemon was down past max_runtime_s succeeded: its end wins, its output is read', async () => {
  const s = await start();
  const created = await daemon!.api<RunView>(
    'POST',
    '/v1/runs',
    jobSpec({ ready_when: 'status', max_runtime_s: 3, run: 'sleep 1; echo all done' }),
  );
  expect(created.status).toBe(201);
  const runId = created.body.id;
  const running = await daemon!.waitFor(runId, isRunning, 20_000);
  const instanceId = running.instance!.id;
  await daemon!.kill9();
  // The task ends and stops its instance with no daemon alive; the daemon stays down past the limit.
  for (let i = 0; i < 200 && lastStatus(instanceId) !== 'stopped'; i++) await sleep(50);
  expect(lastStatus(instanceId)).toBe('stopped');
  await sleep(3_500);

  daemon = await world.spawn(s);
  const done = await daemon.waitFor(runId, isEnded, 20_000);
  expect(done.state).toBe('succeeded');
  expect(done.error).toBeNull();
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  expect(done.attempts[0]!.logs).toMatch(/all done\n\nberth-task-end run=\S+ attempt=1 exit=0/);
  expect(sim!.billingNow()).toEqual([]);
  // Cancelling a run that succeeded says so in words (#32 item 8), and changes nothing.
  const cancel = await berth(['cancel', runId], userEnv(s.home));
  expect(cancel.code).toBe(0);
  expect(cancel.stdout).toContain(`Run ${runId} succeeded; nothing to cancel.`);
});

it('an image with neither curl nor wget: the spawned daemon reads the end itself and destroys the instance', async () => {
  await start(
    { onstart_exec: { no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] } },
    { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1, task_probe_interval_s: 1 } },
  );
  const spec = jobSpec({ image: 'nvidia/cuda:12.4.1-base-ubuntu22.04', ready_when: 'status', run: 'echo epoch 1; exit 4' });
  const created = await daemon!.api<RunView>('POST', '/v1/runs', spec);
  const done = await daemon!.waitFor(created.body.id, isEnded, 30_000);
  expect(done.state).toBe('failed');
  expect(done.error).toMatchObject({ kind: 'task_failed', exit_code: 4 });
  const instanceId = done.attempts[0]!.instance_id!;
  expect(
    sim!
      .history()
      .find((h) => h.id === instanceId)!
      .statuses.map((x) => x.status),
  ).not.toContain('stopped');
  expect(sim!.billingNow()).toEqual([]);
});

it('one spawned daemon, many scripts: set -e, a failing onstart, a chatty task and a loss past deadline_s each end as they did', async () => {
  await start({}, { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1 } });
  const d = daemon!;
  const submit = async (spec: Record<string, unknown>) => {
    const res = await d.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', ...spec }));
    expect(res.status).toBe(201);
    return res.body.id;
  };
  const line = 'y'.repeat(6000);
  const setE = await submit({ name: 'set-e', onstart: 'set -e\necho setting up', run: 'echo failing; exit 3' });
  const badOnstart = await submit({ name: 'bad-onstart', onstart: 'set -e\nfalse', run: 'echo the task ran' });
  const chatty = await submit({ name: 'chatty', run: `i=0; while [ $i -lt 200 ]; do echo "step $i ${line}"; i=$((i+1)); done` });
  const lost = await submit({ name: 'lost', deadline_s: 3, run: 'sleep 6; echo finished' });

  const running = await d.waitFor(lost, isRunning, 20_000);
  await sleep(3_500);
  expect(sim!.serviceStop(running.instance!.id, 0)).toBe(true);

  const ended = async (id: string) => d.waitFor(id, isEnded, 40_000);
  expect(await ended(setE)).toMatchObject({ state: 'failed', error: { kind: 'task_failed', exit_code: 3 } });
  const b = await ended(badOnstart);
  expect(b).toMatchObject({ state: 'failed', error: { kind: 'task_failed', exit_code: 1 } });
  expect(b.error!.message).toMatch(/onstart script exited with code 1 before the task started/);
  expect((await ended(chatty)).state).toBe('succeeded');
  const l = await ended(lost);
  expect(l.state).toBe('succeeded');
  expect(l.attempts.map((a) => a.outcome)).toEqual(['lost', 'succeeded']);
  expect(sim!.billingNow()).toEqual([]);
}, 90_000);

/** The runs of its onstart (one per container start) the instance of each attempt made. */
const onstartRuns = (run: RunView) => run.attempts.map((a) => sim!.history().find((h) => h.id === a.instance_id)!.onstart_runs);

it('uploads answering 403 for 1.5 s: a task in an ordinary image and one without curl or wget each succeed on their first instance, output kept, none run twice', async () => {
  // 150 sim s at 100× time: each upload answers 403 AccessDenied for 1.5 s of the daemon's time.
  await start(
    { logs: { upload_delay_s: 150 }, onstart_exec: { no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] } },
    { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1, task_probe_interval_s: 1 } },
  );
  const submit = async (spec: Record<string, unknown>) => {
    const res = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec(spec));
    expect(res.status).toBe(201);
    return res.body.id;
  };
  // ready_when status: how a task waits on SSH is another matter (#37 item 5).
  const ordinary = await submit({ name: 'ordinary', ready_when: 'status', run: 'sleep 1; echo result: 42' });
  const slim = await submit({
    name: 'slim',
    image: 'nvidia/cuda:12.4.1-base-ubuntu22.04',
    ready_when: 'status',
    run: 'sleep 1; echo result: 43',
  });
  for (const [id, output] of [
    [ordinary, 'result: 42'],
    [slim, 'result: 43'],
  ] as const) {
    const done = await daemon!.waitFor(id, isEnded, 60_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    expect(done.attempts[0]!.logs).toContain(output);
    expect(onstartRuns(done)).toEqual([1]);
  }
  expect(sim!.billingNow()).toEqual([]);
}, 90_000);

it('an onstart service logging 50 lines a second cannot hide the end: the task succeeded, its marker asked for by itself', async () => {
  // No curl: the instance keeps running (and its service logging) until berth reads the end. The
  // probe reads every 10 s, so the service has logged hundreds of lines after the marker by then.
  await start(
    { onstart_exec: { no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] } },
    { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1, task_probe_interval_s: 10 } },
  );
  const spec = jobSpec({
    image: 'nvidia/cuda:12.4.1-base-ubuntu22.04',
    ready_when: 'status',
    onstart: '(while :; do echo "GET /health 200"; sleep 0.02; done) &',
    run: 'sleep 1; echo trained',
  });
  const created = await daemon!.api<RunView>('POST', '/v1/runs', spec);
  const done = await daemon!.waitFor(created.body.id, isEnded, 60_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  expect(sim!.billingNow()).toEqual([]);
}, 90_000);
