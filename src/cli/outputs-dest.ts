// Where `berth outputs RUN DEST` writes (issue #48 item 5): the kept files land under DEST without
// ever replacing a local file unasked, and without following a symlink found inside DEST (another
// local user may have planted one: `DEST/out -> /home/victim`), so a copy writes only below DEST.
//
// Every name is checked before a byte is written: each folder under DEST is looked at with lstat
// (a symlink or a file where a folder should be is refused, --force or not), and each file's own
// path is a conflict when anything is there (listed, nothing written, unless --force). A file is
// then streamed to a fresh temporary beside it, opened O_CREAT|O_EXCL|O_NOFOLLOW (never an existing
// path, never through a link), checked against its sha256 by the caller, and renamed over its name:
// rename replaces a symlink there, never what it points to. DEST itself is the user's own choice and
// may be a link. Node has no openat: a folder swapped for a link between the check and the open is
// caught by comparing the temporary's real folder with the one checked, just after the open.
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  createWriteStream,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Writable } from 'node:stream';
import { BerthError } from '../errors.js';

/** Why a name cannot be written as asked. */
export interface DestConflict {
  name: string;
  /** `exists` is lifted by --force; the others never are. */
  kind: 'exists' | 'not_a_file' | 'link_in_path' | 'bad_name' | 'twice';
  path: string;
}

/** The local path each kept name goes to, and what stands in the way. */
export function planDest(root: string, names: string[], force: boolean): { paths: Map<string, string>; conflicts: DestConflict[] } {
  const paths = new Map<string, string>();
  const conflicts: DestConflict[] = [];
  for (const name of names) {
    const parts = name.split('/');
    const to = join(root, ...parts);
    if (parts.some((p) => p === '' || p === '.' || p === '..')) {
      conflicts.push({ name, kind: 'bad_name', path: to });
      continue;
    }
    if (paths.has(name)) {
      conflicts.push({ name, kind: 'twice', path: to });
      continue;
    }
    paths.set(name, to);
    const blocked = blockedFolder(root, parts.slice(0, -1));
    if (blocked) {
      conflicts.push({ name, kind: 'link_in_path', path: blocked });
      continue;
    }
    const there = lstatOrNull(to);
    if (!there) continue;
    if (there.isDirectory()) conflicts.push({ name, kind: 'not_a_file', path: to });
    else if (!force) conflicts.push({ name, kind: 'exists', path: to });
  }
  return { paths, conflicts };
}

/** The first folder of `parts` under root that is there but not a plain folder (a link, a file). */
function blockedFolder(root: string, parts: string[]): string | undefined {
  let at = root;
  for (const p of parts) {
    at = join(at, p);
    const s = lstatOrNull(at);
    if (!s) return undefined; // made when written, not followed
    if (!s.isDirectory()) return at;
  }
  return undefined;
}

function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The folders of `to` under root, made one by one, none of them a link. */
function makeFolders(root: string, to: string): void {
  mkdirSync(root, { recursive: true });
  const rel = to
    .slice(root.length + 1)
    .split('/')
    .slice(0, -1);
  let at = root;
  for (const p of rel) {
    at = join(at, p);
    try {
      mkdirSync(at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (!lstatSync(at).isDirectory()) throw linkRefused(at);
  }
}

const linkRefused = (path: string) =>
  new BerthError('bad_request', `${path} is a symlink or a file, not a folder: not followed; nothing more was copied.`);

/** One file being written: stream into `out`, then `keep()` it under its name or `drop()` it. */
export interface DestFile {
  out: Writable;
  keep(): void;
  drop(): void;
}

/** A temporary beside `to` under root, made without following any link. */
export function openDestFile(root: string, to: string): DestFile {
  makeFolders(root, to);
  const tmp = join(dirname(to), `.${basename(to)}.${randomBytes(6).toString('hex')}.berth-part`);
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  // The folder opened must be the folder checked: one swapped for a link in between leads elsewhere.
  const opened = fstatSync(fd);
  const here = lstatOrNull(tmp);
  if (
    !here ||
    here.ino !== opened.ino ||
    here.dev !== opened.dev ||
    realpathSync(dirname(tmp)) !== join(realpathSync(root), dirname(to).slice(root.length))
  ) {
    closeSync(fd);
    throw linkRefused(dirname(to));
  }
  const out = createWriteStream('', { fd });
  return {
    out,
    keep: () => renameSync(tmp, to),
    drop: () => rmSync(tmp, { force: true }),
  };
}
