// Packing a task's workdir (src/cli/workdir-pack.ts, issue #40): what git would commit (nested
// .gitignore files and .git/info/exclude too, issue #48), with .berthignore on top, a .env shipped
// named in a warning, refused above the cap (MiB) before anything is packed.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Parser, type ReadEntry } from 'tar';
import { afterEach, describe, expect, it } from 'vitest';
import { packWorkdir, WorkdirError } from '../../../src/cli/workdir-pack.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-workdir-'));
  dirs.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** The archive's entries: path to content (files), or to '<dir>' / '-> target'. */
async function entries(archive: Buffer): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const parser = new Parser({
    onReadEntry: (e: ReadEntry) => {
      const chunks: Buffer[] = [];
      e.on('data', (c: Buffer) => chunks.push(c));
      e.on('end', () => {
        const path = e.path.replace(/\/$/, '');
        out[path] = e.type === 'Directory' ? '<dir>' : e.type === 'SymbolicLink' ? `-> ${e.linkpath}` : Buffer.concat(chunks).toString();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
    Readable.from([archive]).pipe(parser as unknown as NodeJS.WritableStream);
  });
  return out;
}

describe('packWorkdir', () => {
  it('packs what git would commit: .git never, .gitignore and .berthignore at the root honoured with git semantics', async () => {
    const dir = tree({
      'train.py': 'print("hi")\n',
      'lib/util.py': 'x = 1\n',
      'lib/cache.pyc': 'junk',
      'data/big.bin': 'big',
      'data/keep.txt': 'kept',
      'logs/run.log': 'log',
      '.git/HEAD': 'ref: refs/heads/main\n',
      'sub/.git': 'gitdir: ../.git/modules/sub\n',
      '.env': 'SECRET=1\n',
      '.gitignore': '*.pyc\nlogs/\n/data/*\n!/data/keep.txt\n',
      '.berthignore': '.env\n',
    });
    mkdirSync(join(dir, 'empty'));
    symlinkSync('train.py', join(dir, 'link.py'));
    const packed = await packWorkdir(dir, 100);
    expect(packed.sha256).toBe(createHash('sha256').update(packed.archive).digest('hex'));
    const got = await entries(packed.archive);
    expect(Object.keys(got).sort()).toEqual(
      ['.berthignore', '.gitignore', 'data', 'data/keep.txt', 'empty', 'lib', 'lib/util.py', 'link.py', 'sub', 'train.py'].sort(),
    );
    expect(got['train.py']).toBe('print("hi")\n');
    expect(got['link.py']).toBe('-> train.py');
    expect(packed.files).toBe(6);
  });

  it("follows git's rules below the root: nested .gitignore files (relative to their folder, deeper ones last) and .git/info/exclude (issue #48)", async () => {
    const dir = tree({
      'train.py': 'x',
      'notes.tmp': 'excluded by info/exclude',
      'keep.tmp': 'the root .gitignore re-includes it over info/exclude',
      '.git/info/exclude': '*.tmp\n',
      '.gitignore': '!keep.tmp\n*.ckpt\n',
      'sub/.gitignore': '.env\n/local.txt\n!wanted.ckpt\n',
      'sub/.env': 'SECRET=1\n',
      'sub/local.txt': 'only sub/local.txt',
      'sub/deeper/local.txt': 'anchored to sub/: this one ships',
      'sub/wanted.ckpt': 'the deeper rule wins',
      'sub/other.ckpt': 'the root rule still applies',
      'cache/.gitignore': '*\n',
      'cache/blob.bin': 'a folder that ignores all it holds',
    });
    const got = await entries((await packWorkdir(dir, 100)).archive);
    expect(Object.keys(got).sort()).toEqual(
      [
        '.gitignore',
        'cache',
        'keep.tmp',
        'sub',
        'sub/.gitignore',
        'sub/deeper',
        'sub/deeper/local.txt',
        'sub/wanted.ckpt',
        'train.py',
      ].sort(),
    );
  });

  it('reads info/exclude through a .git file that names the repository (a linked worktree)', async () => {
    const dir = tree({
      'repo/.git/worktrees/wt/commondir': '../..\n',
      'repo/.git/info/exclude': 'secret.txt\n',
      'wt/.git': 'gitdir: ../repo/.git/worktrees/wt\n',
      'wt/secret.txt': 'x',
      'wt/code.py': 'y',
    });
    const got = await entries((await packWorkdir(join(dir, 'wt'), 100)).archive);
    expect(Object.keys(got).sort()).toEqual(['code.py']);
  });

  it('warns about each .env it ships, naming it but never its content; an example or an ignored one is no warning', async () => {
    const dir = tree({
      '.env': 'TOKEN=abc123\n',
      'sub/.env.local': 'K=v\n',
      '.env.example': 'TOKEN=\n',
      'ignored/.env': 'x',
      '.berthignore': 'ignored/\n',
    });
    const packed = await packWorkdir(dir, 100);
    expect(packed.warnings).toEqual([
      "the workdir ships .env, sub/.env.local to the instance as it is: put its secrets in the spec's `secrets` (kept out of logs), or list it in .berthignore",
    ]);
    expect(JSON.stringify(packed.warnings)).not.toContain('abc123');
    expect((await packWorkdir(tree({ 'a.py': 'x' }), 1)).warnings).toEqual([]);
  });

  it('packs an empty directory', async () => {
    const packed = await packWorkdir(tree({}), 1);
    expect(packed.files).toBe(0);
    expect(packed.archive.length).toBeGreaterThan(0);
  });

  it('refuses a workdir above the cap with its size and the fix, before packing; ignored files do not count', async () => {
    const dir = tree({ 'a.bin': 'x'.repeat(600_000), 'b.bin': 'y'.repeat(600_000), 'ignored/c.bin': 'z'.repeat(5_000_000) });
    writeFileSync(join(dir, '.berthignore'), 'ignored/\n');
    const err = await packWorkdir(dir, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkdirError);
    expect((err as WorkdirError).code).toBe('spec');
    expect((err as Error).message).toMatch(/more than 1\.0 MiB after \.gitignore and \.berthignore \(files\.workdir_max_mb is 1\)/);
    expect((err as Error).message).toMatch(/\.berthignore.*or raise files\.workdir_max_mb/);
    // The same without b.bin fits.
    rmSync(join(dir, 'b.bin'));
    await expect(packWorkdir(dir, 1)).resolves.toMatchObject({ files: 2 });
  });

  it('refuses a path that is not a directory', async () => {
    const dir = tree({ 'f.txt': 'x' });
    await expect(packWorkdir(join(dir, 'f.txt'), 1)).rejects.toThrow(/is not a directory/);
    await expect(packWorkdir(join(dir, 'nope'), 1)).rejects.toThrow(/cannot be read \(ENOENT\)/);
  });
});
