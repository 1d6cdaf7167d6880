// A task's outputs downloaded (src/daemon/task-files/outputs-download.ts, issue #48) over real
// logins (src/ssh/session.ts) through a TCP relay on 127.0.0.1 that the test cuts, to an SSH
// server serving the simulator's own SFTP server (src/sim/ssh-sftp.ts) on a temp folder as the
// container's /root, into a real SQLite store. The server's handlers can be bent per test: the
// link cut while a file is read or a folder listed, a folder or a file refused, a hostile listing.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2, { type SFTPWrapper } from 'ssh2';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startTcpRelay, type TcpRelay } from '../../../bench/tcp-relay.js';
import type { CollectInput } from '../../../machines/run-machine.js';
import { systemClock } from '../../../src/clock.js';
import { sshTaskShells } from '../../../src/daemon/task-end/task-shells.js';
import { OutputsDownload } from '../../../src/daemon/task-files/outputs-download.js';
import type { RunPlan } from '../../../src/job-spec/run-plan.js';
import { serveSftp } from '../../../src/sim/ssh-sftp.js';
import { loadLoginKey } from '../../../src/ssh/key-pair.js';
import { openSshSession } from '../../../src/ssh/session.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { startSshTestServer, type SshTestServer } from '../../helpers/ssh-test-server.js';

const { STATUS_CODE } = ssh2.utils.sftp;
const scratch = mkdtempSync(join(tmpdir(), 'berth-outputs-'));
const key = loadLoginKey({ home: join(scratch, 'home') });
const stores: Store[] = [];
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});
afterAll(() => {
  stores.forEach((s) => s.close());
  rmSync(scratch, { recursive: true, force: true });
});

/** A handler bent by a test: it gets the request's arguments and `next`, the simulator's own handler. */
type Hook = (args: unknown[], next: () => void, stream: SFTPWrapper) => void;

/** The container: a folder whose `workdir/out` holds `files` (name → bytes). */
function container(files: Record<string, Buffer | string>): string {
  const root = mkdtempSync(join(scratch, 'root-'));
  for (const [name, data] of Object.entries(files)) {
    mkdirSync(join(root, 'workdir', 'out', name, '..'), { recursive: true });
    writeFileSync(join(root, 'workdir', 'out', name), data);
  }
  return root;
}

interface World {
  server: SshTestServer;
  relay: TcpRelay;
  store: Store;
  runId: string;
  events: Array<{ type: string; message: string; data: Record<string, unknown> }>;
  collect(paths?: string[], signal?: AbortSignal): ReturnType<OutputsDownload['collect']>;
  /** The attempt's kept folder. */
  dir: string;
}

let runs = 0;
async function world(root: string, hooks: Record<string, Hook> = {}): Promise<World> {
  const server = await startSshTestServer({
    authorizedKeys: [key.publicLine],
    sftp: (stream) => {
      const on = stream.on.bind(stream) as (ev: string, fn: (...a: unknown[]) => void) => SFTPWrapper;
      (stream as unknown as { on: typeof on }).on = (ev, fn) => {
        const hook = hooks[ev];
        return on(ev, hook ? (...a: unknown[]) => hook(a, () => fn(...a), stream) : fn);
      };
      serveSftp(stream, root);
    },
  });
  const relay = await startTcpRelay({ host: '127.0.0.1', port: server.port });
  closers.push(
    () => relay.close(),
    () => server.close(),
  );
  const home = mkdtempSync(join(scratch, 'berth-'));
  const store = openStore({ home });
  stores.push(store);
  const events: World['events'] = [];
  const runId = `r-outputs-${process.pid}-${++runs}`;
  const shells = sshTaskShells(async (_t, signal) => {
    const session = await openSshSession({
      endpoints: [{ kind: 'direct', host: '127.0.0.1', port: relay.port }],
      key,
      verifyHostKey: () => true,
      signal,
    });
    return {
      exec: (command, options) => session.exec(command, { ...options, maxOutputBytes: 0 }),
      sftp: () => session.sftp(),
      close: () => session.close(),
    };
  });
  const outputsDir = join(home, 'outputs');
  let paths = ['/root/workdir/out'];
  const download = new OutputsDownload({
    store,
    shells,
    clock: systemClock,
    specs: { get: () => ({ collect: { paths, cloud: null } }) as unknown as RunPlan },
    dir: outputsDir,
    maxBytes: 1 << 30,
    host: 'test-host',
    say: (_runId, type, message, data) => events.push({ type, message, data }),
  });
  const input: CollectInput = { runId, n: 1, instanceId: 7, until: Date.now() + 60_000, stopped: false };
  // The done-file's ack the download writes (the test server's commands run here, in the temp dir).
  closers.push(async () => rmSync(join(tmpdir(), `berth-task-${runId}-1.got`), { force: true }));
  return {
    server,
    relay,
    store,
    runId,
    events,
    dir: join(outputsDir, runId, 'attempt-1'),
    collect: (p, signal) => {
      if (p) paths = p;
      return download.collect(input, signal ?? new AbortController().signal);
    },
  };
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const random = (n: number, seed: number) => {
  const b = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
};

/** Every kept file equals the container's, byte for byte, and the manifest lists it with its hash. */
function expectAllKept(w: World, files: Record<string, Buffer | string>) {
  const row = w.store.outputs.get(w.runId, 1)!;
  expect(row.state).toBe('kept');
  expect(row.files.map((f) => f.name).sort()).toEqual(
    Object.keys(files)
      .map((n) => `out/${n}`)
      .sort(),
  );
  for (const [name, data] of Object.entries(files)) {
    const got = readFileSync(join(w.dir, 'out', name));
    expect(sha256(got)).toBe(sha256(data));
    expect(row.files.find((f) => f.name === `out/${name}`)?.sha256).toBe(sha256(data));
  }
  return row;
}

describe('a cut link', () => {
  it('mid-download: logs in again and goes on from the bytes on disk, every file byte-identical', async () => {
    const files = { 'model.bin': random(6 * 1024 * 1024, 1), 'a.txt': 'alpha\n', 'b.txt': 'beta\n' };
    let served = 0;
    let cut = false;
    const w = await world(container(files), {
      READ: ([, , , length], next) => {
        served += length as number;
        // Once 2 MiB have gone out, the link drops (the request is not answered).
        if (!cut && served > 2 * 1024 * 1024) {
          cut = true;
          return w.relay.cutAll();
        }
        next();
      },
    });
    const out = await w.collect();
    expect(out.state).toBe('kept');
    expect(cut).toBe(true);
    const row = expectAllKept(w, files);
    expect(row.detail).toContain('1 SSH drop resumed');
    expect(w.server.accepted).toBe(2);
    // Resumed, not taken again: the bytes read are the file once, plus at most what was in flight at the cut.
    expect(served).toBeLessThan(6 * 1024 * 1024 + 2 * 1024 * 1024 + 64 * 1024);
    expect(readdirSync(join(w.dir, 'out')).filter((n) => n.endsWith('.part'))).toEqual([]);
  });

  it('during the walk: logs in again and lists on, every file byte-identical', async () => {
    const files: Record<string, string> = {};
    for (let d = 0; d < 12; d++) for (let f = 0; f < 4; f++) files[`d${String(d).padStart(2, '0')}/f${f}.txt`] = `file ${d}/${f}\n`;
    let cut = false;
    const w = await world(container(files), {
      OPENDIR: ([, path], next) => {
        if (!cut && String(path).endsWith('/d07')) {
          cut = true;
          return w.relay.cutAll();
        }
        next();
      },
    });
    const out = await w.collect();
    expect(cut).toBe(true);
    expect(out.state).toBe('kept');
    expectAllKept(w, files);
    expect(w.server.accepted).toBe(2);
  });
});

it('puts a file together from short reads answered out of order', async () => {
  const files = { 'model.bin': random(3 * 1024 * 1024 + 17, 2) };
  let n = 0;
  const w = await world(container(files), {
    READ: (_a, next, stream) => {
      const i = n++;
      const answer = () => {
        // Every third answer holds half the bytes asked for (a server's bound): the rest is asked again.
        const data = stream.data.bind(stream);
        if (i % 3 === 0) stream.data = (reqid, buf) => data(reqid, (buf as Buffer).subarray(0, Math.ceil((buf as Buffer).length / 2)));
        next();
        stream.data = data;
      };
      // Every other answer comes late, after the next ones.
      if (i % 2 === 0) setTimeout(answer, 5);
      else answer();
    },
  });
  const out = await w.collect();
  expect(out.state).toBe('kept');
  expect(n).toBeGreaterThan(110); // 99 reads of 31 KiB, and the halves asked again
  expectAllKept(w, files);
});

describe('an SFTP error', () => {
  it('while listing a folder: the manifest ends partial, every file that came listed', async () => {
    const files = { 'good/a.txt': 'a\n', 'good/b.txt': 'b\n', 'bad/c.txt': 'c\n' };
    const w = await world(container(files), {
      OPENDIR: ([reqid, path], next, stream) =>
        String(path).endsWith('/bad') ? stream.status(reqid as number, STATUS_CODE.FAILURE) : next(),
    });
    const out = await w.collect();
    expect(out.state).toBe('partial');
    const row = w.store.outputs.get(w.runId, 1);
    expect(row!.state).toBe('partial');
    expect(row!.ended_at).not.toBeNull();
    expect(row!.files.map((f) => f.name).sort()).toEqual(['out/good/a.txt', 'out/good/b.txt']);
    expect(row!.detail).toContain('/root/workdir/out/bad could not be listed');
  });

  it('while reading a file: that file is noted, the others kept', async () => {
    const files = { 'a.txt': 'a\n', 'secret.bin': 'no\n', 'z.txt': 'z\n' };
    const w = await world(container(files), {
      OPEN: ([reqid, filename], next, stream) =>
        String(filename).endsWith('secret.bin') ? stream.status(reqid as number, STATUS_CODE.PERMISSION_DENIED) : next(),
    });
    const out = await w.collect();
    expect(out.state).toBe('partial');
    const row = w.store.outputs.get(w.runId, 1);
    expect(row!.files.filter((f) => !f.partial).map((f) => f.name)).toEqual(['out/a.txt', 'out/z.txt']);
    expect(row!.detail).toContain('secret.bin');
  });
});

it('takes 2,500 files from one folder (the listing comes in pages, as from OpenSSH)', async () => {
  const files: Record<string, string> = {};
  for (let i = 0; i < 2500; i++) files[`many/file-with-a-long-name-${String(i).padStart(5, '0')}.txt`] = `${i}\n`;
  let pages = 0;
  const w = await world(container(files), {
    READDIR: (_a, next) => {
      pages++;
      next();
    },
  });
  const out = await w.collect();
  expect(out.state).toBe('kept');
  expect(out.files).toBe(2500);
  expect(pages).toBeGreaterThan(25); // 100 names an answer, then EOF: out/ and many/
  expectAllKept(w, files);
}, 120_000);

it('an output path the task never wrote marks the set partial, not kept, with what did arrive listed (#49 item 5)', async () => {
  const files = { 'model.bin': 'weights\n' };
  const w = await world(container(files));
  const out = await w.collect(['/root/workdir/out', '/root/workdir/ckpt']);
  expect(out.state).toBe('partial');
  const row = w.store.outputs.get(w.runId, 1)!;
  expect(row.state).toBe('partial');
  expect(row.files.map((f) => f.name)).toEqual(['out/model.bin']);
  expect(readFileSync(join(w.dir, 'out', 'model.bin'), 'utf8')).toBe('weights\n');
});

describe('confined names', () => {
  it('refuses listed names with a "/" or that are ".." as a file, and links outside the paths asked for, with an event each', async () => {
    const files = { 'a.txt': 'a\n', 'sub/b.txt': 'b\n' };
    const root = container(files);
    writeFileSync(join(root, 'secret.txt'), 'outside out/\n');
    symlinkSync(join(root, 'secret.txt'), join(root, 'workdir', 'out', 'to-secret'));
    symlinkSync('/etc/hostname', join(root, 'workdir', 'out', 'to-host'));
    symlinkSync('sub/b.txt', join(root, 'workdir', 'out', 'alias'));
    const hostile = (name: string) => ({
      filename: name,
      longname: name,
      attrs: { mode: 0o100644, uid: 0, gid: 0, size: 5, atime: 0, mtime: 0 },
    });
    let listed = false;
    const w = await world(root, {
      READDIR: (_a, next, stream) => {
        if (listed) return next();
        listed = true;
        // The first answer (out/ itself) gets hostile names beside the real ones.
        const name = stream.name.bind(stream);
        stream.name = (reqid, names) => name(reqid, [...names, hostile('../../x'), hostile('a/../../y'), hostile('..')]);
        next();
        stream.name = name;
      },
    });
    const out = await w.collect();
    expect(out.state).toBe('partial');
    const row = w.store.outputs.get(w.runId, 1);
    expect(row!.files.map((f) => f.name).sort()).toEqual(['out/a.txt', 'out/alias', 'out/sub/b.txt']);
    expect(readFileSync(join(w.dir, 'out', 'alias'), 'utf8')).toBe('b\n');
    const refused = w.events.filter((e) => e.type === 'outputs.refused').map((e) => e.data.path);
    expect(refused.sort()).toEqual(
      [
        '/root/workdir/out/../../x',
        '/root/workdir/out/a/../../y',
        '/root/workdir/out/..',
        '/root/workdir/out/to-host',
        '/root/workdir/out/to-secret',
      ].sort(),
    );
    // Nothing was written beside the attempt's folder (but the store's mark).
    expect(readdirSync(join(w.dir, '..')).sort()).toEqual(['.berth-store', 'attempt-1']);
    expect(existsSync(join(w.dir, 'x'))).toBe(false);
  });
});
