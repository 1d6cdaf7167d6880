// The official CLI (vast-ai/vast-cli's vast.py) against the simulator: search, create, show,
// label, stop, start, reboot, logs, user, env vars, attach and detach ssh, destroy and charges,
// show connections and cloud copy, with the documented rate limits on.
// vast.py is vendored unchanged in test/fixtures/vast-cli (MIT, its LICENSE beside it; vast-ai/vast-cli
// at 55679830a2c2, 2026-08-06). VAST_PY names another copy to try instead. The test runs wherever
// python3 has the `requests` module, and is skipped, saying so, where it has not; in CI (CI=true)
// it fails instead, for CI must run it (.ci/run installs Debian's python3-requests where missing).
// The simulator's wall clock is a manual one moved 2 s before each command, so that no command
// meets another's rate limit and no test time is spent sleeping.
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { packagePath } from '../../../src/package-path.js';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import { ed25519KeyPair } from '../../../src/sim/ssh-keys.js';

const VAST_PY = process.env.VAST_PY ?? packagePath('test', 'fixtures', 'vast-cli', 'vast.py');
const runnable = spawnSync('python3', ['-c', 'import requests'], { stdio: 'ignore' }).status === 0;
const inCi = process.env.CI === 'true';
if (!runnable && !inCi) console.warn('vast-cli.test.ts: skipped, python3 with the requests module is needed to run the official CLI');
const run = promisify(execFile);

describe.runIf(!runnable && inCi)('the official CLI in CI', () => {
  test('has python3 with the requests module to run (.ci/run installs python3-requests)', () => {
    expect(runnable, 'python3 cannot import requests: CI must run the official CLI against the simulator').toBe(true);
  });
});

describe.skipIf(!runnable)('the official CLI against the simulator', () => {
  let sim: RunningSimulator;
  let home: string;
  const clock = { now: Date.now() };

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'berth-vast-cli-'));
    sim = await startSimulator({
      timeScale: 1,
      now: () => clock.now,
      // The clock stands still while a command runs, so uploaded logs are there at once.
      config: { lifecycle: { provision_s: 1, boot_s: { min: 3, max: 3 }, restart_s: 1, reboot_s: 1 }, logs: { upload_delay_s: 0 } },
    });
  });
  afterAll(async () => {
    await sim?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  /** One CLI command, 2 s of wall time after the previous one. Its output must hold no failure. */
  async function vast(...args: string[]): Promise<string> {
    clock.now += 2000;
    const { stdout, stderr } = await run('python3', [VAST_PY, '--url', sim.url, '--api-key', sim.apiKey, ...args], {
      // The CLI reads VAST_URL for its start-up GPU name fetch and caches under HOME.
      env: { PATH: process.env.PATH, HOME: home, VAST_URL: sim.url },
      timeout: 20_000,
    });
    expect(stderr, `${args.join(' ')}: stderr`).not.toMatch(/Traceback|Error/);
    expect(stdout, `${args.join(' ')}: stdout`).not.toMatch(/Failed with error|Traceback/);
    return stdout;
  }

  test(
    'search, create, show, label, stop, start, reboot, logs, update, recycle, user, env vars, attach and detach ssh, destroy, charges: no error',
    { timeout: 120_000 },
    async () => {
      const offers = JSON.parse(
        await vast(
          'search',
          'offers',
          'num_gpus=1 gpu_name=RTX_4090 geolocation in [US,CA,SE,DE,NL] direct_port_count>=1',
          '--limit',
          '5',
          '--raw',
        ),
      ) as Array<Record<string, unknown>>;
      expect(offers.length).toBeGreaterThan(0);
      expect(offers.every((o) => o.gpu_name === 'RTX 4090' && o.num_gpus === 1 && o.verified === true)).toBe(true);

      const created = await vast(
        'create',
        'instance',
        String(offers[0]!.id),
        '--image',
        'pytorch/pytorch',
        '--disk',
        '20',
        '--label',
        'cli',
        '--ssh',
        '--direct',
        '--env',
        '-e TZ=UTC -p 8080:8080',
        '--onstart-cmd',
        'echo hi',
      );
      const id = Number(/'new_contract': (\d+)/.exec(created)![1]);
      expect(id).toBeGreaterThan(0);

      const listed = JSON.parse(await vast('show', 'instances', '--raw')) as Array<Record<string, unknown>>;
      expect(listed.map((i) => i.id)).toEqual([id]);
      const shown = JSON.parse(await vast('show', 'instance', String(id), '--raw')) as Record<string, unknown>;
      // The simulator pads every string of a record by default (quirks.padded_strings); this CLI
      // prints `show instance` as sent, so it is read trimmed, as vast-cli's `_strip_strings` does.
      expect(shown['label']).toBe('cli \n');
      expect(stripped(shown)).toMatchObject({ id, label: 'cli', actual_status: 'running', extra_env: { TZ: 'UTC', '-p 8080:8080': '1' } });

      expect(await vast('label', 'instance', String(id), 'renamed')).toContain(`label for ${id} set to renamed.`);
      expect(await vast('stop', 'instance', String(id))).toContain(`stopping instance ${id}.`);
      expect(await vast('start', 'instance', String(id))).toContain(`starting instance ${id}.`);
      expect(await vast('reboot', 'instance', String(id))).toContain(`Rebooting instance ${id}.`);

      expect(await vast('logs', String(id), '--tail', '20', '--filter', 'started')).toContain(`Container C.${id} started`);

      // recycle__instance and update__instance (vast.py): the CLI reads `success` and prints its words.
      expect(
        await vast('update', 'instance', String(id), '--image', 'pytorch/pytorch:2', '--onstart', 'echo two', '--env', '{"A": "b"}'),
      ).toContain(`Instance ${id} updated successfully.`);
      expect(await vast('recycle', 'instance', String(id))).toContain(`Recycling instance ${id}.`);
      expect(stripped(JSON.parse(await vast('show', 'instance', String(id), '--raw')))).toMatchObject({ actual_status: 'recycling' });
      expect(sim.history().find((h) => h.id === id)!.image).toBe('pytorch/pytorch:2');
      expect(await vast('recycle', 'instance', '1')).toContain('Invalid instance id.');

      const user = JSON.parse(await vast('show', 'user', '--raw')) as Record<string, unknown>;
      expect(user).toMatchObject({ id: 424242, email: 'sim-user@example.com' });
      expect(user).not.toHaveProperty('api_key');

      expect(await vast('create', 'env-var', 'HF_TOKEN', 'abc123')).toContain('added successfully');
      expect(JSON.parse(await vast('show', 'env-vars', '--raw'))).toEqual({ HF_TOKEN: '*****' });

      // An instance's own key (keys.py `attach_ssh`, `detach_ssh`): the CLI prints the answer.
      const instanceKey = ed25519KeyPair().public;
      expect(await vast('attach', 'ssh', String(id), instanceKey)).toContain("'msg': 'SSH key attached successfully'");
      const attached = (await (
        await fetch(`${sim.url}/api/v0/instances/${id}/ssh/`, { headers: { authorization: `Bearer ${sim.apiKey}` } })
      ).json()) as { ssh_keys: string };
      const keyId = (JSON.parse(attached.ssh_keys) as Array<{ id: number; public_key: string }>).find(
        (k) => k.public_key === instanceKey,
      )!.id;
      expect(await vast('detach', 'ssh', String(id), String(keyId))).toContain("'msg': 'SSH key removed from instance.'");

      expect(await vast('destroy', 'instance', String(id))).toContain(`destroying instance ${id}.`);
      const charges = await vast('show', 'invoices-v1', '--charges', '--raw');
      const raw = JSON.parse(charges.slice(charges.indexOf('{'))) as { results: Array<{ source: string; amount: number }> };
      expect(raw.results.map((r) => r.source)).toEqual([`instance-${id}`]);
      expect(raw.results[0]!.amount).toBeCloseTo(sim.ledger().total_usd, 3);
      expect(sim.instances()).toEqual([]);
      expect(sim.ledger().billing_now).toEqual([]);
      expect(sim.stats().rate_limited).toEqual({});
    },
  );
});

describe.skipIf(!runnable)('the official CLI against the simulator: cloud connections and cloud copy', () => {
  let sim: RunningSimulator;
  let home: string;
  const clock = { now: Date.now() };

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'berth-vast-cli-cloud-'));
    mkdirSync(join(home, 'bucket'));
    sim = await startSimulator({
      timeScale: 1,
      now: () => clock.now,
      config: {
        lifecycle: { provision_s: 1, boot_s: { min: 3, max: 3 } },
        onstart_exec: { enabled: true },
        cloud: { connections: [{ name: 'cli-s3', cloud_type: 's3', dir: join(home, 'bucket') }] },
      },
    });
  });
  afterAll(async () => {
    await sim?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  async function vast(...args: string[]): Promise<string> {
    clock.now += 2000;
    const { stdout, stderr } = await run('python3', [VAST_PY, '--url', sim.url, '--api-key', sim.apiKey, ...args], {
      env: { PATH: process.env.PATH, HOME: home, VAST_URL: sim.url },
      timeout: 20_000,
    });
    expect(stderr, `${args.join(' ')}: stderr`).not.toMatch(/Traceback|Error/);
    expect(stdout, `${args.join(' ')}: stdout`).not.toMatch(/failed with error|Traceback/i);
    return stdout;
  }

  test(
    'show connections, then cloud copy from a stopped instance: the file lands, the status bar says finished',
    { timeout: 60_000 },
    async () => {
      const shown = await vast('show', 'connections', '--raw');
      expect(JSON.parse(shown.slice(shown.indexOf('[')))).toEqual([{ id: 1001, name: 'cli-s3', cloud_type: 's3' }]);
      expect(await vast('show', 'connections')).toMatch(/1001\s+cli-s3\s+s3/);

      const offers = JSON.parse(await vast('search', 'offers', 'num_gpus=1', '--limit', '1', '--raw')) as Array<{ id: number }>;
      const created = await vast(
        'create',
        'instance',
        String(offers[0]!.id),
        '--image',
        'x',
        '--disk',
        '10',
        '--onstart-cmd',
        'mkdir -p out; echo result > out/r.txt',
      );
      const id = Number(/'new_contract': (\d+)/.exec(created)![1]);
      clock.now += 10_000;
      await waitUntil(() => sim.history().find((h) => h.id === id)?.onstart?.exit_code === 0);
      expect(await vast('stop', 'instance', String(id))).toContain(`stopping instance ${id}.`);

      // The CLI's default transfer, "Instance to Cloud", is the yaml's "Instance To Cloud" in another case.
      const copied = await vast('cloud', 'copy', '--src', '/root/out', '--dst', 'backup', '--instance', String(id), '--connection', '1001');
      expect(copied).toContain('Cloud Copy Started');
      clock.now += 5_000;
      await waitUntil(() => sim.cloudCopies()[0]?.state === 'finished');
      clock.now += 31_000;
      const row = JSON.parse(await vast('show', 'instance', String(id), '--raw')) as { status_msg: string; actual_status: string };
      expect(row.status_msg.trim()).toBe('Cloud Copy Operation Finished');
      expect(row.actual_status.trim()).toBe('stopped');
      expect(readFileSync(join(home, 'bucket', 'backup', 'r.txt'), 'utf8')).toBe('result\n');
    },
  );
});

async function waitUntil(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 20));
  expect(check()).toBe(true);
}

/** Every string (and key) trimmed, at any depth, as vast-cli's `_strip_strings` (`vastai/api/instances.py`) does to list rows. */
function stripped(value: unknown): unknown {
  if (typeof value === 'string') return value.trim();
  if (Array.isArray(value)) return value.map(stripped);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.trim(), stripped(v)]));
  return value;
}
