// The account's cloud connections and the service's cloud copy ("Cloud Sync"): rclone run by the
// host between an instance's files and a cloud bucket, here a local folder standing for the bucket.
//
// What the service is shown to do:
// - the connections are the account's (`GET /api/v0/users/cloud_integrations/`,
//   show_connections.yaml: a bare array of `{id, name, cloud_type}`);
// - `POST /api/v0/commands/rclone/` `{src, dst, instance_id, selected, transfer, flags}` starts a
//   copy and answers at once (cloud_copy.yaml; vast-cli `vastai/api/storage.py` `cloud_copy`);
// - it works on a stopped instance: "copy data to/from a _stopped instance_", "even when the
//   instance is stopped" (vast-ai/docs guides/instances/storage/data-movement.mdx);
// - its progress shows only in the instance's status bar (`status_msg`), late: vast.py's
//   `cloud__copy` prints "check instance status bar for progress updates (~30 seconds delayed).
//   When the operation is finished you should see 'Cloud Copy Operation Finished' in the instance
//   status bar";
// - a directory's contents are copied into the destination, not the directory itself (vast.py's
//   `cloud copy` epilog: "copies all contents of /folder on instance 6003036 into /workspace in
//   gdrive connection 'test_dir'"), as `rclone copy` does ("it is always the contents of the
//   directory that is synced, not the directory itself", rclone.org/commands/rclone_copy); a file
//   lands in the destination folder.
//
// A copy here is
//   moving   — from the request, for bytes / `copy_mb_per_s` sim seconds (a host that is offline
//              or unknown moves nothing: it waits); "Cloud Copy in progress: 0%" then "50%";
//   writing  — the bytes land in the destination (every one, or the first half with the
//              `cloud_copy_fail_rate` fault);
//   finished / failed / canceled — the last line; a destroy of the instance abandons it silently.
// Each line reaches the status bar `status_delay_s` after the moment it describes. Only "Cloud Copy
// Operation Finished" is the service's own wording; the progress, failure and cancel lines are this
// simulator's (the real ones are not documented).
import { chown, copyFile, lstat, mkdir, open, readdir, type FileHandle } from 'node:fs/promises';
import { basename, join, posix, relative, sep } from 'node:path';
import type { SimClock } from './clock.js';
import type { SimConfig } from './config.js';
import type { InstanceStore, LiveInstance } from './instances.js';
import { runAs } from './onstart-runner.js';
import { mulberry32, type Rng } from './prng.js';
import { containerHostPath } from './ssh-sftp.js';

const CLOUD_COPY_FINISHED = 'Cloud Copy Operation Finished';
const CLOUD_COPY_FAILED = 'Cloud Copy Operation Failed';
const CLOUD_COPY_CANCELED = 'Cloud Copy Operation Canceled';
const IN_PROGRESS = 'Cloud Copy in progress';

export type Transfer = 'Instance To Cloud' | 'Cloud To Instance';

interface CloudConnection {
  id: number;
  name: string;
  cloud_type: string;
  dir: string;
}

export interface CloudCopy {
  id: number;
  instance_id: number;
  connection_id: number;
  transfer: Transfer;
  src: string;
  dst: string;
  flags: string[];
  state: 'moving' | 'writing' | 'finished' | 'failed' | 'canceled' | 'abandoned';
  /** Bytes of the source when the copy started, and bytes written so far. */
  bytes: number;
  written: number;
  /** Sim seconds: the request, and the moment its bytes are due to land. */
  started_s: number;
  lands_s: number;
  /** Why it failed (this simulator's words). */
  error: string | null;
  failHalfway: boolean;
  halfNoted: boolean;
  cancel: boolean;
}

interface Deps {
  clock: SimClock;
  instances: InstanceStore;
  /** The instance's directory (its container's files), made at first need. */
  dirOf(inst: LiveInstance): string;
  /** Whether this copy meets the fail-halfway fault (the fault dice). */
  failHalfway(): boolean;
}

export class CloudCopies {
  readonly connections: CloudConnection[];
  private readonly copies: CloudCopy[] = [];
  private readonly writes = new Set<Promise<void>>();
  private nextId = 1;

  constructor(
    private readonly cfg: SimConfig['cloud'],
    private readonly deps: Deps,
  ) {
    let next = 1001;
    this.connections = cfg.connections.map((c) => ({ id: c.id ?? next++, name: c.name, cloud_type: c.cloud_type, dir: c.dir }));
  }

  connection(id: number): CloudConnection | undefined {
    return this.connections.find((c) => c.id === id);
  }

  list(): CloudCopy[] {
    return this.copies.map((c) => ({ ...c, flags: [...c.flags] }));
  }

  /** Starts a copy between the instance and the connection's folder; its lines follow in the status bar. */
  async start(
    inst: LiveInstance,
    conn: CloudConnection,
    transfer: Transfer,
    src: string,
    dst: string,
    flags: string[],
  ): Promise<CloudCopy> {
    const now = this.deps.clock.simS();
    const from = this.sourcePath(inst, conn, transfer, src);
    const bytes = from === null ? 0 : await sizeOf(from);
    const copy: CloudCopy = {
      id: this.nextId++,
      instance_id: inst.hist.id,
      connection_id: conn.id,
      transfer,
      src,
      dst,
      flags,
      state: 'moving',
      bytes,
      written: 0,
      started_s: now,
      lands_s: now + Math.max(1, bytes / (this.cfg.copy_mb_per_s * 1e6)),
      error: null,
      failHalfway: this.deps.failHalfway(),
      halfNoted: false,
      cancel: false,
    };
    this.copies.push(copy);
    this.say(inst, now, `${IN_PROGRESS}: 0%`);
    return copy;
  }

  /** Cancels the instance's copies still under way (cancel_sync.yaml); returns how many. */
  cancel(instanceId: number): number {
    let n = 0;
    for (const c of this.copies) {
      if (c.instance_id !== instanceId || (c.state !== 'moving' && c.state !== 'writing')) continue;
      n++;
      if (c.state === 'writing') c.cancel = true;
      else this.end(c, 'canceled', null);
    }
    return n;
  }

  /** Moves each copy along to now: its progress line, its bytes landing once their time is up. */
  tick(): void {
    const now = this.deps.clock.simS();
    for (const c of this.copies) {
      if (c.state !== 'moving') continue;
      const inst = this.deps.instances.get(c.instance_id);
      if (!inst) {
        c.state = 'abandoned';
        continue;
      }
      // A host that cannot be reached runs no rclone: nothing moves until it is back.
      if (inst.status === 'offline' || inst.status === 'unknown') {
        c.lands_s = Math.max(c.lands_s, now);
        continue;
      }
      const half = (c.started_s + c.lands_s) / 2;
      if (!c.halfNoted && now >= half) {
        c.halfNoted = true;
        this.say(inst, half, `${IN_PROGRESS}: 50%`);
      }
      if (now >= c.lands_s) this.land(c, inst);
    }
  }

  /** Waits for the copies writing now (the simulator closes). */
  async close(): Promise<void> {
    for (const c of this.copies) c.cancel = true;
    await Promise.all([...this.writes]);
  }

  private land(c: CloudCopy, inst: LiveInstance): void {
    c.state = 'writing';
    const conn = this.connection(c.connection_id)!;
    const from = this.sourcePath(inst, conn, c.transfer, c.src);
    const to = this.destPath(inst, conn, c.transfer, c.dst);
    const work = (async () => {
      if (from === null || to === null) return this.end(c, 'failed', 'the path leads outside its root');
      let files: Array<{ path: string; rel: string; size: number }>;
      try {
        files = await listFiles(from);
      } catch {
        return this.end(c, 'failed', `${c.src}: directory not found`);
      }
      const limit = c.failHalfway ? Math.floor(files.reduce((s, f) => s + f.size, 0) / 2) : Infinity;
      try {
        for (const f of files) {
          if (c.cancel) return this.end(c, 'canceled', null);
          const target = join(to, f.rel);
          const made = await mkdir(join(target, '..'), { recursive: true });
          const room = limit - c.written;
          const whole = room >= f.size;
          if (whole) await copyFile(f.path, target);
          else await copyPart(f.path, target, room);
          c.written += whole ? f.size : room;
          // Into the container: its files are its processes' (onstart-runner.ts runAs), as SFTP writes them.
          if (c.transfer === 'Cloud To Instance') await ownAsContainer(target, made);
          if (!whole) return this.end(c, 'failed', `connection to the cloud lost after ${c.written} bytes`);
        }
      } catch (e) {
        return this.end(c, 'failed', `write error: ${(e as NodeJS.ErrnoException).code ?? 'EIO'}`);
      }
      this.end(c, 'finished', null);
    })();
    this.writes.add(work);
    void work.finally(() => this.writes.delete(work));
  }

  private end(c: CloudCopy, state: 'finished' | 'failed' | 'canceled', error: string | null): void {
    c.state = state;
    c.error = error;
    const inst = this.deps.instances.get(c.instance_id);
    if (!inst) {
      c.state = 'abandoned';
      return;
    }
    const now = this.deps.clock.simS();
    if (state === 'finished') this.say(inst, now, CLOUD_COPY_FINISHED);
    else if (state === 'canceled') this.say(inst, now, CLOUD_COPY_CANCELED);
    else this.say(inst, now, `${CLOUD_COPY_FAILED}: ${error}`);
  }

  /** The status bar shows `msg` `status_delay_s` after the moment `at` it describes. */
  private say(inst: LiveInstance, at: number, msg: string): void {
    this.deps.instances.note(inst, at + this.cfg.status_delay_s, msg);
  }

  private sourcePath(inst: LiveInstance, conn: CloudConnection, transfer: Transfer, src: string): string | null {
    return transfer === 'Instance To Cloud' ? containerHostPath(this.deps.dirOf(inst), src) : bucketPath(conn, src);
  }

  private destPath(inst: LiveInstance, conn: CloudConnection, transfer: Transfer, dst: string): string | null {
    return transfer === 'Instance To Cloud' ? bucketPath(conn, dst) : containerHostPath(this.deps.dirOf(inst), dst);
  }
}

/** A path in the bucket (`bucket/prefix`, a leading `/` or not), inside the connection's folder; `..` stops at its top. */
function bucketPath(conn: CloudConnection, p: string): string {
  const rel = posix.normalize(`/${p}`).slice(1);
  return rel === '' ? conn.dir : join(conn.dir, ...rel.split('/'));
}

/** The regular files under `root` (or `root` itself, a file, named by its base name), in name order; links are skipped, as rclone does without --copy-links. */
async function listFiles(root: string): Promise<Array<{ path: string; rel: string; size: number }>> {
  const st = await lstat(root);
  if (st.isFile()) return [{ path: root, rel: basename(root), size: st.size }];
  if (!st.isDirectory()) return [];
  const out: Array<{ path: string; rel: string; size: number }> = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) out.push({ path: p, rel: relative(root, p).split(sep).join('/'), size: (await lstat(p)).size });
    }
  };
  await walk(root);
  return out;
}

async function sizeOf(p: string): Promise<number> {
  try {
    return (await listFiles(p)).reduce((s, f) => s + f.size, 0);
  } catch {
    return 0;
  }
}

async function ownAsContainer(file: string, firstMadeDir: string | undefined): Promise<void> {
  const { uid, gid } = runAs();
  if (uid === undefined || gid === undefined) return;
  await chown(file, uid, gid);
  for (let d = join(file, '..'); firstMadeDir !== undefined && d.startsWith(firstMadeDir); d = join(d, '..')) await chown(d, uid, gid);
}

/** The first `bytes` bytes of `from` written to `to` (a copy cut short). */
async function copyPart(from: string, to: string, bytes: number): Promise<void> {
  let src: FileHandle | undefined;
  let dst: FileHandle | undefined;
  try {
    src = await open(from, 'r');
    dst = await open(to, 'w');
    const buf = Buffer.alloc(Math.min(bytes, 1 << 20));
    for (let done = 0; done < bytes;) {
      const { bytesRead } = await src.read(buf, 0, Math.min(buf.length, bytes - done), done);
      if (bytesRead === 0) break;
      await dst.write(buf, 0, bytesRead);
      done += bytesRead;
    }
  } finally {
    await src?.close();
    await dst?.close();
  }
}

/** The fault dice of the copies, seeded like the others. */
export function copyFaultDice(seed: number, rate: () => number): () => boolean {
  const rng: Rng = mulberry32(seed ^ 0xc10d);
  return () => {
    const r = rate();
    return r > 0 && rng() < r;
  };
}
