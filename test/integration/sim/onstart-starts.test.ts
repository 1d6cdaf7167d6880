// Onstart execution as the service's docs describe a container's start ("/root/onstart.sh ... runs
// automatically on container startup", guides/reference/faq/instances.mdx): the script runs again
// from the beginning at every start (a start after a stop, a reboot, an outbid that ends), among the
// files earlier runs left (a stopped instance's data is preserved, cli/reference/stop-instance.mdx),
// each run's output after its own start in the container log, whose last
// lines are kept however chatty the task; images without an HTTP client; an unprivileged user.
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim, statusOf, waitFor } from './helpers.js';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim({
    config: {
      logs: { upload_delay_s: 0 },
      lifecycle: { provision_s: 1, boot_s: { min: 5, max: 5 }, restart_s: 5, reboot_s: 5 },
      onstart_exec: { enabled: true, timeout_s: 20, no_http_client_images: ['^nvidia/cuda:[^:]*-base-', '^python:[^:]*-slim$'] },
    },
  });
});
afterAll(() => sim.close());

const hist = (id: number) => sim.history().find((h) => h.id === id)!;

async function logOf(id: number, tail = '1000'): Promise<string[]> {
  const asked = await call(sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, { tail });
  expect(asked.status).toBe(200);
  const text = await waitFor(async () => {
    const r = await fetch(asked.body.result_url as string);
    return r.status === 200 ? r.text() : undefined;
  });
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

/** The log once `check` holds on it. */
async function logWhen(id: number, check: (lines: string[]) => boolean, what: string): Promise<string[]> {
  return waitFor(
    async () => {
      const lines = await logOf(id);
      return check(lines) ? lines : undefined;
    },
    10_000,
    what,
  );
}

async function stdoutOf(onstart: string, image = 'x', env: Record<string, string> = {}): Promise<string[]> {
  const { instanceId } = await rent(sim, { image, onstart, env });
  const result = await waitFor(() => hist(instanceId).onstart ?? undefined, 10_000, 'the script to end');
  expect(result.exit_code, result.stderr).toBe(0);
  return result.stdout.trimEnd().split('\n');
}

describe('every container start runs onstart again', () => {
  test('a stop and start, a reboot and an outbid that ends each run the script from the beginning, among the files earlier runs left', async () => {
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { type: 'bid', limit: 1 })).body.offers[0];
    const created = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, {
      image: 'x',
      price: offer.min_bid,
      // What a run leaves in its directory the next finds there: a container's files survive its restarts (#37).
      onstart: 'echo "files=$(ls -A | wc -l) dir=$PWD"; touch left-behind; sleep 60',
    });
    const id = created.body.new_contract as number;
    const runsIn = (lines: string[]) => lines.filter((l) => l.startsWith('files='));
    const nthRun = (n: number) => (lines: string[]) => runsIn(lines).length === n && hist(id).onstart_runs === n;

    await logWhen(id, nthRun(1), 'the first run');
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' })).status).toBe(200);
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' })).status).toBe(200);
    await logWhen(id, nthRun(2), 'the run after a start');
    expect((await call(sim, 'PUT', `/api/v0/instances/reboot/${id}/`, {})).status).toBe(200);
    await logWhen(id, nthRun(3), 'the run after a reboot');
    expect(sim.raiseMinBid(offer.machine_id, 50).outbid).toEqual([id]);
    expect(await statusOf(sim, id)).toBe('stopped');
    sim.raiseMinBid(offer.machine_id, -60); // its bid wins again: it resumes by itself
    const lines = await logWhen(id, nthRun(4), 'the run after the outbid ended');

    // Each run's output follows its own start, in order; each ran in the same directory, the first
    // finding it empty and every later one what the first left.
    const name = `C.${id}`;
    const story = lines.filter((l) => l.startsWith('Container ') || l.startsWith('files='));
    expect(story.map((l) => l.replace(/ dir=.*/, ''))).toEqual([
      `Container ${name} started`,
      'files=0',
      `Container ${name} stopped`,
      `Container ${name} started`,
      'files=1',
      `Container ${name} restarting`,
      `Container ${name} started`,
      'files=1',
      `Container ${name} stopped: outbid`,
      `Container ${name} started`,
      'files=1',
    ]);
    expect(new Set(runsIn(lines).map((l) => l.replace(/^files=\d+ /, ''))).size).toBe(1);
    // The history keeps the latest run that ended (the third, killed by the outbid) and the count.
    await waitFor(() => (hist(id).onstart?.run === 3 ? true : undefined), 5000, 'the third run recorded');
    expect(hist(id)).toMatchObject({ onstart_runs: 4, onstart: { run: 3, signal: 'SIGKILL', exit_code: null } });
  });

  test('a stop kills what the script left running after its shell ended (a backstop does not outlive its container)', async () => {
    const { instanceId: id } = await rent(sim, { image: 'x', onstart: '( sleep 60; echo too-late ) & echo started' });
    await logWhen(id, (lines) => lines.includes('started'), 'the script to start');
    expect(hist(id).onstart).toBeNull(); // its background child still holds the output open
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' })).status).toBe(200);
    const result = await waitFor(() => hist(id).onstart ?? undefined, 5000, 'the run to close');
    expect(result).toMatchObject({ run: 1, exit_code: 0, stdout: 'started\n' });
  });

  test("the container log keeps a chatty task's last lines, as docker logs does", async () => {
    const { instanceId } = await rent(sim, {
      image: 'x',
      onstart: 'x=$(head -c 6000 /dev/zero | tr "\\0" x); i=0; while [ $i -lt 200 ]; do echo "$i $x"; i=$((i+1)); done; echo the-end',
    });
    const result = await waitFor(() => hist(instanceId).onstart ?? undefined, 10_000, 'the script to end');
    expect(result.truncated).toBe(true); // the history record keeps the first bytes only
    const lines = await logOf(instanceId, '200');
    expect(lines).toHaveLength(200);
    expect(lines.at(-1)).toBe('the-end');
    expect(lines.at(-2)).toBe(`199 ${'x'.repeat(6000)}`);
    expect(lines[0]).toBe(`1 ${'x'.repeat(6000)}`);
  });
});

describe('images without an HTTP client', () => {
  const probe = [
    'for c in curl wget sh ls; do if command -v $c >/dev/null 2>&1; then echo "$c: yes"; else echo "$c: no"; fi; done',
    // A task end that stops its own instance the usual way finds no client to do it with.
    'if command -v curl >/dev/null 2>&1; then echo stop-by-curl; elif command -v wget >/dev/null 2>&1; then echo stop-by-wget; else echo no-way-to-stop; fi',
  ].join('\n');

  test.each(['nvidia/cuda:12.4.1-base-ubuntu22.04', 'python:3.12-slim'])('%s: a script finds neither curl nor wget', async (image) => {
    expect(await stdoutOf(probe, image)).toEqual(['curl: no', 'wget: no', 'sh: yes', 'ls: yes', 'no-way-to-stop']);
  });

  test.skipIf(!existsSync('/usr/bin/curl'))('another image keeps the PATH as configured', async () => {
    expect((await stdoutOf(probe, 'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime')).slice(0, 1)).toEqual(['curl: yes']);
  });
});

describe('contained', () => {
  test('as root, the script runs as nobody (65534) in a directory it owns, with a clean environment; it cannot write the host', async () => {
    const hostFile = join(tmpdir(), 'host-file');
    try {
      const lines = await stdoutOf(
        [
          'id -u; id -g; stat -c %u:%g "$HOME"',
          '[ "$HOME" = "$PWD" ] && [ "$TMPDIR" = "$PWD" ] && echo home-tmp-cwd',
          'touch "$TMPDIR/mine" && echo scratch-writable',
          'touch "$HOST_FILE" 2>/dev/null && echo host-writable || echo host-denied',
          'env | cut -d= -f1 | sort | tr "\\n" " "; echo',
        ].join('\n'),
        'x',
        { HOST_FILE: hostFile },
      );
      const uid = process.getuid!() === 0 ? 65534 : process.getuid!();
      const gid = process.getuid!() === 0 ? 65534 : process.getgid!();
      expect(lines.slice(0, 5)).toEqual([String(uid), String(gid), `${uid}:${gid}`, 'home-tmp-cwd', 'scratch-writable']);
      if (process.getuid!() === 0) expect(lines[5]).toBe('host-denied');
      const shellOwn = new Set(['PWD', 'OLDPWD', 'SHLVL', '_']);
      const names = lines[6]!
        .trim()
        .split(' ')
        .filter((n) => !shellOwn.has(n));
      expect(names).toEqual([
        'BERTH_SIM_URL',
        'CONTAINER_API_KEY',
        'CONTAINER_ID',
        'HOME',
        'HOST_FILE',
        'PATH',
        'TMPDIR',
        'VAST_CONTAINERLABEL',
      ]);
    } finally {
      rmSync(hostFile, { force: true });
    }
  });
});
