// Opt-in onstart execution: the script runs with sh when the instance reaches running, with the
// instance's env and CONTAINER_API_KEY, under a time limit, in the instance's directory, removed
// once the instance is destroyed.
import { existsSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { OnstartResult, RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim, statusOf, waitFor } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim({
    config: {
      lifecycle: { provision_s: 1, boot_s: { min: 5, max: 10 } },
      onstart_exec: { enabled: true, timeout_s: 1 },
    },
  });
});
afterAll(() => sim.close());

async function runScript(onstart: string, env: Record<string, string> = {}): Promise<{ id: number; key: string; result: OnstartResult }> {
  const { instanceId, instanceKey } = await rent(sim, { image: 'x', onstart, env });
  const result = await waitFor(() => sim.history().find((h) => h.id === instanceId)?.onstart ?? undefined, 5000, 'onstart result');
  return { id: instanceId, key: instanceKey, result };
}

describe('onstart execution', () => {
  test('runs the script with the env and CONTAINER_API_KEY and records its output', async () => {
    const { id, key, result } = await runScript(
      'echo hello; echo "$GREETING"; echo "$CONTAINER_API_KEY $CONTAINER_ID"; pwd; echo oops >&2; exit 3',
      {
        GREETING: 'hi there',
      },
    );
    const lines = result.stdout.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['hello', 'hi there', `${key} ${id}`]);
    expect(result).toMatchObject({ exit_code: 3, timed_out: false, stderr: 'oops\n', truncated: false });
    // The instance's directory outlives the script (its container's files wait for the next start)
    // and goes with the instance.
    expect(existsSync(lines[3]!)).toBe(true);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${id}/`, {})).status).toBe(200);
    await waitFor(() => (existsSync(lines[3]!) ? undefined : true), 5000, 'the directory to go');
  });

  test('a 5000-character script runs verbatim through the gzip+base64 wrapper; unwrapped it is refused', async () => {
    const body = Array.from({ length: 250 }, (_, i) => `echo line-${String(i).padStart(4, '0')}`).join('\n');
    const script = `${body}\n${'#'.repeat(5000 - body.length - 2)}\n`;
    expect(script.length).toBe(5000);
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0];
    expect((await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', onstart: script })).status).toBe(400);

    const wrapped = `echo ${gzipSync(script).toString('base64')} | base64 -d | gunzip | sh`;
    expect(wrapped.length).toBeLessThan(4048);
    const { result } = await runScript(wrapped);
    expect(result.exit_code).toBe(0);
    expect(result.stdout.trim().split('\n')).toEqual(Array.from({ length: 250 }, (_, i) => `line-${String(i).padStart(4, '0')}`));
  });

  test('a script past its time limit is killed', async () => {
    const { result } = await runScript('echo started; sleep 30');
    expect(result).toMatchObject({ timed_out: true, signal: 'SIGKILL', stdout: 'started\n' });
  });

  test('output past the cap is cut', async () => {
    const { result } = await runScript('head -c 200000 /dev/zero | tr "\\0" a');
    expect(result.stdout.length).toBe(65_536);
    expect(result.truncated).toBe(true);
  });

  test.skipIf(!existsSync('/usr/bin/curl'))('a script can call back with its instance key and stop its own instance', async () => {
    const { id } = await runScript(
      'curl -s -X PUT -H "Authorization: Bearer $CONTAINER_API_KEY" -d \'{"state":"stopped"}\' "$BERTH_SIM_URL/api/v0/instances/$CONTAINER_ID/"',
    );
    expect(await statusOf(sim, id)).toBe('stopped');
  });
});

test('disabled by default: nothing runs', async () => {
  const off = await startTestSim({ config: { lifecycle: { provision_s: 0, boot_s: { min: 1, max: 1 } } } });
  try {
    const { instanceId } = await rent(off, { image: 'x', onstart: 'echo hi' });
    await waitFor(async () => ((await statusOf(off, instanceId)) === 'running' ? true : undefined));
    await new Promise((r) => setTimeout(r, 100));
    expect(off.history()[0]!.onstart).toBeNull();
  } finally {
    await off.close();
  }
});
