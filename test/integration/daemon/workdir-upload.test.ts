// One workdir upload (src/daemon/task-files/workdir-upload.ts, issue #40) into a simulator
// instance over a real login (src/ssh/session.ts), both ways: the image's tar, and, in an image
// whose PATH has no tar, file by file over SFTP. Either way the files land in the task's directory
// (/root/workdir: the instance's directory, as the wrapper and SFTP name it) and the ready-file holds
// the hash; a second upload finds it there.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTcpRelay } from '../../../bench/tcp-relay.js';
import { packWorkdir } from '../../../src/cli/workdir-pack.js';
import { uploadWorkdir } from '../../../src/daemon/task-files/workdir-upload.js';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { pathWithout } from '../../../src/sim/container-path.js';
import { loadLoginKey, type BerthKey } from '../../../src/ssh/key-pair.js';
import { openSshSession, type SshSession } from '../../../src/ssh/session.js';
import { call, startTestSim } from '../sim/helpers.js';

const scratch = mkdtempSync(join(tmpdir(), 'berth-upload-'));
// The instances' processes may run as another user (the simulator as root runs them as nobody): they reach the bin dir.
chmodSync(scratch, 0o755);
const sims: RunningSimulator[] = [];
const sessions: SshSession[] = [];
afterAll(async () => {
  sessions.forEach((s) => s.close());
  await Promise.all(sims.map((s) => s.close()));
  rmSync(scratch, { recursive: true, force: true });
});

/** A running instance of a simulator whose containers get `path`: its direct SSH port, and berth's key. */
async function instance(path: string) {
  const key = loadLoginKey({ home: mkdtempSync(join(scratch, 'home-')) });
  const clock = { now: 1_000_000 };
  const sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: {
      ssh_listeners: { enabled: true, hold_ms: 5_000 },
      lifecycle: { provision_s: 100, boot_s: { min: 200, max: 200 }, restart_s: 100 },
      account: { ssh_keys: [key.publicLine] },
      onstart_exec: { enabled: true, path },
    },
  });
  sims.push(sim);
  const offer = (await call(sim, 'POST', '/api/v0/bundles/', { direct_port_count: { gte: 1 }, limit: 1 })).body.offers[0];
  const created = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', runtype: 'ssh_direc ssh_proxy' });
  clock.now += 300_000;
  const rec = (await call(sim, 'GET', `/api/v0/instances/${created.body.new_contract}/`)).body.instances;
  return { port: Number(rec.ports['22/tcp'][0].HostPort), key };
}

async function login(port: number, key: Pick<BerthKey, 'privateKey'>): Promise<SshSession> {
  const session = await openSshSession({ endpoints: [{ kind: 'direct', host: '127.0.0.1', port }], key, verifyHostKey: () => true });
  sessions.push(session);
  return session;
}

/** A running instance, logged in to with berth's key. */
async function loggedIn(path: string): Promise<SshSession> {
  const { port, key } = await instance(path);
  return login(port, key);
}

async function packed() {
  const dir = mkdtempSync(join(scratch, 'code-'));
  mkdirSync(join(dir, 'lib', 'empty'), { recursive: true });
  writeFileSync(join(dir, 'train.py'), 'print("trained")\n');
  writeFileSync(join(dir, 'run.sh'), 'echo run\n', { mode: 0o755 });
  writeFileSync(join(dir, 'lib', 'util.py'), 'X = 1\n');
  symlinkSync('train.py', join(dir, 'main.py'));
  const p = await packWorkdir(dir, 10);
  return { dir: '/root/workdir', sha256: p.sha256, archive: p.archive };
}

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** What landed, read over SFTP (relative paths start at root's home, where /root/workdir is). */
async function landed(s: SshSession): Promise<string> {
  const sftp = await s.sftp();
  const read = (p: string) => new Promise<string>((res, rej) => sftp.readFile(p, (e, b) => (e ? rej(e) : res(b.toString()))));
  const list = (p: string) =>
    new Promise<string>((res, rej) =>
      sftp.readdir(p, (e, l) =>
        e
          ? rej(e)
          : res(
              l
                .map((x) => x.filename)
                .sort()
                .join('\n') + '\n',
            ),
      ),
    );
  const mode = (p: string) => new Promise<number>((res, rej) => sftp.stat(p, (e, st) => (e ? rej(e) : res(st.mode))));
  try {
    const texts = await Promise.all(['train.py', 'lib/util.py', '.berth-ready', 'main.py'].map((f) => read(`workdir/${f}`)));
    const executable = ((await mode('workdir/run.sh')) & 0o100) !== 0 ? 'executable' : 'not executable';
    return texts.join('') + (await list('workdir')) + (await list('workdir/lib')) + executable;
  } finally {
    sftp.end();
  }
}

describe('uploadWorkdir into a simulator instance', () => {
  it.each([
    ['tar', PATH],
    ['sftp', 'no tar'],
  ] as const)('over %s: the files, the links and modes, then the ready-file holding the hash', async (method, path) => {
    const session = await loggedIn(path === 'no tar' ? pathWithout(scratch, PATH, ['tar']) : path);
    const up = await packed();
    await expect(uploadWorkdir(session, up, new AbortController().signal)).resolves.toBe(method);
    const out = await landed(session);
    // main.py: a link to train.py (its content read through it, or its copy where SFTP has no links).
    expect(out).toContain(`print("trained")\nX = 1\n${up.sha256}\nprint("trained")\n`);
    expect(out).toContain('.berth-ready\nlib\nmain.py\nrun.sh\ntrain.py\n');
    expect(out).toContain('empty\nutil.py\nexecutable');
    // A second upload (a restarted daemon) finds it there and sends nothing. (Not checked without
    // tar: the test's private temp dir keeps the instance's processes, run as nobody, out of that
    // image's bin dir, so its shell commands cannot run there.)
    if (method === 'tar') await expect(uploadWorkdir(session, up, new AbortController().signal)).resolves.toBe('present');
  });

  it('goes on after a cut from the bytes the container has, on the next login', async () => {
    const { port, key } = await instance(PATH);
    const relay = await startTcpRelay({ host: '127.0.0.1', port });
    try {
      const dir = mkdtempSync(join(scratch, 'big-'));
      writeFileSync(join(dir, 'weights.bin'), randomBytes(12 * 1024 * 1024)); // incompressible: 12 MiB on the wire
      const p = await packWorkdir(dir, 100);
      const up = { dir: '/root/workdir', sha256: p.sha256, archive: p.archive };
      relay.cutAfter(8 * 1024 * 1024);
      await expect(uploadWorkdir(await login(relay.port, key), up, new AbortController().signal)).rejects.toMatchObject({
        code: 'ssh_dropped',
        retryable: true,
      });
      const first = relay.upBytes;
      await expect(uploadWorkdir(await login(relay.port, key), up, new AbortController().signal)).resolves.toBe('tar');
      // The second try sent what the first had not, and the overlap: not the archive again.
      expect(relay.upBytes - first).toBeLessThan(p.archive.length - 8 * 1024 * 1024 + 3 * 1024 * 1024);
      const session = await login(port, key);
      const got = await session.exec('cd "$HOME/workdir" && sha256sum weights.bin && ls -a "$HOME"');
      expect(got.stdout).toContain(
        createHash('sha256')
          .update(readFileSync(join(dir, 'weights.bin')))
          .digest('hex'),
      );
      expect(got.stdout).not.toContain('.berth-workdir-'); // the archive deleted once unpacked
    } finally {
      await relay.close();
    }
  });

  it('refuses an archive that does not match its hash, and sends nothing', async () => {
    const up = await packed();
    const session = { exec: () => Promise.reject(new Error('nothing may be sent')), sftp: () => Promise.reject(new Error('no')) };
    await expect(uploadWorkdir(session, { ...up, sha256: 'f'.repeat(64) }, new AbortController().signal)).rejects.toMatchObject({
      code: 'store',
    });
  });
});
