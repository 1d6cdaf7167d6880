// The simulator's instances run a real SSH server (ssh-server.ts) on their SSH ports: login as root
// with a key the instance authorizes (the account's at create time, or attached to it), exec as a
// real process in the instance's directory with its env, SFTP on that directory, sshd's lines in
// the container log, and the SSH faults (refused keys, dropped sessions, a changed host key).
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import ssh2, { type Client as SshClient, type ClientChannel } from 'ssh2';
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator, SimConfigInput } from '../../../src/sim/index.js';
import { call, startTestSim, waitFor } from './helpers.js';

const { Client, utils } = ssh2;

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

interface KeyPair {
  private: string;
  public: string;
}
const newKey = (): KeyPair => utils.generateKeyPairSync('ed25519');

/** A simulator on a manual clock: an instance runs once the test moves time 300 s on. */
async function fresh(config: SimConfigInput = {}, accountKeys: string[] = []) {
  const clock = { now: 1_000_000 };
  const sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: {
      ssh_listeners: { enabled: true, hold_ms: 5_000 },
      lifecycle: { provision_s: 100, boot_s: { min: 200, max: 200 }, restart_s: 100 },
      account: { ssh_keys: accountKeys },
      ...config,
    },
  });
  sims.push(sim);
  return { sim, clock };
}

type World = Awaited<ReturnType<typeof fresh>>;

/** A running instance (direct SSH on an offer with direct ports) and its two SSH ports. */
async function running(w: World, body: Record<string, unknown> = {}) {
  const offer = (await call(w.sim, 'POST', '/api/v0/bundles/', { direct_port_count: { gte: 1 }, limit: 1 })).body.offers[0];
  const created = await call(w.sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', runtype: 'ssh_direc ssh_proxy', ...body });
  const id = created.body.new_contract as number;
  w.clock.now += 300_000;
  const rec = (await call(w.sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
  expect(rec.actual_status).toBe('running');
  return { id, proxy: rec.ssh_port as number, direct: Number(rec.ports['22/tcp'][0].HostPort) };
}

interface Login {
  client: SshClient;
  hostKey: string;
}

/** Logs in as root with `key`; rejects with the client's error (a refused key: "All configured authentication methods failed"). */
function login(port: number, key: KeyPair, username = 'root'): Promise<Login> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    let hostKey = '';
    client.on('ready', () => resolve({ client, hostKey }));
    client.on('error', (e) => {
      client.end();
      reject(e);
    });
    client.connect({
      host: '127.0.0.1',
      port,
      username,
      privateKey: key.private,
      hostVerifier: (k: Buffer) => {
        hostKey = createHash('sha256').update(k).digest('base64');
        return true;
      },
    });
  });
}

interface Ran {
  stdout: string;
  stderr: string;
  code: number | null;
  signal: string | null;
}

function exec(client: SshClient, command: string, env?: Record<string, string>): Promise<Ran> {
  return new Promise((resolve, reject) => {
    client.exec(command, env ? { env } : {}, (err, ch: ClientChannel) => {
      if (err) return reject(err);
      let stdout = '';
      let stderr = '';
      let code: number | null = null;
      let signal: string | null = null;
      ch.on('data', (b: Buffer) => (stdout += b.toString()));
      ch.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      ch.on('exit', (c: number | null, s?: string) => {
        code = c;
        signal = s ?? null;
      });
      ch.on('close', () => resolve({ stdout, stderr, code, signal }));
    });
  });
}

describe('SSH server: login and exec', () => {
  test("an account key registered before the create logs in as root at both ports; exec('echo hi') gives hi and exit 0", async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { proxy, direct } = await running(w);
    for (const port of [proxy, direct]) {
      const { client } = await login(port, key);
      expect(await exec(client, 'echo hi')).toEqual({ stdout: 'hi\n', stderr: '', code: 0, signal: null });
      client.end();
    }
  });

  test('a plain TCP client still reads the banner line at once (the daemon probe)', async () => {
    const w = await fresh();
    const { proxy } = await running(w);
    const line = await new Promise<string>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port: proxy });
      let data = '';
      s.on('data', (b) => {
        data += b.toString('latin1');
        if (data.includes('\n')) {
          s.destroy();
          resolve(data.slice(0, data.indexOf('\n') + 1));
        }
      });
      s.on('error', reject);
    });
    expect(line).toBe('SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10\r\n');
  });

  test('a key added to the account after the create is refused, and logs in once attached to that instance', async () => {
    const w = await fresh();
    const { id, proxy } = await running(w);
    const key = newKey();
    expect((await call(w.sim, 'POST', '/api/v0/ssh/', { ssh_key: key.public })).status).toBe(200);
    await expect(login(proxy, key)).rejects.toThrow(/authentication methods failed/);
    const attached = await call(w.sim, 'POST', `/api/v0/instances/${id}/ssh/`, { ssh_key: key.public });
    expect(attached.body).toEqual({ success: true, msg: 'SSH key attached successfully' });
    const { client } = await login(proxy, key);
    expect((await exec(client, 'echo ok')).stdout).toBe('ok\n');
    client.end();
  });

  test('an unknown key is refused; so is any user but root', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { proxy } = await running(w);
    await expect(login(proxy, newKey())).rejects.toThrow(/authentication methods failed/);
    await expect(login(proxy, key, 'ubuntu')).rejects.toThrow(/authentication methods failed/);
  });

  test('exec sees the instance env and a file its onstart wrote, runs in its directory, and other exit codes come back', async () => {
    const key = newKey();
    const w = await fresh({ onstart_exec: { enabled: true, timeout_s: 5 } }, [key.public]);
    const { id, proxy } = await running(w, { env: { MY_VAR: 'from-env' }, onstart: 'echo written-by-onstart > marker.txt' });
    await waitFor(() => w.sim.history().find((h) => h.id === id)?.onstart ?? undefined, 5000, 'onstart to end');
    const { client } = await login(proxy, key);
    const r = await exec(client, 'echo "$MY_VAR $CONTAINER_ID"; cat marker.txt; test "$PWD" = "$HOME" && echo home');
    expect(r).toMatchObject({ stdout: `from-env ${id}\nwritten-by-onstart\nhome\n`, code: 0 });
    expect(await exec(client, 'echo oops >&2; exit 3')).toEqual({ stdout: '', stderr: 'oops\n', code: 3, signal: null });
    expect((await exec(client, 'echo "$SESSION_VAR"', { SESSION_VAR: 'set' })).stdout).toBe('set\n');
    client.end();
  });
});
