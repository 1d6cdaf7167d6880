// The workdir's ready-file is written after every file of it (issue #49 item 5): the wrapper starts
// the task the moment it reads the right hash there, so a file still on its way would be missing or
// short for the task. Watched from outside the container while uploadWorkdir runs into a simulator
// instance, both ways (the image's tar, and file by file over SFTP in an image without tar): the
// moment the ready-file appears, every file is there, whole.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packWorkdir } from '../../../src/cli/workdir-pack.js';
import { uploadWorkdir } from '../../../src/daemon/task-files/workdir-upload.js';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { pathWithout } from '../../../src/sim/container-path.js';
import { WORKDIR_READY_FILE } from '../../../src/job-spec/task-script.js';
import { loadLoginKey } from '../../../src/ssh/key-pair.js';
import { openSshSession, type SshSession } from '../../../src/ssh/session.js';
import { call, startTestSim } from '../sim/helpers.js';

const scratch = mkdtempSync(join(tmpdir(), 'berth-ready-last-'));
chmodSync(scratch, 0o755);
const sims: RunningSimulator[] = [];
const sessions: SshSession[] = [];
afterAll(async () => {
  sessions.forEach((s) => s.close());
  await Promise.all(sims.map((s) => s.close()));
  rmSync(scratch, { recursive: true, force: true });
});

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A running instance of a simulator whose containers get `path`, logged in to with berth's key. */
async function loggedIn(path: string): Promise<SshSession> {
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
  const session = await openSshSession({
    endpoints: [{ kind: 'direct', host: '127.0.0.1', port: Number(rec.ports['22/tcp'][0].HostPort) }],
    key,
    verifyHostKey: () => true,
  });
  sessions.push(session);
  return session;
}

describe("the workdir's ready-file", () => {
  it.each([
    ['tar', PATH],
    ['sftp', 'no tar'],
  ] as const)(
    'over %s: written only once every file is there, whole',
    async (method, path) => {
      const session = await loggedIn(path === 'no tar' ? pathWithout(scratch, PATH, ['tar']) : path);
      // Forty files of 128 KiB that do not compress: the upload takes long enough to be watched.
      const code = mkdtempSync(join(scratch, 'code-'));
      const sizes = new Map<string, number>();
      for (let i = 0; i < 40; i++) {
        const name = join(`d${i % 4}`, `f${String(i).padStart(2, '0')}.bin`);
        mkdirSync(join(code, `d${i % 4}`), { recursive: true });
        writeFileSync(join(code, name), randomBytes(128 * 1024));
        sizes.set(name, 128 * 1024);
      }
      const packed = await packWorkdir(code, 64);
      // The container's directory, where /root/workdir is ($HOME/workdir): its login starts there.
      const home = (await session.exec('pwd', { maxOutputBytes: 4096 })).stdout.trim();
      const wd = join(home, 'workdir');
      // What was missing or short the moment the ready-file appeared (null: not seen yet).
      let missing: string[] | null = null;
      const lookNow = () => {
        if (missing !== null || !existsSync(join(wd, WORKDIR_READY_FILE))) return;
        missing = [...sizes]
          .filter(([name, size]) => !existsSync(join(wd, name)) || statSync(join(wd, name)).size !== size)
          .map(([n]) => n);
      };
      const look = setInterval(lookNow, 1);
      try {
        await expect(
          uploadWorkdir(session, { dir: '/root/workdir', sha256: packed.sha256, archive: packed.archive }, new AbortController().signal),
        ).resolves.toBe(method);
      } finally {
        clearInterval(look);
      }
      // A fast upload may write the ready-file last and resolve before the next look: one more.
      lookNow();
      // Seen, and nothing was missing then.
      expect(missing).toEqual([]);
    },
    60_000,
  );
});
