// The `berth` command line as a user runs it: the built CLI spawned as a process, against a real
// daemon process and the simulator. Asserts what a user sees: exit codes, stdout, stderr.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { berth, berthUntilInterrupted, userEnv } from '../helpers/berth-cli.js';
import { FAST_CONFIG, FAST_SIM } from '../helpers/world.js';

const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-cli-'));
  dirs.push(dir);
  return dir;
}

function writeSpec(dir: string, name: string, spec: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof spec === 'string' ? spec : JSON.stringify(spec, null, 2));
  return file;
}

/** A spec the simulator can satisfy in about a second. */
const goodSpec = {
  name: 'cli-e2e',
  image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
  disk_gb: 20,
  env: { SECRET_VALUE_NAME: 'do-not-print-this-value' },
  search: { filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
  max_price_per_hour: 5,
  max_attempts: 4,
  boot_timeout_s: 5,
  deadline_s: 60,
  relax: [],
};

const RUN_KEYS = [
  'attempt',
  'attempts',
  'cost',
  'created_at',
  'error',
  'gpu',
  'gpu_rented',
  'held',
  'id',
  'instance',
  'name',
  'outputs',
  'outputs_missing',
  'relax_level',
  'state',
  'task',
  'unreadable',
  'updated_at',
  'warm',
];

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('berth without a daemon', () => {
  const dir = tempDir();
  const env = userEnv(join(dir, 'home'));

  it('validate accepts a valid job spec (exit 0)', async () => {
    const r = await berth(['validate', packagePath('examples', 'job.json')], env);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('is a valid job spec');
  });

  it('validate names every problem by its JSON path: wrong type, unknown field, missing image (exit 2)', async () => {
    const { image: _image, ...withoutImage } = goodSpec;
    const file = writeSpec(dir, 'bad.json', { ...withoutImage, disk_gb: 'forty', colour: 'blue' });
    const r = await berth(['validate', file], env);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('bad.json is not a valid job spec (3 problems)');
    expect(r.stderr).toMatch(/\$\.disk_gb: .*number/);
    expect(r.stderr).toMatch(/\$\.colour: unknown field/);
    expect(r.stderr).toMatch(/\$\.image: missing/);
  });

  it('validate refuses a misspelt search field and a string where a number is compared, suggesting the nearest name (exit 2)', async () => {
    const file = writeSpec(dir, 'typo.json', { ...goodSpec, search: { filters: { gpu_nmae: { eq: 'RTX 4090' }, num_gpus: { eq: '1' } } } });
    const r = await berth(['validate', file], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('$.search.filters.gpu_nmae: unknown search field; did you mean gpu_name?');
    expect(r.stderr).toContain('$.search.filters.num_gpus.eq: expected a number, got string');
  });

  it('validate reports a file that is not JSON, and one that does not exist (exit 2)', async () => {
    const notJson = await berth(['validate', writeSpec(dir, 'broken.json', '{"name": ')], env);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/\$: not valid JSON/);
    const missing = await berth(['validate', join(dir, 'nope.json')], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('ENOENT');
  });

  it('schema prints the JSON Schema of a job spec', async () => {
    const r = await berth(['schema'], env);
    expect(r.code).toBe(0);
    const schema = JSON.parse(r.stdout) as { type: string; properties: Record<string, unknown>; required: string[] };
    expect(schema.type).toBe('object');
    expect(schema.properties).toHaveProperty('image');
    expect(schema.properties).toHaveProperty('max_price_per_hour');
    expect(schema.required).toContain('image');
  });

  it('status exits 3 with a hint to start the daemon', async () => {
    const r = await berth(['status'], env);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('start it with `berth daemon`');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('submit of an invalid spec exits 2 before looking for a daemon', async () => {
    const r = await berth(['submit', writeSpec(dir, 'typo.json', { ...goodSpec, max_atempts: 3 })], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('$.max_atempts: unknown field');
  });

  it('bad usage exits 2', async () => {
    expect((await berth(['frobnicate'], env)).code).toBe(2);
    expect((await berth(['submit'], env)).code).toBe(2);
  });

  it('daemon without an API key refuses to start with one sentence (exit 2)', async () => {
    const r = await berth(['daemon', '--listen', '127.0.0.1:0'], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toMatch(/^No marketplace API key: set BERTH_API_KEY/);
  });
});

describe('berth against a daemon and the simulator', () => {
  let sim: RunningSimulator;
  let daemon: DaemonProcess;
  let home: string;
  let env: NodeJS.ProcessEnv;
  const specs = tempDir();

  beforeAll(async () => {
    sim = await startSimulator({ seed: 5, config: FAST_SIM });
    home = tempDir();
    daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
    env = userEnv(home);
  });

  afterAll(async () => {
    if (daemon?.proc.exitCode === null) await daemon.kill9();
    await sim?.close();
  });

  it('submit of an invalid spec exits 2 and stores nothing', async () => {
    const before = JSON.parse((await berth(['status', '--json'], env)).stdout) as unknown[];
    // Well formed, but the service would refuse it on every create: disk under 8 GB, an env value over 256.
    const refused = { ...goodSpec, disk_gb: 4, env: { TOKEN: 'v'.repeat(300) } };
    const r = await berth(['submit', writeSpec(specs, 'bad.json', refused)], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('$.disk_gb');
    expect(r.stderr).toContain('$.env.TOKEN');
    expect(r.stderr).not.toContain('vvvvvv');
    const after = JSON.parse((await berth(['status', '--json'], env)).stdout) as unknown[];
    expect(after).toHaveLength(before.length);
  });

  it('submit --wait --json reaches running; status, events and cancel --wait follow it to cancelled', async () => {
    const file = writeSpec(specs, 'good.json', goodSpec);
    const submitted = await berth(['submit', file, '--wait', '--json'], env);
    expect(submitted.code, submitted.stderr).toBe(0);
    const run = JSON.parse(submitted.stdout) as { id: string; state: string; instance: { ssh_host: string; ssh_port: number } };
    expect(Object.keys(run).sort()).toEqual(RUN_KEYS);
    expect(run.state).toBe('running');
    expect(submitted.stdout).not.toContain('do-not-print-this-value');

    const status = await berth(['status', run.id, '--json'], env);
    expect(status.code).toBe(0);
    const shown = JSON.parse(status.stdout) as typeof run;
    expect(Object.keys(shown).sort()).toEqual(RUN_KEYS);
    expect(shown).toMatchObject({ id: run.id, state: 'running', instance: { ssh_host: run.instance.ssh_host } });

    const detail = await berth(['status', run.id], env);
    expect(detail.stdout).toContain(`ssh -p ${run.instance.ssh_port} root@${run.instance.ssh_host}`);
    expect(detail.stdout).toMatch(/Attempts:\n\s+#\s+OFFER.*\n\s+1\s+\d+.*running/);

    const table = await berth(['status'], env);
    expect(table.stdout).toMatch(new RegExp(`^${run.id}\\s+cli-e2e\\s+running`, 'm'));

    const events = await berth(['events', run.id], env);
    expect(events.code).toBe(0);
    expect(events.stdout.trim().split('\n').length).toBeGreaterThanOrEqual(2);
    const eventsJson = JSON.parse((await berth(['events', run.id, '--json'], env)).stdout) as Array<{ id: number; type: string }>;
    expect(eventsJson.length).toBeGreaterThanOrEqual(2);
    expect(eventsJson.map((e) => e.id)).toEqual([...eventsJson.map((e) => e.id)].sort((a, b) => a - b));

    const cancel = await berth(['cancel', run.id, '--wait'], env);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toContain(`Run ${run.id} is cancelled`);
    const ended = JSON.parse((await berth(['status', run.id, '--json'], env)).stdout) as typeof run;
    expect(ended.state).toBe('cancelled');
    expect(sim.billingNow()).toEqual([]);

    // The log is complete once the run has ended: --follow prints it and returns.
    const followed = await berth(['events', run.id, '--follow', '--json'], env);
    expect(followed.code).toBe(0);
    expect(followed.stdout.trim().split('\n').length).toBeGreaterThan(eventsJson.length);
  });

  it('submit without --wait prints only the run id; status --watch follows it past running until Ctrl-C (non-TTY: one frame per change), exit 0', async () => {
    const r = await berth(['submit', writeSpec(specs, 'good2.json', goodSpec), '--idempotency-key', 'k-1'], env);
    expect(r.code).toBe(0);
    const id = r.stdout.trim();
    expect(id).toMatch(/^\S+$/);
    const again = await berth(['submit', writeSpec(specs, 'good2.json', goodSpec), '--idempotency-key', 'k-1'], env);
    expect(again.stdout.trim()).toBe(id);

    const watched = await berthUntilInterrupted(['status', id, '--watch'], env, /State\s+running/);
    expect(watched.interrupted, 'status --watch ended by itself instead of staying until Ctrl-C').toBe(true);
    expect(watched.code).toBe(0);
    expect(watched.signal).toBeNull();
    expect(watched.stdout).toMatch(/State\s+running/);
    expect((await berth(['cancel', id, '--wait'], env)).code).toBe(0);
  });

  it('runs are named by their names: a second live run of one name is made unique and said; status, events and cancel take the name', async () => {
    const spec = writeSpec(specs, 'named.json', { ...goodSpec, name: 'named-run' });
    const first = await berth(['submit', spec], env);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toBe('');
    const second = await berth(['submit', spec], env);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain('A live run is already named "named-run": this one is named "named-run-2"');
    const byName = JSON.parse((await berth(['status', 'named-run', '--json'], env)).stdout) as { id: string; name: string };
    expect(byName).toMatchObject({ id: first.stdout.trim(), name: 'named-run' });
    const byName2 = JSON.parse((await berth(['status', 'named-run-2', '--json'], env)).stdout) as { id: string };
    expect(byName2.id).toBe(second.stdout.trim());
    const events = await berth(['events', 'named-run-2'], env);
    expect(events.stdout).toContain('named "named-run-2" because a live run is already named "named-run"');
    expect((await berth(['cancel', 'named-run', '--wait'], env)).code).toBe(0);
    expect((await berth(['cancel', 'named-run-2', '--wait'], env)).code).toBe(0);
    // Once ended, a name no longer names a run (ids do): a new live run may take it again.
    const gone = await berth(['status', 'named-run'], env);
    expect(gone.code).toBe(2);
  }, 120_000);

  it('doctor in a terminal with only BERTH_HOME set asks the running daemon, which checks with its own key', async () => {
    const r = await berth(['doctor', '--json'], env);
    const report = JSON.parse(r.stdout) as { via: string; checks: { name: string; ok: boolean }[] };
    expect(report.via).toBe('daemon');
    expect(report.checks.find((c) => c.name === 'key')?.ok).toBe(true);
    // The simulator registers no SSH key, so that one check fails (exit 1), as doctor with the key itself says.
    expect(r.code).toBe(report.checks.every((c) => c.ok) ? 0 : 1);
    expect(r.stdout + r.stderr).not.toContain(sim.apiKey);
  });

  it('status, cancel and events of an unknown run exit 2 naming it', async () => {
    for (const args of [
      ['status', 'no-such-run'],
      ['cancel', 'no-such-run'],
      ['events', 'no-such-run'],
    ]) {
      const r = await berth(args, env);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('no-such-run');
    }
  });

  it('a second daemon on the same BERTH_HOME is refused, naming the other pid (exit 2)', async () => {
    const r = await berth(['daemon', '--listen', '127.0.0.1:0'], userEnv(home, { BERTH_API_URL: sim.url, BERTH_API_KEY: sim.apiKey }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`pid ${daemon.proc.pid}`);
  });

  it('SIGTERM stops the daemon gracefully: exit 0 and daemon.json removed', async () => {
    expect(await daemon.stop()).toBe(0);
    expect(existsSync(join(home, 'daemon.json'))).toBe(false);
    const r = await berth(['status'], env);
    expect(r.code).toBe(3);
  });
});

describe('berth with a daemon whose API key the service rejects', () => {
  let sim: RunningSimulator;
  let daemon: DaemonProcess;
  const home = tempDir();

  beforeAll(async () => {
    sim = await startSimulator({ seed: 6, config: FAST_SIM });
    daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: 'not-the-right-key-at-all', config: FAST_CONFIG });
  });

  afterAll(async () => {
    if (daemon?.proc.exitCode === null) await daemon.kill9();
    await sim?.close();
  });

  it('submit --wait exits 4 and says to check BERTH_API_KEY', async () => {
    const r = await berth(['submit', writeSpec(home, 'job.json', goodSpec), '--wait'], userEnv(home));
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('BERTH_API_KEY');
    expect(r.stderr).not.toContain('not-the-right-key-at-all');
  });
});
