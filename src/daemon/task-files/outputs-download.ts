// A task's outputs downloaded over SFTP when it ends, before its instance's destroy (issue #40): the
// run machine's `collectOutputs` actor in its `collecting` state (machines/run-instance-states.ts),
// which bounds it by files.outputs_timeout_s, the run's limits and a cancel (it aborts the signal).
//
// One attempt's download, as its run_outputs row says it:
//   collecting  the intent, written before the login: a daemon killed from here on resumes the run in
//               `collecting` (its snapshot), which downloads again into an emptied folder, or, its
//               deadline passed, destroys the instance. Left by one of:
//   kept        every path came whole;
//   partial     some came: the size cap (files.outputs_max_mb) was reached (the file it cut is kept in
//               part), a path was not there, or the machine stopped the download (what came is kept);
//   failed      nothing came (no login, the instance stopped, no path there).
// Each file is streamed to `<name>.part` with its sha256 computed as it comes, its size read back
// from the disk and compared with the size SFTP gave, then renamed. The login is the follower's
// (./task-shells.ts): berth's key, direct address first, the host key pinned at the first login.
// Files land in `<outputs_dir>/<run id>/attempt-<n>/<name>`: a path under the task's directory
// (/root/workdir) by its path relative to it, any other by its absolute path without the first '/'.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { SFTPWrapper, Stats } from 'ssh2';
import type { CollectInput, CollectOutput } from '../../../machines/run-machine.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import { keptOutputName as keptName } from '../../job-spec/output-names.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import { taskFilesVar } from '../../job-spec/task-script.js';
import type { Store, OutputFile } from '../../store/index.js';
import type { FileShell, FileShells } from '../task-end/task-shells.js';
import { OWNER_FILE } from './outputs-retention.js';

/** Files listed under the outputs' directories at most: a bound on the manifest and on the walk. */
const MAX_FILES = 10_000;
/** SFTP's "no such file" status (SSH_FX_NO_SUCH_FILE, draft-ietf-secsh-filexfer-02 §7). */
const NO_SUCH_FILE = 2;

export interface OutputsDownloadDeps {
  store: Pick<Store, 'outputs' | 'transaction' | 'storeId'>;
  shells: FileShells;
  clock: Clock;
  specs: RunSpecs;
  /** files.outputs_dir, resolved: one folder per run and attempt below it. */
  dir: string;
  /** files.outputs_max_mb in bytes: what one attempt downloads at most. */
  maxBytes: number;
  /** This daemon's host name: where `berth outputs` finds the files. */
  host: string;
}

interface RemoteFile {
  path: string;
  size: number;
}

/** The folder that keeps attempt n's outputs of a run. */
function attemptDir(root: string, runId: string, n: number): string {
  return join(root, runId, `attempt-${n}`);
}

export class OutputsDownload {
  constructor(private readonly deps: OutputsDownloadDeps) {}

  /** Downloads attempt n's outputs; what came is in the store's manifest whatever happens. Rejects only when aborted. */
  async collect(input: CollectInput, signal: AbortSignal): Promise<CollectOutput> {
    const { store, clock } = this.deps;
    const paths = this.deps.specs.get(input.runId)?.collect?.paths ?? [];
    const startedAt = clock.now();
    const dir = attemptDir(this.deps.dir, input.runId, input.n);
    // The intent first: a daemon killed after this finds the download under way.
    store.transaction(() =>
      store.outputs.begin({
        runId: input.runId,
        attempt: input.n,
        state: 'collecting',
        host: this.deps.host,
        dir,
        detail: null,
        at: startedAt,
      }),
    );
    rmSync(dir, { recursive: true, force: true });
    // The run's folder says whose it is: retention deletes it with its run (./outputs-retention.ts).
    mkdirSync(dirname(dir), { recursive: true });
    writeFileSync(join(dirname(dir), OWNER_FILE), `${store.storeId}\n`);
    const files: OutputFile[] = [];
    const notes: string[] = [];
    let whole = true;
    const end = (state: 'kept' | 'partial' | 'failed', detail: string): CollectOutput => {
      const at = clock.now();
      store.transaction(() => store.outputs.finish({ runId: input.runId, attempt: input.n, state, files, detail: detail || null, at }));
      return { state, files: files.length, bytes: files.reduce((n, f) => n + f.size, 0), detail, tookMs: at - startedAt };
    };
    if (input.stopped)
      return end('failed', 'the instance was stopped (by its task) before berth could log in to take them: nothing to download from');

    let shell: FileShell | undefined;
    try {
      shell = await this.deps.shells.open({ runId: input.runId, n: input.n, instanceId: input.instanceId }, signal);
      const sftp = await shell.sftp();
      let left = this.deps.maxBytes;
      let skipped = 0;
      for (const path of paths) {
        const listed = await listFiles(sftp, path);
        if (listed === null) {
          notes.push(`${path} is not in the container`);
          whole = false;
          continue;
        }
        for (const remote of listed) {
          if (files.length >= MAX_FILES) {
            skipped++;
            continue;
          }
          if (left <= 0) {
            skipped++;
            continue;
          }
          const limit = Math.min(remote.size, left);
          const got = await fetchFile(sftp, remote, join(dir, keptName(remote.path)), limit, signal);
          files.push(got.file);
          left -= got.file.size;
          if (got.file.partial) {
            whole = false;
            if (limit < remote.size)
              notes.push(`files.outputs_max_mb reached: ${remote.path} kept in part (${got.file.size} of ${remote.size} bytes)`);
          }
          if (got.cut) throw got.cut;
        }
      }
      if (skipped > 0) {
        whole = false;
        notes.push(`${skipped} more file${skipped === 1 ? '' : 's'} not downloaded (files.outputs_max_mb or ${MAX_FILES} files reached)`);
      }
      // Tells the wrapper it may stop its instance now (it waits for this, bounded, at the task's end).
      const run = input.runId;
      await shell.exec(`${taskFilesVar(run, input.n)}; : >"$berth_f.got"`, { signal, onStdout: () => {} }).catch(() => undefined);
      if (files.length === 0) return end('failed', notes.join('; ') || 'no file at the outputs paths');
      return end(whole ? 'kept' : 'partial', notes.join('; '));
    } catch (err) {
      if (signal.aborted) {
        end(files.length > 0 ? 'partial' : 'failed', 'stopped before it finished (see the run events)');
        throw err;
      }
      notes.push(toRunError(err).message);
      return end(files.length > 0 ? 'partial' : 'failed', notes.join('; '));
    } finally {
      shell?.close();
    }
  }
}

/** The regular files at `path` (itself, or below it when a directory; links not followed inside); null: not there. */
async function listFiles(sftp: SFTPWrapper, path: string): Promise<RemoteFile[] | null> {
  const top = await new Promise<Stats | null>((resolve, reject) =>
    sftp.stat(path, (err, stats) =>
      err ? ((err as { code?: unknown }).code === NO_SUCH_FILE ? resolve(null) : reject(err)) : resolve(stats),
    ),
  );
  if (top === null) return null;
  if (top.isFile()) return [{ path, size: top.size }];
  if (!top.isDirectory()) return [];
  const out: RemoteFile[] = [];
  const queue = [path];
  while (queue.length > 0 && out.length < MAX_FILES) {
    const at = queue.shift()!;
    const entries = await new Promise<Array<{ filename: string; attrs: Stats }>>((resolve, reject) =>
      sftp.readdir(at, (err, list) => (err ? reject(err) : resolve(list))),
    );
    entries.sort((a, b) => (a.filename < b.filename ? -1 : 1));
    for (const e of entries) {
      const full = posix.join(at, e.filename);
      if (e.attrs.isDirectory()) queue.push(full);
      else if (e.attrs.isFile()) out.push({ path: full, size: e.attrs.size });
    }
  }
  return out;
}

/**
 * One file, its first `limit` bytes: streamed to `<local>.part`, hashed as it comes, renamed once
 * its size is read back. `cut`: the error that stopped it (an abort); what came is kept, partial.
 */
async function fetchFile(
  sftp: SFTPWrapper,
  remote: RemoteFile,
  local: string,
  limit: number,
  signal: AbortSignal,
): Promise<{ file: OutputFile; cut: unknown }> {
  mkdirSync(dirname(local), { recursive: true });
  const part = `${local}.part`;
  const hash = createHash('sha256');
  let cut: unknown = null;
  const hashing = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    const source = limit > 0 ? sftp.createReadStream(remote.path, { start: 0, end: limit - 1 }) : Readable.from([]);
    await pipeline(source, hashing, createWriteStream(part), { signal });
  } catch (err) {
    cut = err;
  }
  const size = statSync(part).size;
  renameSync(part, local);
  // Cut short, the hash may count bytes that never reached the disk: taken again from the disk.
  const sha256 = cut === null && size === limit ? hash.digest('hex') : await sha256Of(local);
  const partial = size < remote.size;
  return { file: { path: remote.path, name: keptName(remote.path), size, sha256, ...(partial ? { partial: true } : {}) }, cut };
}

async function sha256Of(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}
