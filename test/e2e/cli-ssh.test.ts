// `berth ssh` as a user runs it: the built CLI against a spawned daemon and the simulator, whose
// instances run a real sshd. The daemon puts berth's key on the account at its start; the instance
// created afterwards takes it; `berth ssh` logs in with it. Also: the private key never shows in
// the daemon's log or in anything the CLI prints.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/package-path.js';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { berthKeyPath, loadLoginKey } from '../../src/ssh/key-pair.js';
import type { Run } from '../../src/wire/control-api.js';
import { berth, userEnv, type CliResult } from '../helpers/berth-cli.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { loginKeyOnAccount } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM } from '../helpers/world.js';

let sim: RunningSimulator;
let daemon: DaemonProcess;
let home: string;
let env: NodeJS.ProcessEnv;
let run: Run;
const outputs: CliResult[] = [];

const spec = {
  name: 'ssh-e2e',
  image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
  disk_gb: 20,
  search: { filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
  max_price_per_hour: 5,
  max_attempts: 4,
  boot_timeout_s: 5,
  deadline_s: 60,
  relax: [],
};

async function cli(args: string[]): Promise<CliResult> {
  const r = await berth(args, env);
  outputs.push(r);
  return r;
}

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, config: FAST_SIM });
  home = mkdtempSync(join(tmpdir(), 'berth-ssh-'));
  daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  env = userEnv(home);
  // The daemon makes berth's key and adds it to the account in its background start.
  await loginKeyOnAccount(sim, home);
}, 60_000);

afterAll(async () => {
  if (daemon?.proc.exitCode === null) await daemon.kill9();
  await sim?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('berth ssh', () => {
  it('runs a command on the instance of a run: `berth ssh RUN -- echo hi` prints hi and exits 0', async () => {
    const file = join(home, 'spec.json');
    writeFileSync(file, JSON.stringify(spec));
    const submitted = await cli(['submit', file, '--wait', '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    run = JSON.parse(submitted.stdout) as Run;
    expect(run.state).toBe('running');

    const r = await cli(['ssh', run.id, '--', 'echo', 'hi']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('hi\n');
    expect(r.code).toBe(0);
  });

  it("exits with the command's exit code, and passes its stderr through", async () => {
    const r = await cli(['ssh', 'ssh-e2e', '--', 'echo oops >&2; exit 7']);
    expect(r.stderr).toBe('oops\n');
    expect(r.code).toBe(7);
  });

  it('--print prints the ssh command, which logs in with OpenSSH as printed', async () => {
    const r = await cli(['ssh', run.id, '--print', '--', 'echo', 'from openssh']);
    expect(r.code).toBe(0);
    const direct = run.instance!.ssh.find((e) => e.kind === 'direct')!;
    expect(r.stdout).toBe(`ssh -i ${berthKeyPath(home)} -p ${direct.port} root@${direct.host} 'echo from openssh'\n`);
    // The printed words, given to the real ssh (with options that keep the test's known_hosts out of it).
    const words = ['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR'];
    const [, ...printed] = r.stdout
      .trim()
      .replace(/'echo from openssh'$/, '')
      .trim()
      .split(' ');
    const out = await new Promise<string>((resolve, reject) =>
      execFile('ssh', [...words, ...printed, 'echo from openssh'], { timeout: 15_000 }, (err, stdout) =>
        err ? reject(err) : resolve(stdout),
      ),
    );
    expect(out).toBe('from openssh\n');
  });

  it("ssh-config --write: OpenSSH reaches the instance by the host name it wrote, with berth's key, and a second write replaces the block", async () => {
    const userHome = mkdtempSync(join(tmpdir(), 'berth-ssh-user-'));
    try {
      const withHome = { ...env, HOME: userHome };
      const printed = await berth(['ssh-config', run.id], withHome);
      expect(printed.code, printed.stderr).toBe(0);
      expect(printed.stdout).toContain(`Host berth-${run.id} berth-ssh-e2e\n`);
      for (let i = 0; i < 2; i++) {
        const w = await berth(['ssh-config', 'ssh-e2e', '--write'], withHome);
        expect(w.code, w.stderr).toBe(0);
      }
      const userConfig = readFileSync(join(userHome, '.ssh', 'config'), 'utf8');
      expect(userConfig.match(/^Include /gm)).toHaveLength(1);
      const berthConfig = readFileSync(join(home, 'ssh', 'config'), 'utf8');
      expect(berthConfig.match(/^Host /gm)).toHaveLength(1);
      // OpenSSH reads the user's config as written (-F: it takes the real user's home, not $HOME).
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          'ssh',
          ['-F', join(userHome, '.ssh', 'config'), '-o', 'BatchMode=yes', '-o', 'LogLevel=ERROR', 'berth-ssh-e2e', 'echo by name'],
          { timeout: 15_000 },
          (err, stdout, stderr) => (err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(stdout)),
        ),
      );
      expect(out).toBe('by name\n');
      // The instance's host key, trusted at that first login, is kept for it alone.
      expect(readFileSync(join(home, 'ssh', 'known_hosts.d', String(run.instance!.id)), 'utf8')).toMatch(/ssh-/);
    } finally {
      rmSync(userHome, { recursive: true, force: true });
    }
  });

  it('without a command opens a shell, which reads input that is not a terminal', async () => {
    const proc = spawn(process.execPath, [packagePath('bin', 'berth.js'), 'ssh', run.id], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    proc.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    proc.stdin.end('echo "in the shell as $(id -un 2>/dev/null || echo root)"; exit 3\n');
    const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
    expect(stdout).toContain('in the shell as');
    expect(code).toBe(3);
  });

  it("doctor, asked through the daemon, finds berth's key on the account, and fails with the fix once the key file is 0644", async () => {
    const ok = await cli(['doctor', '--json']);
    const checks = (JSON.parse(ok.stdout) as { checks: Array<{ name: string; ok: boolean; message: string }> }).checks;
    expect(checks.find((c) => c.name === 'ssh_key')).toMatchObject({
      ok: true,
      message: expect.stringMatching(/is usable and on the account$/),
    });
    chmodSync(berthKeyPath(home), 0o644);
    try {
      const bad = await cli(['doctor']);
      expect(bad.code).toBe(1);
      expect(bad.stdout).toContain(`is readable by others (mode 0644): run: chmod 600 ${berthKeyPath(home)}.`);
    } finally {
      chmodSync(berthKeyPath(home), 0o600);
    }
  });

  it('refuses a host whose key changed since its first login (#49): nothing runs there, and it says why', async () => {
    // The earlier logins pinned the instance's key in BERTH_HOME/ssh/host_pins.json.
    const pins = JSON.parse(readFileSync(join(home, 'ssh', 'host_pins.json'), 'utf8')) as Record<string, string>;
    expect(Object.keys(pins)).toEqual([String(run.instance!.id)]);
    // Its sshd starts again with a new host key (as another machine behind the same address would have).
    expect(sim.sshChangeHostKey(run.instance!.id)).toBe(true);
    const r = await cli(['ssh', run.id, '--', 'echo', 'should not run']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/SSH host key of .* is not the one pinned for this instance at its first login: berth does not log in/);
    // The pin stands: the next try is refused the same way.
    expect(JSON.parse(readFileSync(join(home, 'ssh', 'host_pins.json'), 'utf8'))).toEqual(pins);
  });

  it('a session cut because the run gave up its instance says so, and exits non-zero', async () => {
    // The test before changed the instance's host key: the pins start anew, as for a new instance.
    rmSync(join(home, 'ssh', 'host_pins.json'), { force: true });
    const proc = spawn(process.execPath, [packagePath('bin', 'berth.js'), 'ssh', run.id, '--', 'echo in; sleep 30'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once('exit', resolve));
    const until = Date.now() + 15_000;
    while (!stdout.includes('in') && proc.exitCode === null && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(stdout, stderr).toContain('in');
    expect((await cli(['cancel', run.id, '--wait'])).code).toBe(0);
    const code = await exited;
    expect(code).not.toBe(0);
    expect(stderr).toContain(`The SSH session ended: run ${run.id} was cancelled, and berth gave up its instance ${run.instance!.id}`);
  });

  it('says why and exits 1 for a run that holds no instance', async () => {
    expect((await cli(['cancel', run.id, '--wait'])).code).toBe(0);
    const r = await cli(['ssh', run.id, '--', 'echo', 'hi']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^Run \S+ cannot be logged in to: it holds no instance now \(state cancelled\)\.\n$/);
  });

  it("the private key's body appears in no daemon log line, control API answer or anything the CLI printed", async () => {
    const body = readFileSync(berthKeyPath(home), 'utf8')
      .split('\n')
      .filter((l) => l && !l.startsWith('-----'))
      .join('');
    expect(body.length).toBeGreaterThan(100);
    const log = readFileSync(join(home, 'daemon.log'), 'utf8');
    expect(log).toContain('berth'); // the log is there and read
    // What the API and the dashboard show: the run, its events, the account checks (which name the key).
    const answers = await Promise.all(
      [`/v1/runs/${run.id}`, `/v1/runs/${run.id}/events`, '/v1/account/checks', '/v1/account'].map(async (path) => {
        const r = await daemon.api('GET', path);
        expect(r.status, path).toBe(200);
        return JSON.stringify(r.body);
      }),
    );
    expect(answers[2]).toContain(loadLoginKey({ home }).fingerprint);
    for (const text of [log, ...answers, ...outputs.flatMap((o) => [o.stdout, o.stderr])]) {
      for (const line of readFileSync(berthKeyPath(home), 'utf8')
        .split('\n')
        .filter((l) => l.length > 20 && !l.startsWith('-----')))
        expect(text).not.toContain(line);
      expect(text).not.toContain(body.slice(0, 40));
    }
  });
});
