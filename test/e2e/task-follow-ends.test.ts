// What a container can do to a followed task's end and to the daemon that follows it (issue #49
// item 4), with a spawned daemon against the simulator's real sshd: a task in an image without
// curl or wget whose done-file never appears still ends (the follow finds its process gone and
// hands it to the logs path, with one event), and a 64 MB line, on the task's output and in its
// done-file, leaves the daemon answering and its memory bounded.
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import type { Run as RunView, RunEvent } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();
let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A CUDA base image, which the simulator runs without curl and wget (as the real one has neither). */
const SLIM = 'nvidia/cuda:12.4.1-base-ubuntu22.04';

async function start() {
  const w = await world.sshWorld({ seed: 21, sim: { onstart_exec: { no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] } } });
  ({ sim, daemon } = w);
  return w.setup;
}

/** An onstart that waits until the daemon follows (its stream wrote the attempt's .att file). */
const followedFirst = 'until ls "${TMPDIR:-/tmp}"/berth-task-*.att >/dev/null 2>&1; do sleep 0.1; done';

/** The task's own files, found from the out-file the wrapper's tee writes (`${f%.out}.done` is its done-file). */
const eachTaskFile = (body: string) => `for f in "\${TMPDIR:-/tmp}"/berth-task-*.out; do ${body}; done`;

const logCalls = () => sim!.stats().requests['PUT /api/v0/instances/request_logs/{id}/'] ?? 0;

/** The daemon's peak resident memory, bytes (its /proc status' VmHWM). */
function peakRss(pid: number): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(kb![1]) * 1024;
}

it('no curl or wget, and a done-file that never appears (a directory in its place): the follow finds the task gone and the logs path ends it, once', async () => {
  await start();
  // A done-file the wrapper cannot write, as in a full temp directory: a directory of that name.
  const run = `echo working; ${eachTaskFile('mkdir "${f%.out}.done"')}; echo last; exit 0`;
  const created = await daemon!.api<RunView>(
    'POST',
    '/v1/runs',
    jobSpec({ image: SLIM, ready_when: 'status', onstart: followedFirst, run }),
  );
  expect(created.status).toBe(201);
  const runId = created.body.id;
  const done = await daemon!.waitFor(runId, isEnded, 120_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  // Read through the logs path: the marker the wrapper printed to the log.
  expect(logCalls()).toBeGreaterThan(0);
  expect(done.attempts[0]!.logs).toContain('last');
  const events = (await daemon!.api<RunEvent[]>('GET', `/v1/runs/${runId}/events`)).body;
  const fallbacks = events.filter((e) => e.type === 'task.ssh_fallback');
  expect(fallbacks).toHaveLength(1);
  expect(fallbacks[0]!.message).toMatch(/no longer running and left no done-file/);
  expect(fallbacks[0]!.data).toMatchObject({ code: 'task_gone' });
  expect(sim!.billingNow()).toEqual([]);
}, 150_000);

it("a 64 MB line on the task's output and in its done-file: /healthz answers throughout, the daemon's memory stays bounded, the task ends", async () => {
  await start();
  const line = "head -c 67108864 /dev/zero | tr '\\0' y";
  const run = `${line}; echo; echo after; ${eachTaskFile(`${line} >"\${f%.out}.done"`)}; sleep 2; exit 0`;
  const created = await daemon!.api<RunView>(
    'POST',
    '/v1/runs',
    jobSpec({ image: SLIM, ready_when: 'status', onstart: followedFirst, run }),
  );
  expect(created.status).toBe(201);
  const runId = created.body.id;
  const pid = daemon!.proc.pid!;
  let answered = 0;
  let ended: RunView | undefined;
  const watching = daemon!.waitFor(runId, isEnded, 120_000).then((r) => (ended = r));
  while (ended === undefined) {
    // Each look must answer (a loop stalled by the line answered in 20 s); 10 s is far beyond a healthy one.
    const res = await fetch(`${daemon!.url}/healthz`, { signal: AbortSignal.timeout(10_000) });
    expect(res.status).toBe(200);
    await res.body?.cancel();
    answered++;
    await sleep(250);
  }
  await watching;
  expect(answered).toBeGreaterThan(0);
  expect(ended.state).toBe('succeeded');
  expect(ended.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  // A daemon at rest holds about 100 MB; the line unbounded took it past 330 MB.
  const peak = peakRss(pid);
  expect(peak, `peak RSS ${Math.round(peak / 2 ** 20)} MiB`).toBeLessThan(200 * 2 ** 20);
  expect(sim!.billingNow()).toEqual([]);
}, 150_000);
