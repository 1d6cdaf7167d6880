// Packing a task's workdir for `berth submit` (issue #40, docs/files.md): the directory's files as
// git would commit them, as one tar.gz (node-tar), refused above files.workdir_max_mb (MiB) before
// anything is packed. Symbolic links go in as links; sockets, FIFOs and devices are left out.
// Nothing here prints a file's content: a workdir may hold secrets (a `.env` packed is named in a
// warning, never shown).
//
// The rules are git's (issue #48), read with the `ignore` package, which follows git's syntax:
// `.git` never; the workdir's own `.git/info/exclude` (when it is a repository's root), then its
// `.gitignore`, then the `.gitignore` of each folder below, each of those relative to its folder and
// above the ones of the folders holding it (the last rule that matches decides, as in git; a
// folder left out is not walked, so nothing inside it comes back); `.berthignore` at the root last,
// over all of them (its `!rule` re-includes). The workdir is packed as its own root: the
// `.gitignore` files of the folders above it are not read.
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { create } from 'tar';
import { BerthError } from '../errors.js';

/** A MiB: files.workdir_max_mb and files.outputs_max_mb count in these (docs/configuration.md). */
const MIB = 1024 * 1024;

export interface PackedWorkdir {
  archive: Buffer;
  sha256: string;
  /** Files (and links) packed. */
  files: number;
  /** Their bytes before packing. */
  bytes: number;
  /** What `berth submit` says on stderr before it sends the archive (a `.env` packed). */
  warnings: string[];
}

/** Why a workdir cannot be packed; `code` 'spec' (the CLI's exit 2), said of the spec's `workdir`. */
export class WorkdirError extends BerthError {
  constructor(message: string, cause?: unknown) {
    super('spec', message, { cause });
  }
}

export function megabytes(bytes: number): string {
  return `${(bytes / MIB).toFixed(1)} MiB`;
}

/** The rules of one ignore file, or none when it is not there (unreadable: as git, skipped). */
function readRules(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The repository's `info/exclude` when `dir` is a repository's root (`.git` a folder, or a file naming it). */
function infoExclude(dir: string): string | undefined {
  const dotGit = join(dir, '.git');
  let gitDir = dotGit;
  try {
    if (!statSync(dotGit).isDirectory()) {
      const named = /^gitdir:\s*(.+)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1]?.trim();
      if (!named) return undefined;
      gitDir = join(dir, named);
      // A linked worktree's gitdir names the common one, where info/ is.
      const common = readRules(join(gitDir, 'commondir'))?.trim();
      if (common) gitDir = join(gitDir, common);
    }
  } catch {
    return undefined;
  }
  return readRules(join(gitDir, 'info', 'exclude'));
}

/** One folder's rules: its paths are relative to `base` ('' for the workdir). */
interface Level {
  base: string;
  rules: Ignore;
}

/** Whether `path` (relative to the workdir) is left out: the last level whose rules match decides. */
function leftOut(levels: readonly Level[], path: string, isDir: boolean): boolean {
  let out = false;
  for (const { base, rules } of levels) {
    if (base !== '' && !path.startsWith(`${base}/`)) continue;
    const rel = base === '' ? path : path.slice(base.length + 1);
    const t = rules.test(isDir ? `${rel}/` : rel);
    if (t.ignored) out = true;
    else if (t.unignored) out = false;
  }
  return out;
}

/** A `.env` file (or `.env.local`, ...), but not the examples people commit on purpose. */
const ENV_FILE = /^\.env(\..+)?$/;
const ENV_EXAMPLE = /\.(example|sample|template|dist)$/;

/** The `.env` files packed, named in one warning (their content never shown). */
function envWarnings(paths: string[]): string[] {
  const shipped = paths.filter((p) => ENV_FILE.test(basename(p)) && !ENV_EXAMPLE.test(p));
  if (shipped.length === 0) return [];
  return [
    `the workdir ships ${shipped.join(', ')} to the instance as it is: put its secrets in the spec's \`secrets\` (kept out of logs), or list it in .berthignore`,
  ];
}

/** A file the walk listed was gone (or a folder became unreadable) by the time it was read. */
function walkError(dir: string, path: string, err: unknown): never {
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  if (code === 'ENOENT')
    throw new WorkdirError(
      `${join(dir, path)} vanished while the workdir was packed: submit again once nothing deletes files in ${dir}`,
      err,
    );
  throw new WorkdirError(
    `${join(dir, path)} cannot be read while the workdir is packed (${code}): make it readable, or list it in .berthignore`,
    err,
  );
}

/**
 * The paths to pack, relative to `dir`, '/'-separated, sorted (directories too, so that an empty
 * one arrives), and the bytes of their files. Stops as soon as the files pass `maxBytes`.
 */
function workdirEntries(dir: string, maxBytes: number): { paths: string[]; files: number; bytes: number } {
  // The root's level: `.git`, info/exclude, then the root's .gitignore (later rules win).
  const root = ignore().add('.git');
  for (const text of [infoExclude(dir), readRules(join(dir, '.gitignore'))]) if (text !== undefined) root.add(text);
  const berth = readRules(join(dir, '.berthignore'));
  const last: Level[] = berth === undefined ? [] : [{ base: '', rules: ignore().add(berth) }];
  const paths: string[] = [];
  let files = 0;
  let bytes = 0;
  const walk = (rel: string, levels: readonly Level[]) => {
    const all = [...levels, ...last];
    let names: string[];
    try {
      names = readdirSync(rel === '' ? dir : join(dir, rel)).sort();
    } catch (err) {
      walkError(dir, rel, err);
    }
    for (const name of names) {
      const path = rel === '' ? name : `${rel}/${name}`;
      let st;
      try {
        st = lstatSync(join(dir, path));
      } catch (err) {
        walkError(dir, path, err);
      }
      if (st.isDirectory()) {
        if (leftOut(all, path, true)) continue;
        paths.push(path);
        const own = readRules(join(dir, path, '.gitignore'));
        walk(path, own === undefined ? levels : [...levels, { base: path, rules: ignore().add(own) }]);
      } else if (st.isFile() || st.isSymbolicLink()) {
        if (leftOut(all, path, false)) continue;
        paths.push(path);
        files++;
        bytes += st.size;
      }
      if (bytes > maxBytes) return;
    }
  };
  walk('', [{ base: '', rules: root }]);
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
  const maxBytes = maxMb * MIB;
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
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      hash.update(chunk);
    }
  } catch (err) {
    // A file listed above and deleted before tar read it: one sentence, not a stack trace.
    walkError(dir, (err as { path?: string }).path?.replace(`${dir}/`, '') ?? '', err);
  }
  return { archive: Buffer.concat(chunks), sha256: hash.digest('hex'), files, bytes, warnings: envWarnings(paths) };
}
