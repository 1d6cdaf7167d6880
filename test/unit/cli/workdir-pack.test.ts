// Packing a task's workdir (src/cli/workdir-pack.ts, issue #40): what git would commit, with
// .berthignore on top, refused above the cap before anything is packed.
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
    expect((err as Error).message).toMatch(/more than 1\.0 MB after \.gitignore and \.berthignore \(files\.workdir_max_mb is 1\)/);
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
