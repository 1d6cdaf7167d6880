// The simulator's instances run a real SSH server (ssh-server.ts) on their SSH ports: login as root
// with a key the instance authorizes (the account's at create time, or attached to it), exec as a
// real process in the instance's directory with its env, SFTP on that directory, sshd's lines in
// the container log, and the SSH faults (refused keys, dropped sessions, a changed host key).
import { createHash, randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import ssh2, { type Client as SshClient, type ClientChannel, type SFTPWrapper } from 'ssh2';
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator, SimConfigInput } from '../../../src/sim/index.js';
import { ed25519KeyPair } from '../../../src/sim/ssh-keys.js';
import { call, startTestSim, waitFor } from './helpers.js';

const { Client } = ssh2;

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

interface KeyPair {
  private: string;
  public: string;
}
const newKey = (): KeyPair => ed25519KeyPair();

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

async function logLines(w: World, id: number): Promise<string[]> {
  const url = (await call(w.sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, { tail: '100' })).body.result_url as string;
  w.clock.now += 5_000;
  return (await (await fetch(url)).text()).trimEnd().split('\n');
}

/** Starts a long command; resolves once it has printed its first output, with a promise of its end (code, signal). */
function started(
  client: SshClient,
  command: string,
): Promise<{ first: string; end: Promise<{ code: number | null; signal: string | null }> }> {
  return new Promise((resolve, reject) => {
    client.exec(command, (err, ch) => {
      if (err) return reject(err);
      const end = new Promise<{ code: number | null; signal: string | null }>((done) => {
        let code: number | null = null;
        let signal: string | null = null;
        ch.on('exit', (c: number | null, s?: string) => ((code = c), (signal = s ?? null)));
        ch.on('close', () => done({ code, signal }));
      });
      ch.once('data', (b: Buffer) => resolve({ first: b.toString(), end }));
    });
  });
}

function sftpOf(client: SshClient): Promise<SFTPWrapper> {
  return new Promise((resolve, reject) => client.sftp((err, sftp) => (err ? reject(err) : resolve(sftp))));
}

const sftpCall = <T>(f: (cb: (err: Error | null | undefined, v?: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => f((err, v) => (err ? reject(err) : resolve(v as T))));

function closed(client: SshClient): Promise<void> {
  return new Promise((resolve) => client.once('close', () => resolve()));
}

describe('SSH server: shell and SFTP', () => {
  test('a shell request gives an interactive sh in the instance (with or without a pty)', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { id, proxy } = await running(w);
    const { client } = await login(proxy, key);
    for (const pty of [false, true]) {
      const got = await new Promise<{ out: string; code: number | null }>((resolve, reject) => {
        const open = (err: Error | undefined, ch: ClientChannel) => {
          if (err) return reject(err);
          let out = '';
          let code: number | null = null;
          ch.on('data', (b: Buffer) => (out += b.toString()));
          ch.on('exit', (c: number | null) => (code = c));
          ch.on('close', () => resolve({ out, code }));
          ch.end('echo "in $CONTAINER_ID"\nexit 4\n');
        };
        if (pty) client.shell({ term: 'xterm' }, open);
        else client.shell(false, open);
      });
      expect(got.out).toContain(`in ${id}\n`);
      expect(got.code).toBe(4);
    }
    client.end();
  });

  test('SFTP: a 1 MB file put then got is byte-identical, lands in the instance directory, and paths never leave it', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { proxy } = await running(w);
    const { client } = await login(proxy, key);
    const sftp = await sftpOf(client);
    const data = randomBytes(1024 * 1024);
    await sftpCall<void>((cb) => sftp.writeFile('/root/big.bin', data, cb));
    expect((await sftpCall<Buffer>((cb) => sftp.readFile('/workspace/big.bin', cb))).equals(data)).toBe(true);
    expect((await exec(client, 'wc -c < big.bin')).stdout.trim()).toBe(String(data.length));
    expect(await sftpCall<string>((cb) => sftp.realpath('.', cb))).toBe('/root');

    // `..` stops at the container's /: nothing of the machine's is read or written.
    await expect(sftpCall<Buffer>((cb) => sftp.readFile('../../etc/passwd', cb))).rejects.toThrow(/No such file/);
    await expect(sftpCall<Buffer>((cb) => sftp.readFile('/root/../../../../etc/hostname', cb))).rejects.toThrow(/No such file/);
    const name = `berth-escape-${process.pid}-${Date.now()}`;
    await sftpCall<void>((cb) => sftp.writeFile(`../../${name}`, 'x', cb));
    expect((await exec(client, `cat ${name}`)).stdout).toBe('x');
    await expect(sftpCall<Buffer>((cb) => sftp.readFile(`/${name}`, cb))).resolves.toEqual(Buffer.from('x'));
    // A link made inside that leads outside is refused.
    await exec(client, 'ln -s /etc etc-link');
    await expect(sftpCall<Buffer>((cb) => sftp.readFile('etc-link/passwd', cb))).rejects.toThrow(/Permission denied/);
    await expect(sftpCall<unknown>((cb) => sftp.readdir('etc-link', cb))).rejects.toThrow(/Permission denied/);

    // Attributes set through a handle and by path.
    await sftpCall<void>((cb) => sftp.writeFile('attrs.txt', 'abcdefghijklmnop', cb));
    const handle = await sftpCall<Buffer>((cb) => sftp.open('attrs.txt', 'r+', cb));
    await sftpCall<void>((cb) => sftp.fsetstat(handle, { size: 10 }, cb));
    await sftpCall<void>((cb) => sftp.fchmod(handle, 0o600, cb));
    const fst = await sftpCall<{ size: number; mode: number }>((cb) => sftp.fstat(handle, cb));
    expect([fst.size, fst.mode & 0o777]).toEqual([10, 0o600]);
    await sftpCall<void>((cb) => sftp.close(handle, cb));
    await sftpCall<void>((cb) => sftp.chmod('attrs.txt', 0o640, cb));
    expect((await sftpCall<{ mode: number }>((cb) => sftp.stat('attrs.txt', cb))).mode & 0o777).toBe(0o640);

    // The directory operations.
    await sftpCall<void>((cb) => sftp.mkdir('sub', cb));
    await sftpCall<void>((cb) => sftp.rename('big.bin', 'sub/moved.bin', cb));
    const listed = await sftpCall<Array<{ filename: string }>>((cb) => sftp.readdir('sub', cb));
    expect(listed.map((e) => e.filename).filter((n) => !n.startsWith('.'))).toEqual(['moved.bin']);
    expect((await sftpCall<{ size: number }>((cb) => sftp.stat('sub/moved.bin', cb))).size).toBe(data.length);
    await sftpCall<void>((cb) => sftp.unlink('sub/moved.bin', cb));
    await sftpCall<void>((cb) => sftp.rmdir('sub', cb));
    await expect(sftpCall<unknown>((cb) => sftp.stat('sub', cb))).rejects.toThrow(/No such file/);
    client.end();
  });
});

describe('SSH server: host key, log lines, faults, and its end', () => {
  test('the host key stays across a stop and a start, and differs after the host-key fault', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { id, proxy } = await running(w);
    const first = await login(proxy, key);
    first.client.end();
    await call(w.sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    await call(w.sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' });
    w.clock.now += 100_000;
    expect((await call(w.sim, 'GET', `/api/v0/instances/${id}/`)).body.instances.actual_status).toBe('running');
    const again = await login(proxy, key);
    again.client.end();
    expect(again.hostKey).toBe(first.hostKey);

    expect((await call(w.sim, 'POST', `/_sim/instances/${id}/ssh/host-key`)).body).toEqual({ success: true });
    const changed = await login(proxy, key);
    changed.client.end();
    expect(changed.hostKey).not.toBe(first.hostKey);
  });

  test('a recycle gives a fresh container on the same ports: a new host key, and a file written before is gone; the quirk keeps the key', async () => {
    const key = newKey();
    for (const keeps of [false, true]) {
      const w = await fresh({ quirks: { recycle_keeps_host_key: keeps } }, [key.public]);
      const { id, proxy, direct } = await running(w);
      const first = await login(proxy, key);
      expect((await exec(first.client, 'echo kept > left-behind && ls')).stdout).toBe('left-behind\n');
      first.client.end();
      expect((await call(w.sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).body).toEqual({ success: true });
      w.clock.now += 300_000; // recycle_s 10 + boot_s 200
      const rec = (await call(w.sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
      expect([rec.actual_status, rec.ssh_port, Number(rec.ports['22/tcp'][0].HostPort)]).toEqual(['running', proxy, direct]);
      const after = await login(proxy, key);
      expect((await exec(after.client, 'ls -A | wc -l')).stdout.trim()).toBe('0');
      after.client.end();
      if (keeps) expect(after.hostKey).toBe(first.hostKey);
      else expect(after.hostKey).not.toBe(first.hostKey);
    }
  });

  test("each connection adds sshd's lines to the container log: accepted, refused, disconnected", async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { id, proxy } = await running(w);
    const before = (await logLines(w, id)).length;
    const { client } = await login(proxy, key);
    await exec(client, 'true');
    const gone = closed(client);
    client.end();
    await gone;
    await expect(login(proxy, newKey())).rejects.toThrow(/authentication methods failed/);
    const lines = await waitFor(
      async () => {
        const got = (await logLines(w, id)).slice(before);
        return got.length >= 5 ? got : undefined;
      },
      3000,
      "sshd's lines",
    );
    const port = String.raw`127\.0\.0\.1 port \d+`;
    const key256 = String.raw`ED25519 SHA256:[A-Za-z0-9+/]{43}`;
    expect(lines).toEqual([
      expect.stringMatching(new RegExp(`^Accepted publickey for root from ${port} ssh2: ${key256}$`)),
      expect.stringMatching(new RegExp(`^Received disconnect from ${port}:11: disconnected by user$`)),
      expect.stringMatching(new RegExp(`^Disconnected from user root ${port}$`)),
      expect.stringMatching(new RegExp(`^Failed publickey for root from ${port} ssh2: ${key256}$`)),
      expect.stringMatching(new RegExp(`^Connection closed by authenticating user root ${port} \\[preauth\\]$`)),
    ]);
  });

  test("a live log only grows at its end: sshd's lines written as they happen, the onstart's output among them by its moments", async () => {
    const key = newKey();
    const w = await fresh({ onstart_exec: { enabled: true, timeout_s: 60 } }, [key.public]);
    const { id, proxy } = await running(w, {
      onstart:
        'echo first; while [ ! -f go ]; do sleep 0.05; done; echo second; while [ ! -f go2 ]; do sleep 0.05; done; echo third; sleep 30',
    });
    await waitFor(async () => ((await logLines(w, id)).includes('first') ? true : undefined), 5000, 'the first line');
    // A session stays open across both reads; another comes and goes, and the onstart prints, in between.
    const held = await login(proxy, key);
    w.clock.now += 1_000;
    const other = await login(proxy, key);
    w.clock.now += 1_000;
    await exec(other.client, 'touch go');
    const otherGone = closed(other.client);
    other.client.end();
    await otherGone;
    const first = await waitFor(
      async () => {
        const got = await logLines(w, id);
        return got.includes('second') && got.some((l) => l.startsWith('Disconnected from user root')) ? got : undefined;
      },
      5000,
      'the second line and the other session ended',
    );
    w.clock.now += 1_000;
    await exec(held.client, 'touch go2');
    await waitFor(async () => ((await logLines(w, id)).includes('third') ? true : undefined), 5000, 'the third line');
    w.clock.now += 1_000;
    const heldGone = closed(held.client);
    held.client.end();
    await heldGone;
    const second = await waitFor(
      async () => {
        const got = await logLines(w, id);
        return got.length >= first.length + 3 ? got : undefined;
      },
      5000,
      "the held session's end",
    );
    expect(second.slice(0, first.length)).toEqual(first);
    expect(second.slice(first.length)).toEqual([
      'third',
      expect.stringMatching(/^Received disconnect from 127\.0\.0\.1 port \d+:11: disconnected by user$/),
      expect.stringMatching(/^Disconnected from user root 127\.0\.0\.1 port \d+$/),
    ]);
    // The held session's login is in the first read, before the other's.
    expect(first.filter((l) => l.startsWith('Accepted publickey'))).toHaveLength(2);
  });

  test('the refused-key fault: one instance (admin route), then every instance (faults.ssh_refuse_keys), refuses every key', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const a = await running(w);
    const b = await running(w);
    expect((await call(w.sim, 'PUT', `/_sim/instances/${a.id}/ssh/refuse-keys`, { refuse: true })).body).toEqual({
      success: true,
      refuse: true,
    });
    await expect(login(a.proxy, key)).rejects.toThrow(/authentication methods failed/);
    (await login(b.proxy, key)).client.end();
    await call(w.sim, 'PUT', `/_sim/instances/${a.id}/ssh/refuse-keys`, { refuse: false });
    (await login(a.proxy, key)).client.end();
    await call(w.sim, 'PUT', '/_sim/faults', { ssh_refuse_keys: true });
    await expect(login(b.proxy, key)).rejects.toThrow(/authentication methods failed/);
  });

  test('the dropped-session fault ends an open session: by the admin route, and after faults.ssh_drop_after_ms', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { id, proxy, direct } = await running(w);
    const one = await login(proxy, key);
    const two = await login(direct, key);
    const ends = Promise.all([closed(one.client), closed(two.client)]);
    const ran = await started(one.client, 'echo up; sleep 30');
    expect((await call(w.sim, 'POST', `/_sim/instances/${id}/ssh/drop`)).body).toEqual({ success: true, listening: true });
    await ends;
    await expect(ran.end).resolves.toEqual({ code: null, signal: null });
    // It goes on listening: a new login works, until the timed drop cuts it.
    w.sim.setFaults({ ssh_drop_after_ms: 100 });
    const three = await login(proxy, key);
    await closed(three.client);
  });

  test("a destroy closes the instance's servers, cuts its sessions and kills their processes", async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { id, proxy, direct } = await running(w);
    const { client } = await login(proxy, key);
    const gone = closed(client);
    const pid = Number((await started(client, 'echo $$; exec sleep 30')).first.trim());
    expect(alive(pid)).toBe(true);
    await call(w.sim, 'DELETE', `/api/v0/instances/${id}/`);
    await gone;
    await waitFor(() => (alive(pid) ? undefined : true), 3000, 'the session process to die');
    for (const port of [proxy, direct]) await expect(login(port, key)).rejects.toThrow(/ECONNREFUSED/);
  });

  test('the simulator closes with sessions open: every server and process ends', async () => {
    const key = newKey();
    const w = await fresh({}, [key.public]);
    const { proxy } = await running(w);
    const { client } = await login(proxy, key);
    const gone = closed(client);
    await started(client, 'echo up; sleep 30');
    await w.sim.close();
    await gone;
    await expect(login(proxy, key)).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('instance SSH keys routes', () => {
  test('attach, show and detach an instance key as the docs answer them; unknown instances and keys are 404', async () => {
    const accountKey = newKey();
    const w = await fresh({}, [accountKey.public]);
    const { id, proxy } = await running(w);
    const extra = newKey();
    await call(w.sim, 'POST', `/api/v0/instances/${id}/ssh/`, { ssh_key: extra.public });
    const shown = await call(w.sim, 'GET', `/api/v0/instances/${id}/ssh/`);
    expect(shown.body.success).toBe(true);
    const keys = JSON.parse(shown.body.ssh_keys as string) as Array<{ id: number; public_key: string }>;
    expect(keys.map((k) => k.public_key)).toEqual([accountKey.public, extra.public]);
    const extraId = keys[1]!.id;
    expect((await call(w.sim, 'DELETE', `/api/v0/instances/${id}/ssh/${extraId}/`)).body).toEqual({
      success: true,
      msg: 'SSH key removed from instance.',
    });
    await expect(login(proxy, extra)).rejects.toThrow(/authentication methods failed/);
    (await login(proxy, accountKey)).client.end();
    expect((await call(w.sim, 'DELETE', `/api/v0/instances/${id}/ssh/${extraId}/`)).body.error).toBe('no_such_ssh_key');
    expect((await call(w.sim, 'POST', `/api/v0/instances/${id}/ssh/`, {})).body.error).toBe('no_ssh_key');
    const none = await call(w.sim, 'GET', '/api/v0/instances/1/ssh/');
    expect(none).toMatchObject({ status: 404, body: { error: 'no_such_instance' } });
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
