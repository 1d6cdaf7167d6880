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
// Each file is read with many requests in flight (src/ssh/sftp-transfer.ts, as OpenSSH's sftp does),
// a few files at a time, into `<name>.part`, its sha256 computed as it comes, then renamed. A drop
// (the link, not the server's answer) logs in again and goes on where it was (./sftp-link.ts): the
// walk from the folder it was listing, each file from the bytes already on disk, until the
// machine's deadline aborts. The login is the follower's (../task-end/task-shells.ts): berth's
// key, direct address first, the host key pinned at the first login.
// Names are confined (issue #48): a listing entry with a '/' or that is '.' or '..' as anything but
// a folder's own links, and a link whose target is outside the requested paths, are refused with
// an `outputs.refused` event, never fetched (OpenSSH's sftp refuses a '/' in a listed name as a
// "suspect path": sftp-client.c do_lsreaddir). A link inside them is fetched as the file it names.
// A walk or read error the server answers (a folder or file it refuses) is noted and the rest
// taken; any other error ends the collection; either way the manifest ends final, with every file
// that arrived.
// Files land in `<outputs_dir>/<run id>/attempt-<n>/<name>`: a path under the task's directory
// (/root/workdir) by its path relative to it, any other by its absolute path without the first '/'.
import { createHash, type Hash } from 'node:crypto';
import { closeSync, createReadStream, mkdirSync, openSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import type { SFTPWrapper, Stats } from 'ssh2';
import type { CollectInput, CollectOutput } from '../../../machines/run-machine.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import { keptOutputName as keptName } from '../../job-spec/output-names.js';
import type { RunSpecs } from '../../job-spec/run-specs.js';
import { taskFilesVar } from '../../job-spec/task-script.js';
import type { Store, OutputFile } from '../../store/index.js';
import { isLinkError, readFileRange, sftpCall } from '../../ssh/sftp-transfer.js';
import type { FileShells } from '../task-end/task-shells.js';
import { OWNER_FILE } from './outputs-retention.js';
import { SftpLink, type LinkChannel } from './sftp-link.js';

/** Files listed under the outputs' directories at most: a bound on the manifest and on the walk. */
const MAX_FILES = 10_000;
/** SFTP's "no such file" status (SSH_FX_NO_SUCH_FILE, draft-ietf-secsh-filexfer-02 §7). */
const NO_SUCH_FILE = 2;
/** Files downloaded at once: a small file then costs a fraction of a round trip, not three. */
const FILES_IN_FLIGHT = 8;

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
  /** One event on the run (a refused name). */
  say(runId: string, type: 'outputs.refused', message: string, data: Record<string, unknown>): void;
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
    // Logs in at its first use; again after a drop.
    const target = { runId: input.runId, n: input.n, instanceId: input.instanceId };
    const link = new SftpLink((s) => this.deps.shells.open(target, s), clock, signal);
    const end = (state: 'kept' | 'partial' | 'failed', detail: string): CollectOutput => {
      const at = clock.now();
      if (link.relogins > 0)
        detail = [detail, `${link.relogins} SSH drop${link.relogins === 1 ? '' : 's'} resumed`].filter(Boolean).join('; ');
      files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      store.transaction(() => store.outputs.finish({ runId: input.runId, attempt: input.n, state, files, detail: detail || null, at }));
      return { state, files: files.length, bytes: files.reduce((n, f) => n + f.size, 0), detail, tookMs: at - startedAt };
    };
    if (input.stopped)
      return end('failed', 'the instance was stopped (by its task) before berth could log in to take them: nothing to download from');

    const refuse = (path: string, why: string) => {
      whole = false;
      this.deps.say(input.runId, 'outputs.refused', `Output ${JSON.stringify(path)} not taken: ${why}.`, { attempt: input.n, path, why });
    };
    try {
      const walk = new Walk(link, signal, refuse, (note) => {
        notes.push(note);
        whole = false;
      });
      const listed: RemoteFile[] = [];
      for (const path of paths) {
        const found = await walk.list(path);
        if (found === null) {
          notes.push(`${path} is not in the container`);
          whole = false;
          continue;
        }
        listed.push(...found);
      }
      const seen = new Set<string>();
      const unique = listed.filter((f) => !seen.has(f.path) && seen.add(f.path));
      const taken = unique.slice(0, MAX_FILES);
      let skipped = unique.length - taken.length;
      let left = this.deps.maxBytes;
      const queue = [...taken];
      // A few files at once; the byte cap reserved before each starts.
      const worker = async () => {
        for (let remote = queue.shift(); remote !== undefined; remote = queue.shift()) {
          if (left <= 0) {
            skipped++;
            continue;
          }
          const limit = Math.min(remote.size, left);
          left -= limit;
          const got = await fetchFile(link, remote, join(dir, keptName(remote.path)), limit, signal, (f) => files.push(f)).catch(
            (err: unknown) => {
              queue.length = 0; // the download ends: the other workers finish their file and stop
              throw err;
            },
          );
          left += limit - got.size;
          if (got.error !== null) {
            whole = false;
            notes.push(`${remote.path}: ${toRunError(got.error).message}`);
          } else if (got.size < remote.size) {
            whole = false;
            if (limit < remote.size)
              notes.push(`files.outputs_max_mb reached: ${remote.path} kept in part (${got.size} of ${remote.size} bytes)`);
          }
        }
      };
      await settleAll(Array.from({ length: Math.min(FILES_IN_FLIGHT, taken.length) }, worker));
      if (skipped > 0) {
        whole = false;
        notes.push(`${skipped} more file${skipped === 1 ? '' : 's'} not downloaded (files.outputs_max_mb or ${MAX_FILES} files reached)`);
      }
      // Tells the wrapper it may stop its instance now (it waits for this, bounded, at the task's end).
      const { shell } = await link.channel();
      await shell.exec(`${taskFilesVar(input.runId, input.n)}; : >"$berth_f.got"`, { signal, onStdout: () => {} }).catch(() => undefined);
      if (files.length === 0) return end('failed', notes.join('; ') || 'no file at the outputs paths');
      return end(whole ? 'kept' : 'partial', notes.join('; '));
    } catch (err) {
      if (signal.aborted) {
        end(files.length > 0 ? 'partial' : 'failed', [...notes, 'stopped before it finished (see the run events)'].join('; '));
        throw err;
      }
      notes.push(toRunError(err).message);
      return end(files.length > 0 ? 'partial' : 'failed', notes.join('; '));
    } finally {
      link.close();
    }
  }
}

/** Waits for every task; rejects with the first failure once all have settled (none left writing). */
async function settleAll(tasks: Array<Promise<void>>): Promise<void> {
  const results = await Promise.allSettled(tasks);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * Runs `work` on the link's channel; a failure of the link logs in again and runs it again (the
 * work resumes from its own state), until the link gives up or the signal aborts.
 */
async function onLink<T>(link: SftpLink, signal: AbortSignal, work: (c: LinkChannel) => Promise<T>): Promise<T> {
  for (;;) {
    const c = await link.channel();
    try {
      return await work(c);
    } catch (err) {
      if (signal.aborted || !isLinkError(err)) throw err;
      link.dropped(c.gen);
    }
  }
}

/** Whether a listed name may be joined to its folder: one component, not the folder or its parent. */
function confinedName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');
}

/** The walk of the outputs' paths: regular files, links inside the paths followed, names confined. */
class Walk {
  /** The real paths of the requested paths walked so far: a link must lead inside one of them. */
  private readonly roots: string[] = [];

  constructor(
    private readonly link: SftpLink,
    private readonly signal: AbortSignal,
    private readonly refuse: (path: string, why: string) => void,
    private readonly note: (text: string) => void,
  ) {}

  /** The regular files at `path` (itself, or below it when a folder); null: not there. */
  async list(path: string): Promise<RemoteFile[] | null> {
    const top = await onLink(this.link, this.signal, ({ sftp }) => statOrNull(sftp, path, this.signal));
    if (top === null) return null;
    const real = await onLink(this.link, this.signal, ({ sftp }) => sftpCall<string>(sftp, this.signal, (cb) => sftp.realpath(path, cb)));
    this.roots.push(real);
    if (top.isFile()) return [{ path, size: top.size }];
    if (!top.isDirectory()) return [];
    const out: RemoteFile[] = [];
    const queue = [path];
    while (queue.length > 0 && out.length < MAX_FILES) {
      const at = queue.shift()!;
      let entries: Array<{ filename: string; attrs: Stats }>;
      try {
        // A drop lists the folder again from its start: a listing has no offset to resume from.
        entries = await onLink(this.link, this.signal, ({ sftp }) =>
          sftpCall<Array<{ filename: string; attrs: Stats }>>(sftp, this.signal, (cb) => readdirFull(sftp, at, cb)),
        );
      } catch (err) {
        if (this.signal.aborted || isLinkError(err) || typeof (err as { code?: unknown }).code !== 'number') throw err;
        this.note(`${at} could not be listed: ${toRunError(err).message}`);
        continue;
      }
      entries.sort((a, b) => (a.filename < b.filename ? -1 : a.filename > b.filename ? 1 : 0));
      for (const e of entries) {
        const isDir = e.attrs.isDirectory();
        // Every folder lists itself and its parent: those are skipped; any other such name is hostile.
        if (isDir && (e.filename === '.' || e.filename === '..')) continue;
        if (!confinedName(e.filename)) {
          this.refuse(`${at}/${e.filename}`, 'its listed name is not one file name in its folder');
          continue;
        }
        const full = posix.join(at, e.filename);
        if (isDir) queue.push(full);
        else if (e.attrs.isFile()) out.push({ path: full, size: e.attrs.size });
        else if (e.attrs.isSymbolicLink()) {
          const file = await this.followLink(full);
          if (file) out.push(file);
        }
      }
    }
    return out;
  }

  /** A link met in the walk: the file it names when that lies inside the requested paths, else refused. */
  private async followLink(path: string): Promise<RemoteFile | null> {
    let real: string;
    let stats: Stats | null;
    try {
      real = await onLink(this.link, this.signal, ({ sftp }) => sftpCall<string>(sftp, this.signal, (cb) => sftp.realpath(path, cb)));
      stats = await onLink(this.link, this.signal, ({ sftp }) => statOrNull(sftp, path, this.signal));
    } catch (err) {
      if (this.signal.aborted || isLinkError(err)) throw err;
      this.refuse(path, `it is a link the server would not follow (${toRunError(err).message})`);
      return null;
    }
    if (!this.roots.some((r) => real === r || real.startsWith(r === '/' ? '/' : `${r}/`))) {
      this.refuse(path, `it is a link to ${real}, outside the paths asked for`);
      return null;
    }
    // A link to a folder is not walked (the folder is walked where it is); a dangling one has nothing.
    return stats?.isFile() ? { path, size: stats.size } : null;
  }
}

type Listing = Array<{ filename: string; attrs: Stats }>;

/** A folder's whole listing, every page, '.' and '..' too (ssh2 drops them unless `full`; its types omit the option). */
function readdirFull(sftp: SFTPWrapper, path: string, cb: (err: Error | undefined, list: Listing) => void): void {
  (sftp.readdir as unknown as (p: string, o: { full: boolean }, c: typeof cb) => void).call(sftp, path, { full: true }, cb);
}

function statOrNull(sftp: SFTPWrapper, path: string, signal: AbortSignal): Promise<Stats | null> {
  return sftpCall<Stats | null>(sftp, signal, (cb) =>
    sftp.stat(path, (err, stats) => (err && (err as { code?: unknown }).code === NO_SUCH_FILE ? cb(undefined, null) : cb(err, stats))),
  );
}

/**
 * One file, its first `limit` bytes, into `<local>.part`, hashed as it comes, resumed from the
 * bytes on disk after a drop; renamed once it ends, and handed to `keep` whatever ended it (what
 * came is kept: partial when short). `error`: the server's refusal that ended it early. Rejects
 * (after `keep`) on an abort or a failure of the disk.
 */
async function fetchFile(
  link: SftpLink,
  remote: RemoteFile,
  local: string,
  limit: number,
  signal: AbortSignal,
  keep: (f: OutputFile) => void,
): Promise<{ size: number; error: unknown }> {
  mkdirSync(dirname(local), { recursive: true });
  const part = `${local}.part`;
  const fd = openSync(part, 'w');
  const hash: Hash = createHash('sha256');
  let size = 0;
  let error: unknown = null;
  let fatal: unknown = null;
  try {
    await onLink(link, signal, ({ sftp }) =>
      readFileRange(
        sftp,
        remote.path,
        { from: size, to: limit },
        (chunk) => {
          writeSync(fd, chunk, 0, chunk.length, size);
          hash.update(chunk);
          size += chunk.length;
        },
        signal,
      ),
    );
  } catch (err) {
    if (signal.aborted || typeof (err as { code?: unknown }).code !== 'number') fatal = err;
    else error = err;
  } finally {
    closeSync(fd);
  }
  renameSync(part, local);
  // Every byte on disk went through the hash in order (written synchronously as it came): no re-read.
  const onDisk = statSync(local).size;
  const sha256 = onDisk === size ? hash.digest('hex') : await sha256Of(local);
  const partial = onDisk < remote.size;
  keep({ path: remote.path, name: keptName(remote.path), size: onDisk, sha256, ...(partial ? { partial: true } : {}) });
  if (fatal !== null) throw fatal;
  return { size: onDisk, error };
}

async function sha256Of(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}
