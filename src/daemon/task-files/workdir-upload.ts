// A task's workdir put into its container over one SSH login (issue #40): the archive `berth
// submit` packed (a tar.gz from the store), unpacked into the task's directory, then the ready-file
// written last, by a rename, holding the archive's sha256: the wrapper (src/job-spec/task-script.ts)
// starts the task only once it reads that hash there, so it never starts with half its code.
//
// How the files go, chosen by what the image has (one probe command first):
//   - `tar` (and `gzip`): the archive put over SFTP into root's home as one file, many writes in
//     flight (src/ssh/sftp-transfer.ts, as OpenSSH's sftp does), then unpacked there by `tar -xzf`
//     run in the directory and deleted: the archive's own compression on the wire, and a try cut by
//     a drop goes on from the bytes the container already has (the next try's login; its name
//     holds the archive's hash, so only the same bytes are ever continued; the last 2 MiB are sent
//     again, as writes in flight may have landed out of order). An image with `tar` but no `gzip`
//     (GNU tar runs gzip for -z) gets the archive unzipped here, `tar -xf`. A server without SFTP
//     gets the archive as the standard input of `tar -x` instead (not resumable).
//   - no `tar` (or it failed): file by file over SFTP (OpenSSH's sftp-server, the standard
//     subsystem the images' sshd serves), from the archive read here, a few files at once, each
//     with its writes in flight; the ready-file written to a temporary name and renamed.
// Both name the directory as the wrapper does: a path under /root from root's home ($HOME for the
// shell; a relative path for SFTP, whose relative paths start there), any other as written.
// Nothing of the workdir's content is ever logged or put in an error: it may hold secrets.
import { webcrypto } from 'node:crypto';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import type { SFTPWrapper } from 'ssh2';
import { Parser, type ReadEntry } from 'tar';
import { BerthError } from '../../errors.js';
import { containerDirWord, WORKDIR_READY_FILE } from '../../job-spec/task-script.js';
import type { ExecOptions, ExecResult } from '../../ssh/session.js';
import { sftpCall, writeFileFrom } from '../../ssh/sftp-transfer.js';

/** What of a login the upload uses (src/ssh/session.ts SshSession). */
export interface UploadSession {
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  sftp(): Promise<SFTPWrapper>;
}

export interface WorkdirUpload {
  /** The task's directory in the container (its plan's `dir`). */
  dir: string;
  sha256: string;
  /** The tar.gz as stored. */
  archive: Buffer;
}

/** How the workdir went: `present` when the ready-file already held its hash (a restarted daemon). */
export type UploadMethod = 'tar' | 'sftp' | 'present';

/** The directory as an SFTP path: under /root relative to the login's home, as the wrapper's `$HOME`. */
function sftpDirOf(dir: string): string {
  const path = dir.replace(/\/+$/, '');
  if (path === '/root') return '.';
  return path.startsWith('/root/') ? path.slice('/root/'.length) : path;
}

/** Puts the workdir into the container and writes its ready-file last; resolves with how it went. */
export async function uploadWorkdir(session: UploadSession, up: WorkdirUpload, signal: AbortSignal): Promise<UploadMethod> {
  // The store's bytes are checked before they go: the wrapper trusts the hash in the ready-file.
  // Hashed off the event loop (WebCrypto's digest runs on libuv's pool) while the probe's round
  // trip goes on: ~0.2 s of CPU for 100 MB, which held up the probe when done first, in line.
  const hashed = webcrypto.subtle.digest('SHA-256', up.archive);
  const wd = containerDirWord(up.dir);
  const probing = session.exec(
    `mkdir -p ${wd} && cd ${wd} || exit 1; ` +
      `if [ -f ${WORKDIR_READY_FILE} ] && read -r berth_l <${WORKDIR_READY_FILE} && [ "$berth_l" = ${up.sha256} ]; then echo present; fi; ` +
      'command -v tar >/dev/null 2>&1 && echo tar; command -v gzip >/dev/null 2>&1 && echo gzip; exit 0',
    { signal, maxOutputBytes: 1024 },
  );
  // The probe only makes the directory: nothing of the archive has gone when a bad hash stops it.
  const [digest] = await Promise.all([hashed, probing.catch(() => undefined)]);
  const got = Buffer.from(digest).toString('hex');
  if (got !== up.sha256) throw new BerthError('store', `The stored workdir archive ${up.sha256} hashes to ${got}: not uploaded.`);
  const probe = await probing;
  const has = new Set(probe.stdout.split(/\s+/));
  if (has.has('present')) return 'present';
  if (probe.code === 0 && has.has('tar')) {
    const gz = has.has('gzip');
    const body = gz ? up.archive : gunzipSync(up.archive);
    const sftp = await session.sftp().catch(() => null);
    try {
      if (sftp) {
        const name = `.berth-workdir-${up.sha256}.tar${gz ? '.gz' : ''}`;
        await putResumable(sftp, name, body, signal);
        const file = `"\${HOME:-/root}"/${name}`;
        const untar = await session.exec(`cd ${wd} && tar -x${gz ? 'z' : ''}f ${file} && rm -f ${file} && ${readyCommand(up.sha256)}`, {
          signal,
          maxOutputBytes: 4096,
        });
        if (untar.code === 0) return 'tar';
        // Unpacking failed (a bad archive on the container's side, a full disk): never continued again.
        await session.exec(`rm -f ${file}`, { signal, maxOutputBytes: 1024 });
      } else {
        const untar = await session.exec(`cd ${wd} && tar -x${gz ? 'z' : ''}f - && ${readyCommand(up.sha256)}`, {
          signal,
          stdin: Readable.from([body]),
          maxOutputBytes: 4096,
        });
        if (untar.code === 0) return 'tar';
      }
      await sftpUpload(sftp ?? (await session.sftp()), up, signal);
      return 'sftp';
    } finally {
      sftp?.end();
    }
  }
  const sftp = await session.sftp();
  try {
    await sftpUpload(sftp, up, signal);
  } finally {
    sftp.end();
  }
  return 'sftp';
}

/** Writes put again before the bytes a cut try left: those in flight may have landed out of order. */
const RESUME_OVERLAP = 2 * 1024 * 1024;

/** `data` into `path`, continuing what an earlier try of the same bytes left there. */
async function putResumable(sftp: SFTPWrapper, path: string, data: Buffer, signal: AbortSignal): Promise<void> {
  const have = await sftpCall<number>(sftp, signal, (cb) =>
    sftp.stat(path, (err, st) => (err && (err as { code?: number }).code === NO_SUCH_FILE ? cb(undefined, -1) : cb(err, st?.size ?? -1))),
  ).catch((err: Error) => {
    throw sftpError(err);
  });
  const fresh = have < 0 || have > data.length;
  await writeFileFrom(sftp, path, data, { from: fresh ? 0 : Math.max(0, have - RESUME_OVERLAP), truncate: fresh }, signal).catch(
    (err: Error) => {
      throw sftpError(err);
    },
  );
}

/** The ready-file, written to a temporary name and renamed: the wrapper never reads half of it. */
function readyCommand(sha256: string): string {
  return `printf '%s\\n' ${sha256} >${WORKDIR_READY_FILE}.tmp && mv -f ${WORKDIR_READY_FILE}.tmp ${WORKDIR_READY_FILE}`;
}

interface Entry {
  path: string;
  type: 'dir' | 'file' | 'link';
  mode: number;
  data?: Buffer;
  linkpath?: string;
}

/** The archive's entries, in its order (a directory before what it holds). */
async function entriesOf(archive: Buffer): Promise<Entry[]> {
  const entries: Entry[] = [];
  const parser = new Parser({
    onReadEntry: (e: ReadEntry) => {
      const path = e.path.replace(/^\.\/?/, '').replace(/\/+$/, '');
      const mode = (e.mode ?? 0o644) & 0o7777;
      if (e.type === 'Directory') {
        if (path !== '') entries.push({ path, type: 'dir', mode });
        return e.resume();
      }
      if (e.type === 'SymbolicLink') {
        entries.push({ path, type: 'link', mode, linkpath: e.linkpath ?? '' });
        return e.resume();
      }
      if (e.type !== 'File' && e.type !== 'OldFile') return e.resume();
      const chunks: Buffer[] = [];
      e.on('data', (c: Buffer) => chunks.push(c));
      e.on('end', () => entries.push({ path, type: 'file', mode, data: Buffer.concat(chunks) }));
    },
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
    parser.end(archive);
  });
  return entries;
}

/** One SFTP call as a promise; `ok` lists the status codes that count as done (a directory already there). */
function call(signal: AbortSignal, run: (cb: (err?: Error | null) => void) => void, ok: number[] = []): Promise<void> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) =>
    run((err) => (err && !ok.includes((err as { code?: number }).code ?? -1) ? reject(sftpError(err)) : resolve())),
  );
}

function sftpError(err: Error): BerthError {
  if (err instanceof BerthError) return err; // already says what failed (a drop, an abort)
  // The message is the server's status text (a path at most, never a file's content).
  return new BerthError('ssh_dropped', `An SFTP call failed: ${err.message}.`, { retryable: true, cause: err });
}

const NO_SUCH_FILE = 2; // SSH_FX_NO_SUCH_FILE
const FAILURE = 4; // SSH_FX_FAILURE: OpenSSH's answer to a mkdir of a directory that exists
const OP_UNSUPPORTED = 8; // SSH_FX_OP_UNSUPPORTED
/** Files written at once by the file-by-file path: a small file then costs a fraction of a round trip. */
const FILES_IN_FLIGHT = 8;

/** File by file over SFTP, the ready-file last (a temporary name, then a rename). */
async function sftpUpload(sftp: SFTPWrapper, up: WorkdirUpload, signal: AbortSignal): Promise<void> {
  const base = sftpDirOf(up.dir);
  const at = (p: string) => (base === '.' ? p : `${base}/${p}`);
  // The directory and its parents (mkdir -p): each may be there already.
  const parts = base.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const p = parts.slice(0, i).join('/');
    if (p === '' || p === '.') continue;
    await call(signal, (cb) => sftp.mkdir(p, cb), [FAILURE]);
  }
  const entries = await entriesOf(up.archive);
  const files = new Map(entries.filter((e) => e.type === 'file').map((e) => [e.path, e]));
  // Folders a level at a time (a parent before what it holds), the folders of one level at once.
  const dirs = entries.filter((e) => e.type === 'dir');
  const depth = (p: string) => p.split('/').length;
  for (const d of [...new Set(dirs.map((e) => depth(e.path)))].sort((a, b) => a - b)) {
    await Promise.all(
      dirs.filter((e) => depth(e.path) === d).map((e) => call(signal, (cb) => sftp.mkdir(at(e.path), { mode: e.mode }, cb), [FAILURE])),
    );
  }
  const queue = entries.filter((e) => e.type === 'file');
  const put = (path: string, data: Buffer, mode: number) =>
    writeFileFrom(sftp, path, data, { from: 0, mode, truncate: true }, signal).catch((err: Error) => {
      throw sftpError(err);
    });
  const worker = async () => {
    for (let e = queue.shift(); e !== undefined; e = queue.shift()) await put(at(e.path), e.data!, e.mode);
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(FILES_IN_FLIGHT, queue.length) }, worker));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  for (const e of entries) {
    if (e.type !== 'link') continue;
    await call(signal, (cb) => sftp.unlink(at(e.path), cb), [2, FAILURE]);
    try {
      await call(signal, (cb) => sftp.symlink(e.linkpath!, at(e.path), cb));
    } catch (err) {
      // A server without links (OP_UNSUPPORTED): a link to a file of the workdir arrives as its copy.
      const target = files.get(posix.normalize(posix.join(posix.dirname(e.path), e.linkpath!)));
      if ((err as { cause?: { code?: number } }).cause?.code !== OP_UNSUPPORTED || !target) throw err;
      await put(at(e.path), target.data!, target.mode);
    }
  }
  const ready = at(WORKDIR_READY_FILE);
  await call(signal, (cb) => sftp.writeFile(`${ready}.tmp`, `${up.sha256}\n`, cb));
  // SFTP version 3's rename does not replace (OpenSSH): the old ready-file goes first.
  await call(signal, (cb) => sftp.unlink(ready, cb), [2]);
  await call(signal, (cb) => sftp.rename(`${ready}.tmp`, ready, cb));
}
