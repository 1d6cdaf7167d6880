// Packing a task's workdir for `berth submit` (issue #40, docs/files.md): the directory's files as
// git would commit them (never `.git`, nothing `.gitignore` or `.berthignore` at its root excludes,
// read with the `ignore` package, which follows git's rules), as one tar.gz (node-tar), refused
// above files.workdir_max_mb before anything is packed. Symbolic links go in as links; sockets,
// FIFOs and devices are left out. Nothing here prints a file's content: a workdir may hold secrets.
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { create } from 'tar';
import { BerthError } from '../errors.js';

/** The ignore files read at the workdir's root, in this order (a later one's `!rule` re-includes). */
const IGNORE_FILES = ['.gitignore', '.berthignore'];

export interface PackedWorkdir {
  archive: Buffer;
  sha256: string;
  /** Files (and links) packed. */
  files: number;
  /** Their bytes before packing. */
  bytes: number;
}

/** Why a workdir cannot be packed; `code` 'spec' (the CLI's exit 2), said of the spec's `workdir`. */
export class WorkdirError extends BerthError {
  constructor(message: string, cause?: unknown) {
    super('spec', message, { cause });
  }
}

export function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/** The rules of the root's ignore files, with `.git` always out (git never commits it). */
function rulesOf(dir: string): Ignore {
  const ig = ignore().add('.git');
  for (const name of IGNORE_FILES) {
    let text: string;
    try {
      text = readFileSync(join(dir, name), 'utf8');
    } catch {
      continue;
    }
    ig.add(text);
  }
  return ig;
}

/**
 * The paths to pack, relative to `dir`, '/'-separated, sorted (directories too, so that an empty
 * one arrives), and the bytes of their files. Stops as soon as the files pass `maxBytes`.
 */
function workdirEntries(dir: string, maxBytes: number): { paths: string[]; files: number; bytes: number } {
  const ig = rulesOf(dir);
  const paths: string[] = [];
  let files = 0;
  let bytes = 0;
  const walk = (rel: string) => {
    const names = readdirSync(rel === '' ? dir : join(dir, rel)).sort();
    for (const name of names) {
      const path = rel === '' ? name : `${rel}/${name}`;
      const st = lstatSync(join(dir, path));
      if (st.isDirectory()) {
        if (ig.ignores(`${path}/`)) continue;
        paths.push(path);
        walk(path);
      } else if (st.isFile() || st.isSymbolicLink()) {
        if (ig.ignores(path)) continue;
        paths.push(path);
        files++;
        bytes += st.size;
        if (bytes > maxBytes) return;
      }
      if (bytes > maxBytes) return;
    }
  };
  walk('');
  return { paths, files, bytes };
}

/** Packs `dir` (an absolute path), or throws WorkdirError naming the size and the fix. */
export async function packWorkdir(dir: string, maxMb: number): Promise<PackedWorkdir> {
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    throw new WorkdirError(`${dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}): give a directory`, err);
  }
  if (!isDir) throw new WorkdirError(`${dir} is not a directory`);
  const maxBytes = maxMb * 1_000_000;
  const { paths, files, bytes } = workdirEntries(dir, maxBytes);
  if (bytes > maxBytes)
    throw new WorkdirError(
      `${dir} holds more than ${megabytes(maxBytes)} after .gitignore and .berthignore (files.workdir_max_mb is ${maxMb}): ` +
        `list what the task need not ship in ${join(dir, '.berthignore')} (git's syntax), fetch large data from the task instead, or raise files.workdir_max_mb`,
    );
  const chunks: Buffer[] = [];
  const hash = createHash('sha256');
  // noDirRecurse: exactly the listed paths; portable: no user names, ids or device numbers.
  // An empty workdir is its directory alone (node-tar packs nothing from an empty list).
  const stream = create({ gzip: true, cwd: dir, portable: true, noDirRecurse: true, follow: false }, paths.length > 0 ? paths : ['.']);
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    hash.update(chunk);
  }
  return { archive: Buffer.concat(chunks), sha256: hash.digest('hex'), files, bytes };
}
