// The `sftp` subsystem of an instance's sshd (ssh-server.ts): SFTP version 3 (the protocol OpenSSH's
// sftp-server speaks, draft-ietf-secsh-filexfer-02) on the instance's directory, through the `ssh2`
// package's server side.
//
// The container's file system is the instance's directory, as its onstart sees it (HOME there): a
// path is read as the container's, relative ones from root's home `/root`; `/root/x` and
// `/workspace/x` (the images' usual work directory) both land on `<dir>/x`, any other absolute path
// on `<dir>/<path>`. `..` never climbs above the container's `/`, and a symbolic link that leads
// outside the directory is refused (PERMISSION_DENIED): nothing outside it is reachable. Files are
// written as the instance's processes write them (`nobody` when the simulator runs as root) and
// shown as root's, as in the container.
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  fchmodSync,
  fstatSync,
  ftruncateSync,
  futimesSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  realpathSync,
  renameSync,
  rmdirSync,
  statSync,
  truncateSync,
  unlinkSync,
  utimesSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { dirname, join, posix, relative, sep } from 'node:path';
import ssh2, { type Attributes, type FileEntry, type InputAttributes, type SFTPWrapper } from 'ssh2';
import { runAs } from './onstart-runner.js';

const { STATUS_CODE, flagsToString } = ssh2.utils.sftp;

/** root's home in the container: where relative paths start, and what the instance's directory is. */
const HOME = '/root';
/** Container paths that are the instance's directory itself. */
const ROOTS = [HOME, '/workspace'];

/** Names one READDIR answer holds at most (OpenSSH's sftp-server). */
const READDIR_PAGE = 100;

/** An open file, or an open folder with the names not yet sent (read at the first READDIR). */
type Handle = { kind: 'file'; fd: number } | { kind: 'dir'; path: string; left?: string[] };

class SftpError extends Error {
  constructor(readonly status: number) {
    super(String(status));
  }
}

/** Serves one SFTP session on `dir` until the channel closes (open files are closed then). */
export function serveSftp(sftp: SFTPWrapper, dir: string): void {
  const root = realpathSync(dir);
  const handles = new Map<number, Handle>();
  let next = 1;
  const handleOf = (buf: Buffer): [number, Handle] => {
    const id = buf.length === 4 ? buf.readUInt32BE(0) : -1;
    const h = handles.get(id);
    if (!h) throw new SftpError(STATUS_CODE.FAILURE);
    return [id, h];
  };
  const newHandle = (h: Handle): Buffer => {
    const id = next++;
    handles.set(id, h);
    const buf = Buffer.alloc(4);
    buf.writeUInt32BE(id);
    return buf;
  };
  /** Runs one request; any failure is its status. */
  const serve = (reqid: number, work: () => void) => {
    try {
      work();
    } catch (e) {
      sftp.status(reqid, statusOf(e));
    }
  };
  const ok = (reqid: number) => sftp.status(reqid, STATUS_CODE.OK);
  const path = (p: string, followLast = true) => hostPath(root, p, followLast);

  sftp.on('OPEN', (reqid, filename, flags, attrs) =>
    serve(reqid, () => {
      const mode = flagsToString(flags);
      if (mode === null) throw new SftpError(STATUS_CODE.OP_UNSUPPORTED);
      const host = path(filename);
      const created = !existsSync(host);
      const fd = openSync(host, mode, typeof attrs.mode === 'number' ? attrs.mode & 0o7777 : 0o644);
      if (created) ownAsContainer(host);
      sftp.handle(reqid, newHandle({ kind: 'file', fd }));
    }),
  );
  sftp.on('READ', (reqid, handle, offset, length) =>
    serve(reqid, () => {
      const [, h] = handleOf(handle);
      if (h.kind !== 'file') throw new SftpError(STATUS_CODE.FAILURE);
      const buf = Buffer.alloc(Math.min(length, 256 * 1024));
      const n = readSync(h.fd, buf, 0, buf.length, offset);
      if (n === 0) return sftp.status(reqid, STATUS_CODE.EOF);
      sftp.data(reqid, buf.subarray(0, n));
    }),
  );
  sftp.on('WRITE', (reqid, handle, offset, data) =>
    serve(reqid, () => {
      const [, h] = handleOf(handle);
      if (h.kind !== 'file') throw new SftpError(STATUS_CODE.FAILURE);
      writeSync(h.fd, data, 0, data.length, offset);
      ok(reqid);
    }),
  );
  sftp.on('CLOSE', (reqid, handle) =>
    serve(reqid, () => {
      const [id, h] = handleOf(handle);
      handles.delete(id);
      if (h.kind === 'file') closeSync(h.fd);
      ok(reqid);
    }),
  );
  sftp.on('FSTAT', (reqid, handle) =>
    serve(reqid, () => {
      const [, h] = handleOf(handle);
      sftp.attrs(reqid, attrsOf(h.kind === 'file' ? fstatSync(h.fd) : statSync(h.path)));
    }),
  );
  sftp.on('STAT', (reqid, p) => serve(reqid, () => sftp.attrs(reqid, attrsOf(statSync(path(p))))));
  sftp.on('LSTAT', (reqid, p) => serve(reqid, () => sftp.attrs(reqid, attrsOf(lstatSync(path(p, false))))));
  sftp.on('SETSTAT', (reqid, p, attrs) =>
    serve(reqid, () => {
      setAttrs(path(p), attrs);
      ok(reqid);
    }),
  );
  sftp.on('FSETSTAT', (reqid, handle, attrs) =>
    serve(reqid, () => {
      const [, h] = handleOf(handle);
      if (h.kind !== 'file') throw new SftpError(STATUS_CODE.FAILURE);
      setFdAttrs(h.fd, attrs);
      ok(reqid);
    }),
  );
  sftp.on('OPENDIR', (reqid, p) =>
    serve(reqid, () => {
      const host = path(p);
      if (!statSync(host).isDirectory()) throw new SftpError(STATUS_CODE.FAILURE);
      sftp.handle(reqid, newHandle({ kind: 'dir', path: host }));
    }),
  );
  // Paged as OpenSSH's sftp-server pages it (sftp-server.c process_readdir: "send up to 100
  // entries in one message", then the next READDIR the next ones, then EOF): one answer for a
  // large folder would pass the 256 KiB packet a client accepts (ssh2's bound).
  sftp.on('READDIR', (reqid, handle) =>
    serve(reqid, () => {
      const [, h] = handleOf(handle);
      if (h.kind !== 'dir') throw new SftpError(STATUS_CODE.FAILURE);
      h.left ??= ['.', '..', ...readdirSync(h.path)];
      const page = h.left.splice(0, READDIR_PAGE);
      if (page.length === 0) return sftp.status(reqid, STATUS_CODE.EOF);
      const names: FileEntry[] = [];
      for (const name of page) {
        let stats: Stats;
        try {
          stats = lstatSync(name === '..' && h.path === root ? root : join(h.path, name));
        } catch {
          continue; // gone since the folder was read: left out, as sftp-server does when its lstat fails
        }
        const attrs = attrsOf(stats);
        names.push({ filename: name, longname: longname(name, attrs), attrs });
      }
      sftp.name(reqid, names);
    }),
  );
  sftp.on('MKDIR', (reqid, p, attrs) =>
    serve(reqid, () => {
      const host = path(p);
      mkdirSync(host, typeof attrs.mode === 'number' ? attrs.mode & 0o7777 : 0o755);
      ownAsContainer(host);
      ok(reqid);
    }),
  );
  sftp.on('RMDIR', (reqid, p) =>
    serve(reqid, () => {
      const host = path(p, false);
      if (host === root) throw new SftpError(STATUS_CODE.PERMISSION_DENIED);
      rmdirSync(host);
      ok(reqid);
    }),
  );
  sftp.on('REMOVE', (reqid, p) =>
    serve(reqid, () => {
      unlinkSync(path(p, false));
      ok(reqid);
    }),
  );
  sftp.on('RENAME', (reqid, from, to) =>
    serve(reqid, () => {
      const a = path(from, false);
      const b = path(to, false);
      if (a === root || b === root) throw new SftpError(STATUS_CODE.PERMISSION_DENIED);
      // SFTP v3 rename fails when the target exists (OpenSSH's sftp-server links then unlinks).
      if (existsSync(b)) throw new SftpError(STATUS_CODE.FAILURE);
      renameSync(a, b);
      ok(reqid);
    }),
  );
  sftp.on('REALPATH', (reqid, p) =>
    serve(reqid, () => {
      // Links resolved, as sftp-server's realpath(3) resolves them; a path not there yet as given.
      const host = path(p);
      const shown = containerPath(root, existsSync(host) ? realpathSync(host) : host);
      sftp.name(reqid, [{ filename: shown, longname: shown, attrs: {} as Attributes }]);
    }),
  );
  // A link could lead outside the directory: not offered.
  sftp.on('SYMLINK', (reqid) => sftp.status(reqid, STATUS_CODE.OP_UNSUPPORTED));
  sftp.on('READLINK', (reqid) => sftp.status(reqid, STATUS_CODE.OP_UNSUPPORTED));
  sftp.on('close', () => {
    for (const h of handles.values()) if (h.kind === 'file') closeSync(h.fd);
    handles.clear();
  });
}

/**
 * The host path of a container path in the instance's directory `dir`, read as SFTP reads it (the
 * service's cloud copy reaches the same files, cloud-copies.ts); null when it would lead outside.
 */
export function containerHostPath(dir: string, p: string): string | null {
  try {
    return hostPath(realpathSync(dir), p);
  } catch {
    return null;
  }
}

/**
 * The host path of a container path, inside `root` (the instance's directory, resolved). `..`
 * stops at the container's `/`; a path whose existing part leads outside `root` through a link is
 * refused. `followLast` false: the last component itself may be a link (lstat, remove, rename).
 */
function hostPath(root: string, p: string, followLast = true): string {
  const abs = posix.resolve(HOME, p);
  const base = ROOTS.find((r) => abs === r || abs.startsWith(`${r}/`));
  const rel = base === undefined ? abs.slice(1) : abs.slice(base.length + 1);
  const host = rel === '' ? root : join(root, ...rel.split('/'));
  if (!inside(root, realExisting(followLast ? host : dirname(host)))) throw new SftpError(STATUS_CODE.PERMISSION_DENIED);
  return host;
}

/** The container path of a host path inside `root`: under `/root`. */
function containerPath(root: string, host: string): string {
  const rel = relative(root, host);
  return rel === '' ? HOME : posix.join(HOME, ...rel.split(sep));
}

/** The real path of `p`, or of its nearest existing ancestor (a file about to be made). */
function realExisting(p: string): string {
  for (let d = p; ; d = dirname(d)) {
    try {
      return realpathSync(d);
    } catch {
      if (d === dirname(d)) return d;
    }
  }
}

function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root + sep);
}

function ownAsContainer(p: string): void {
  const { uid, gid } = runAs();
  if (uid !== undefined && gid !== undefined) chownSync(p, uid, gid);
}

function setAttrs(p: string, a: InputAttributes): void {
  if (typeof a.mode === 'number') chmodSync(p, a.mode & 0o7777);
  if (typeof a.size === 'number') truncateSync(p, a.size);
  if (a.atime !== undefined && a.mtime !== undefined) utimesSync(p, a.atime, a.mtime);
}

function setFdAttrs(fd: number, a: InputAttributes): void {
  if (typeof a.mode === 'number') fchmodSync(fd, a.mode & 0o7777);
  if (typeof a.size === 'number') ftruncateSync(fd, a.size);
  if (a.atime !== undefined && a.mtime !== undefined) futimesSync(fd, a.atime, a.mtime);
}

/** What the client sees of a file: its mode, size and times, owned by root as in the container. */
function attrsOf(s: Stats): Attributes {
  return { mode: s.mode, uid: 0, gid: 0, size: s.size, atime: Math.floor(s.atimeMs / 1000), mtime: Math.floor(s.mtimeMs / 1000) };
}

/** An `ls -l` line, as OpenSSH's sftp-server sends in READDIR's longname. */
function longname(name: string, a: Attributes): string {
  const type = (a.mode & 0o170000) === 0o040000 ? 'd' : (a.mode & 0o170000) === 0o120000 ? 'l' : '-';
  const bits = 'rwxrwxrwx'
    .split('')
    .map((c, i) => (a.mode & (1 << (8 - i)) ? c : '-'))
    .join('');
  const when = new Date(a.mtime * 1000).toISOString().slice(0, 16).replace('T', ' ');
  return `${type}${bits}    1 root     root     ${String(a.size).padStart(8)} ${when} ${name}`;
}

function statusOf(e: unknown): number {
  if (e instanceof SftpError) return e.status;
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return STATUS_CODE.NO_SUCH_FILE;
  if (code === 'EACCES' || code === 'EPERM') return STATUS_CODE.PERMISSION_DENIED;
  return STATUS_CODE.FAILURE;
}
