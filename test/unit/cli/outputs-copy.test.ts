// `berth outputs RUN DEST` writing to a real temporary folder (issue #48 item 5), its daemon a stub
// that serves the kept bytes: no local file is replaced without --force (the conflicts listed, exit
// 2, nothing written), no symlink inside DEST is followed, every file's sha256 is checked before it
// is kept, --json carries `partial`, and a name with a newline shows as one escaped line (here and
// in `berth status RUN`).
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copyOutputs, type OutputsSource } from '../../../src/cli/commands/outputs.js';
import type { Io } from '../../../src/cli/io.js';
import { runDetail } from '../../../src/cli/render.js';
import type { Run } from '../../../src/wire/control-api.js';

const at = '2026-12-01T12:00:00.000Z';
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

interface Kept {
  name: string;
  bytes: string;
  partial?: true;
}

/** A run whose attempt 1 kept `files` (state `state`), served as kept unless `served` says other bytes. */
function daemon(files: Kept[], opts: { state?: 'kept' | 'partial'; served?: Record<string, string> } = {}) {
  const run = {
    id: 'r1',
    name: 'job',
    state: 'succeeded',
    outputs: [
      {
        attempt: 1,
        state: opts.state ?? 'kept',
        host: 'box',
        bytes: files.reduce((n, f) => n + f.bytes.length, 0),
        detail: opts.state === 'partial' ? 'files.outputs_max_mb reached' : null,
        started_at: at,
        ended_at: at,
        files: files.map((f) => ({
          path: `/root/workdir/${f.name}`,
          name: f.name,
          size: f.bytes.length,
          sha256: sha(f.bytes),
          ...(f.partial ? { partial: true as const } : {}),
        })),
      },
    ],
  } as unknown as Run;
  const asked: string[] = [];
  const source: OutputsSource = {
    getRun: () => Promise.resolve(run),
    downloadOutput: (_id: string, _n: number, name: string, out: Writable) => {
      asked.push(name);
      const body = Buffer.from(opts.served?.[name] ?? files.find((f) => f.name === name)!.bytes);
      return new Promise((resolve, reject) => {
        out.on('error', reject);
        out.end(body, () => resolve({ size: body.length, sha256: sha(body) }));
      });
    },
  };
  return { run, source, asked };
}

function io() {
  const out: string[] = [];
  const err: string[] = [];
  const sink: Io = { out: (l) => out.push(l), err: (l) => err.push(l), live: false, write: () => undefined, columns: 100 };
  return { io: sink, out, err };
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-outputs-copy-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Every entry under `root`, relative, sorted (the temporaries would show here). */
const tree = (root: string) => (readdirSync(root, { recursive: true }) as string[]).sort();

describe('berth outputs RUN DEST', () => {
  it('copies every file by its name and leaves no temporary behind', async () => {
    const { source } = daemon([
      { name: 'out/model.bin', bytes: 'weights' },
      { name: 'log.txt', bytes: 'done' },
    ]);
    const dest = join(dir, 'dest');
    const { io: sink, out } = io();
    expect(await copyOutputs(source, 'r1', dest, {}, sink, undefined)).toBe(0);
    expect(readFileSync(join(dest, 'out', 'model.bin'), 'utf8')).toBe('weights');
    expect(tree(dest)).toEqual(['log.txt', 'out', 'out/model.bin']);
    expect(out).toEqual([`Copied 2 files (11 bytes) of run r1, attempt 1, to ${dest}.`]);
  });

  it('replaces no local file without --force: lists each conflict, exits 2 and writes nothing at all', async () => {
    const { source, asked } = daemon([
      { name: 'new.txt', bytes: 'new' },
      { name: 'out/model.bin', bytes: 'weights' },
    ]);
    mkdirSync(join(dir, 'out'));
    writeFileSync(join(dir, 'out', 'model.bin'), 'mine');
    const { io: sink, err } = io();
    expect(await copyOutputs(source, 'r1', dir, {}, sink, undefined)).toBe(2);
    expect(err[0]).toBe(`Nothing of run r1 was copied: 1 output cannot go to ${dir} as asked (--force replaces those files):`);
    expect(err[1]).toBe(`  out/model.bin: ${join(dir, 'out', 'model.bin')} is already there`);
    expect(asked).toEqual([]);
    expect(existsSync(join(dir, 'new.txt'))).toBe(false);
    expect(readFileSync(join(dir, 'out', 'model.bin'), 'utf8')).toBe('mine');

    expect(await copyOutputs(source, 'r1', dir, { force: true }, io().io, undefined)).toBe(0);
    expect(readFileSync(join(dir, 'out', 'model.bin'), 'utf8')).toBe('weights');
    expect(readFileSync(join(dir, 'new.txt'), 'utf8')).toBe('new');
  });

  it('never follows a symlink planted inside DEST, --force or not', async () => {
    const elsewhere = join(dir, 'elsewhere');
    const dest = join(dir, 'dest');
    mkdirSync(elsewhere);
    mkdirSync(dest);
    symlinkSync(elsewhere, join(dest, 'out'));
    const { source, asked } = daemon([{ name: 'out/model.bin', bytes: 'weights' }]);
    for (const force of [false, true]) {
      const { io: sink, err } = io();
      expect(await copyOutputs(source, 'r1', dest, { force }, sink, undefined)).toBe(2);
      expect(err[0]).not.toContain('--force');
      expect(err[1]).toBe(`  out/model.bin: ${join(dest, 'out')} is a symlink or a file, not a folder (never followed)`);
    }
    expect(asked).toEqual([]);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it('with --force replaces a symlink at a file name itself, never the file it points to', async () => {
    const target = join(dir, 'victim.txt');
    writeFileSync(target, 'precious');
    const dest = join(dir, 'dest');
    mkdirSync(dest);
    symlinkSync(target, join(dest, 'log.txt'));
    const { source } = daemon([{ name: 'log.txt', bytes: 'done' }]);
    expect(await copyOutputs(source, 'r1', dest, {}, io().io, undefined)).toBe(2);
    expect(await copyOutputs(source, 'r1', dest, { force: true }, io().io, undefined)).toBe(0);
    expect(readFileSync(target, 'utf8')).toBe('precious');
    expect(lstatSync(join(dest, 'log.txt')).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(dest, 'log.txt'), 'utf8')).toBe('done');
  });

  it('keeps no file whose bytes do not match the sha256 the daemon kept', async () => {
    const { source } = daemon([{ name: 'out/model.bin', bytes: 'weights' }], { served: { 'out/model.bin': 'WEIGHTS' } });
    await expect(copyOutputs(source, 'r1', dir, {}, io().io, undefined)).rejects.toThrow(
      /^out\/model\.bin came as 7 bytes with sha256 [0-9a-f]{64}, but the daemon kept 7 bytes with sha256 [0-9a-f]{64}: not kept in /,
    );
    expect(tree(dir)).toEqual(['out']);
  });

  it('--json carries each file and its partial flag, as status --json does', async () => {
    const { source } = daemon(
      [
        { name: 'a.bin', bytes: 'aaaa' },
        { name: 'b.bin', bytes: 'bb', partial: true },
      ],
      { state: 'partial' },
    );
    const { io: sink, out, err } = io();
    expect(await copyOutputs(source, 'r1', dir, { json: true }, sink, undefined)).toBe(0);
    expect(JSON.parse(out.join('\n'))).toEqual({
      run: 'r1',
      attempt: 1,
      state: 'partial',
      dest: dir,
      files: [
        { name: 'a.bin', size: 4, sha256: sha('aaaa') },
        { name: 'b.bin', size: 2, sha256: sha('bb'), partial: true },
      ],
    });
    expect(err).toEqual(['These outputs are partial: files.outputs_max_mb reached.']);
  });

  it('shows a name with a newline as one escaped line, in the conflicts and in berth status RUN', async () => {
    const name = 'evil\nName  1  ffff';
    writeFileSync(join(dir, name), 'mine');
    const { run, source } = daemon([{ name, bytes: 'x' }]);
    const { io: sink, err } = io();
    expect(await copyOutputs(source, 'r1', dir, {}, sink, undefined)).toBe(2);
    expect(err[1]).toBe(`  evil\\nName  1  ffff: ${join(dir, 'evil\\nName  1  ffff')} is already there`);
    const detail = runDetail({ ...run, attempts: [], cost: { usd: 0, usd_per_hour: 0 } } as Run, Date.parse(at));
    expect(detail.filter((l) => l.includes('evil'))).toEqual([expect.stringMatching(/^ {2}evil\\nName {2}1 {2}ffff\s+1\s+[0-9a-f]{16}$/)]);
    expect(detail.some((l) => l.startsWith('Name'))).toBe(false);
  });
});
