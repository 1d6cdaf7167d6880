// berth's own transfer path beside OpenSSH's `sftp` (issue #48): the same server and the same relay
// (bench/files-sshd.ts, a process of its own), at 0 ms and at 50 ms each way. berth's side is what
// the daemon runs: the outputs download (OutputsDownload.collect: login, walk, files, the wrapper's
// ack) and the workdir upload (a login, then uploadWorkdir: probe, archive over SFTP, tar). The
// workdir is packed beforehand, as `berth submit` does before any instance is rented. OpenSSH's is
// `sftp -b` (its login included too): `get`, `put`, `get -r`, `put -r`. Every file that came back
// is checked byte for byte (sha256).
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { CollectInput } from '../machines/run-machine.js';
import { packWorkdir } from '../src/cli/workdir-pack.js';
import { systemClock } from '../src/clock.js';
import { sshTaskShells } from '../src/daemon/task-end/task-shells.js';
import { OutputsDownload } from '../src/daemon/task-files/outputs-download.js';
import { uploadWorkdir } from '../src/daemon/task-files/workdir-upload.js';
import type { RunPlan } from '../src/job-spec/run-plan.js';
import { loadLoginKey, type BerthKey } from '../src/ssh/key-pair.js';
import { openSshSession } from '../src/ssh/session.js';
import { openStore } from '../src/store/index.js';
import type { BenchRow } from './types.js';

const MB = 1_000_000;
/** The goal: berth within 1.25× of OpenSSH's time. */
const GOAL = 1.25;

interface Server {
  relays: Record<'0' | '50', number>;
  child: ChildProcess;
}

async function startServer(root: string, key: BerthKey): Promise<Server> {
  const child = spawn(process.execPath, [new URL('./files-sshd.js', import.meta.url).pathname, root, key.publicLine], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the bench sshd exited (${code})`)));
  });
  return { relays: (JSON.parse(line) as { relays: Server['relays'] }).relays, child };
}

/** The batch's last line: a local command whose output says every transfer before it is done. */
const DONE = 'berth-bench-done';

/**
 * OpenSSH's sftp running `commands` as a batch through the relay at `port`; resolves with the
 * seconds until the batch's last transfer ended. Timed to a marker the batch prints after them,
 * then ended: OpenSSH's ssh does not exit after an sftp session with ssh2's server (it waits on
 * after the channel is freed), which has nothing to do with the transfer.
 */
function openssh(port: number, key: BerthKey, commands: string[], work: string): Promise<number> {
  const batch = join(work, `batch-${Math.random().toString(36).slice(2)}`);
  writeFileSync(batch, `${[...commands, `!echo ${DONE}`].join('\n')}\n`);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const p = spawn(
      '/usr/bin/sftp',
      [
        '-q',
        '-i',
        key.path,
        '-P',
        String(port),
        '-o',
        'StrictHostKeyChecking=no',
        '-o',
        'UserKnownHostsFile=/dev/null',
        '-o',
        'BatchMode=yes',
        '-o',
        'LogLevel=ERROR',
        '-b',
        batch,
        'root@127.0.0.1',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    let err = '';
    let done = false;
    p.stderr.on('data', (c: Buffer) => (err += c.toString()));
    createInterface({ input: p.stdout }).on('line', (line) => {
      if (line.trim() !== DONE || done) return;
      done = true;
      resolve((performance.now() - t0) / 1000);
      process.kill(-p.pid!, 'SIGTERM'); // sftp and its ssh
    });
    p.on('exit', (code) => {
      if (!done) reject(new Error(`sftp exited ${code} before the batch ended: ${err.trim()}`));
    });
  });
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Every file under `dir`, by its path relative to it, hashed. */
function hashes(dir: string, base = dir, out = new Map<string, string>()): Map<string, string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === '.berth-ready') continue; // the upload's ready-file, not the workdir's
    const p = join(dir, e.name);
    if (e.isDirectory()) hashes(p, base, out);
    else out.set(p.slice(base.length + 1), sha256(readFileSync(p)));
  }
  return out;
}

function sameFiles(a: string, b: string, what: string): void {
  const x = hashes(a);
  const y = hashes(b);
  if (x.size !== y.size || [...x].some(([k, v]) => y.get(k) !== v))
    throw new Error(`${what}: not the bytes sent (${x.size} vs ${y.size} files)`);
}

export async function runFilesCompare(opts: { quick: boolean }): Promise<BenchRow[]> {
  const bigMb = opts.quick ? 20 : 100;
  const small = opts.quick ? 200 : 1000;
  const work = mkdtempSync(join(tmpdir(), 'berth-bench-compare-'));
  const root = join(work, 'root');
  const key = loadLoginKey({ home: join(work, 'home') });
  // The container's outputs, and the local workdirs to send up.
  const out = join(root, 'workdir', 'out');
  mkdirSync(out, { recursive: true });
  const big = randomFillSync(Buffer.alloc(bigMb * MB));
  writeFileSync(join(out, 'big.bin'), big);
  const many = join(root, 'workdir', 'many');
  mkdirSync(many);
  for (let i = 0; i < small; i++) writeFileSync(join(many, `f${String(i).padStart(4, '0')}.bin`), randomFillSync(Buffer.alloc(10_000)));
  const upBig = join(work, 'up-big');
  mkdirSync(upBig);
  writeFileSync(join(upBig, 'big.bin'), big);
  const upMany = join(work, 'up-many');
  mkdirSync(upMany);
  for (const f of readdirSync(many)) writeFileSync(join(upMany, f), readFileSync(join(many, f)));
  const packedBig = await packWorkdir(upBig, bigMb * 2);
  const packedMany = await packWorkdir(upMany, 100);

  const server = await startServer(root, key);
  const store = openStore({ home: join(work, 'home') });
  let round = 0;
  try {
    const rows: BenchRow[] = [];
    for (const delay of ['0', '50'] as const) {
      const port = server.relays[delay];
      const login = (signal?: AbortSignal) =>
        openSshSession({
          endpoints: [{ kind: 'direct', host: '127.0.0.1', port }],
          key,
          verifyHostKey: () => true,
          ...(signal ? { signal } : {}),
        });
      const shells = sshTaskShells(async (_t, signal) => {
        const s = await login(signal);
        return { exec: (c, o) => s.exec(c, { ...o, maxOutputBytes: 0 }), sftp: () => s.sftp(), close: () => s.close() };
      });
      /** berth's download of `paths`; seconds. */
      const berthDown = async (path: string): Promise<{ s: number; dir: string }> => {
        const runId = `bench-${++round}`;
        const outputsDir = join(work, 'kept');
        const download = new OutputsDownload({
          store,
          shells,
          clock: systemClock,
          specs: { get: () => ({ collect: { paths: [path], cloud: null } }) as unknown as RunPlan },
          dir: outputsDir,
          maxBytes: 1 << 30,
          host: 'bench',
          say: () => undefined,
        });
        const input: CollectInput = { runId, n: 1, instanceId: 1, until: Date.now() + 3_600_000, stopped: false };
        const t0 = performance.now();
        const got = await download.collect(input, new AbortController().signal);
        const s = (performance.now() - t0) / 1000;
        if (got.state !== 'kept') throw new Error(`berth's download ended ${got.state}: ${got.detail}`);
        return { s, dir: join(outputsDir, runId, 'attempt-1') };
      };
      /** berth's upload of a packed workdir into a fresh directory; seconds. */
      const berthUp = async (p: { sha256: string; archive: Buffer }, name: string): Promise<number> => {
        const t0 = performance.now();
        const session = await login();
        try {
          const how = await uploadWorkdir(
            session,
            { dir: `/root/${name}`, sha256: p.sha256, archive: p.archive },
            new AbortController().signal,
          );
          if (how !== 'tar') throw new Error(`berth's upload went by ${how}`);
        } finally {
          session.close();
        }
        return (performance.now() - t0) / 1000;
      };
      const row = (what: string, b: number, o: number, note: string): BenchRow => ({
        metric: `${what}, ${delay} ms each way: berth / OpenSSH sftp`,
        value: `${(b / o).toFixed(2)}× (${b.toFixed(2)} s / ${o.toFixed(2)} s)`,
        target: `<= ${GOAL}×`,
        met: b / o <= GOAL,
        note,
      });

      // Down, one big file.
      const bd = await berthDown('/root/workdir/out/big.bin');
      sameFiles(out, join(bd.dir, 'out'), 'berth down');
      const localBig = join(work, `sftp-big-${delay}.bin`);
      const od = await openssh(port, key, [`get /root/workdir/out/big.bin ${localBig}`], work);
      if (sha256(readFileSync(localBig)) !== sha256(big)) throw new Error('sftp down: not the bytes');
      rows.push(
        row(
          `${bigMb} MB down`,
          bd.s,
          od,
          "berth: the outputs download (login, walk, 64 × 32 KiB reads in flight, the wrapper's ack); sftp: `get`",
        ),
      );
      rmSync(bd.dir, { recursive: true, force: true });
      rmSync(localBig);

      // Up, one big file.
      const bu = await berthUp(packedBig, `up-big-${delay}`);
      sameFiles(upBig, join(root, `up-big-${delay}`), 'berth up');
      const ou = await openssh(port, key, [`put ${join(upBig, 'big.bin')} /root/sftp-big-${delay}.bin`], work);
      if (sha256(readFileSync(join(root, `sftp-big-${delay}.bin`))) !== sha256(big)) throw new Error('sftp up: not the bytes');
      rows.push(
        row(
          `${bigMb} MB up`,
          bu,
          ou,
          'berth: the workdir upload (login, probe, the archive over SFTP with 64 writes in flight, tar -xzf); sftp: `put`',
        ),
      );
      rmSync(join(root, `up-big-${delay}`), { recursive: true, force: true });
      rmSync(join(root, `sftp-big-${delay}.bin`));

      // Down, many small files.
      const md = await berthDown('/root/workdir/many');
      sameFiles(many, join(md.dir, 'many'), 'berth down many');
      const localMany = join(work, `sftp-many-${delay}`);
      const om = await openssh(port, key, [`get -r /root/workdir/many ${localMany}`], work);
      sameFiles(many, localMany, 'sftp down many');
      rows.push(
        row(
          `${small} files of 10 kB down`,
          md.s,
          om,
          'berth: the outputs download, 8 files in flight; sftp: `get -r` (one file after another)',
        ),
      );
      rmSync(md.dir, { recursive: true, force: true });
      rmSync(localMany, { recursive: true, force: true });

      // Up, many small files.
      const mu = await berthUp(packedMany, `up-many-${delay}`);
      sameFiles(upMany, join(root, `up-many-${delay}`), 'berth up many');
      const oum = await openssh(port, key, [`put -r ${upMany} /root/sftp-many-${delay}`], work);
      sameFiles(upMany, join(root, `sftp-many-${delay}`), 'sftp up many');
      rows.push(
        row(
          `${small} files of 10 kB up`,
          mu,
          oum,
          'berth: the workdir upload (one archive, then tar); sftp: `put -r` (one file after another)',
        ),
      );
      rmSync(join(root, `up-many-${delay}`), { recursive: true, force: true });
      rmSync(join(root, `sftp-many-${delay}`), { recursive: true, force: true });
    }
    return rows;
  } finally {
    store.close();
    server.child.stdin?.end();
    await new Promise((r) => server.child.once('exit', r));
    rmSync(work, { recursive: true, force: true });
  }
}
