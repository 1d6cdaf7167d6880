// A file deleted while `berth submit` packs its workdir (issue #48 item 6): one sentence naming the
// file and what to do, as a WorkdirError (exit 2 said of the spec's `workdir`), not a stack trace.
// node:fs is wrapped so that listing the folder is followed by the deletion, deterministically.
import type * as Fs from 'node:fs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';

const hooks = vi.hoisted(() => ({ afterReaddir: undefined as undefined | ((dir: string) => void) }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof Fs>();
  const readdirSync = ((path: string, ...rest: unknown[]) => {
    const names = (fs.readdirSync as (...a: unknown[]) => unknown)(path, ...rest);
    hooks.afterReaddir?.(path);
    return names;
  }) as typeof fs.readdirSync;
  return { ...fs, default: { ...fs, readdirSync }, readdirSync };
});

const { packWorkdir, WorkdirError } = await import('../../../src/cli/workdir-pack.js');

let dir: string | undefined;
afterEach(() => {
  hooks.afterReaddir = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('a file that vanishes while the workdir is packed is a one-sentence error naming it', async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-vanish-'));
  writeFileSync(join(dir, 'a.py'), 'x');
  writeFileSync(join(dir, 'b.ckpt'), 'y');
  const root = dir;
  hooks.afterReaddir = (path) => {
    if (path === root) rmSync(join(root, 'b.ckpt'));
  };
  const err = await packWorkdir(root, 1).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(WorkdirError);
  expect((err as Error).message).toBe(
    `${join(root, 'b.ckpt')} vanished while the workdir was packed: submit again once nothing deletes files in ${root}`,
  );
});
