// Tasks in the simulator (issue #19): berth's task wrapper runs for real as the instance's onstart,
// writes its end marker to the container log, and stops its own instance with its own key; the
// record's gpu_util (a fraction, as show_instance.yaml types it) is busy while the script runs and near 0 when idle; a host of the
// `no_gpu_util` profile reports none.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { taskExitOf, taskScript } from '../../../src/job-spec/task-script.js';
import { call, rent, startTestSim, statusOf, waitFor } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim({
    config: {
      logs: { upload_delay_s: 0 },
      lifecycle: { provision_s: 1, boot_s: { min: 5, max: 10 } },
      onstart_exec: { enabled: true, timeout_s: 20 },
    },
  });
});
afterAll(() => sim.close());

async function record(id: number): Promise<Record<string, unknown>> {
  return (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
}

async function logOf(id: number): Promise<string> {
  const asked = await call(sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, { tail: '200' });
  expect(asked.status).toBe(200);
  const url = asked.body.result_url as string;
  return waitFor(async () => {
    const r = await fetch(url);
    return r.status === 200 ? r.text() : undefined;
  });
}

describe('task wrapper in the simulator', () => {
  test('runs the task, writes its exit code to the log and stops its own instance', async () => {
    const script = (id: string) =>
      taskScript({ onstart: 'echo setup done', run: 'echo working; exit 3', runId: id, n: 1, serviceUrl: sim.url, backstop: null });
    const { instanceId } = await rent(sim, { image: 'x', onstart: script('abcdefgh2345') });
    const stopped = await waitFor(
      async () => {
        const r = await record(instanceId);
        return r['intended_status'] === 'stopped' ? r : undefined;
      },
      10_000,
      'the task to stop its instance',
    );
    expect(stopped['actual_status']).toBe('stopped');
    const log = await logOf(instanceId);
    expect(log).toContain('setup done\nworking\n');
    expect(taskExitOf(log, 'abcdefgh2345', 1)).toBe(3);
  });

  test('the backstop destroys its own instance once the limit has passed', async () => {
    const { instanceId } = await rent(sim, {
      image: 'x',
      onstart: taskScript({
        run: 'sleep 30',
        runId: 'abcdefgh2345',
        n: 2,
        serviceUrl: sim.url,
        backstop: { atS: Date.now() / 1000 + 1, madeAtS: Date.now() / 1000 },
      }),
    });
    await waitFor(async () => ((await statusOf(sim, instanceId)) === undefined ? true : undefined), 10_000, 'the backstop destroy');
    expect((await call(sim, 'GET', `/api/v0/instances/${instanceId}/`)).body.instances).toBeNull();
  });

  test('gpu_util is busy while the script runs and near 0 once it ended', async () => {
    const { instanceId } = await rent(sim, { image: 'x', onstart: 'sleep 1' });
    const busy = await waitFor(async () => ((await record(instanceId))['gpu_util'] === 0.97 ? true : undefined), 10_000, 'busy');
    expect(busy).toBe(true);
    await waitFor(async () => ((await record(instanceId))['gpu_util'] === 0.004 ? true : undefined), 10_000, 'idle');
    // The v1 list carries it too, asked for by name.
    const listed = await call(sim, 'GET', `/api/v1/instances/?select_cols=${encodeURIComponent('["id","gpu_util"]')}`);
    expect(listed.body.instances.find((i: { id: number }) => i.id === instanceId).gpu_util).toBe(0.004);
  });

  test('a host of the no_gpu_util profile reports none: -1, as the docs write an unknown figure', async () => {
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0];
    expect((await call(sim, 'PUT', `/_sim/offers/${offer.id}/profile`, { profile: 'no_gpu_util' })).status).toBe(200);
    const created = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', onstart: 'sleep 5' });
    const id = created.body.new_contract as number;
    await waitFor(async () => ((await statusOf(sim, id)) === 'running' ? true : undefined), 10_000, 'running');
    expect((await record(id))['gpu_util']).toBe(-1);
  });
});
