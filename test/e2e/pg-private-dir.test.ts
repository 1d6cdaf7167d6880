// `npm test` from a clone in a private dir (`mktemp -d` is 0700, so is /root) as root: the test
// Postgres runs as the user `postgres`, which cannot pass that dir to reach the binaries in
// node_modules. The server must start anyway, and a server that cannot start must say why (an
// EACCES spawn error once ended vitest with no count). Root only: another user runs the server as
// itself and reaches whatever it installed.
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { nativeDir, startPgInstance, type PgInstance } from '../helpers/pg-instance.js';

const asRoot = process.getuid?.() === 0;

describe.runIf(asRoot)('the test Postgres server, as root', () => {
  let dirs: string[] = [];
  let server: PgInstance | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    dirs = [];
  });

  it('starts when its binaries are in a private dir that the user postgres cannot pass', { timeout: 60_000 }, async () => {
    // The file's own temp dir is private too: let the server's user through it, as pg-server.ts's /tmp does.
    chmodSync(tmpdir(), 0o711);
    const clone = mkdtempSync(join(tmpdir(), 'clone-'));
    dirs.push(clone);
    const native = join(clone, 'node_modules', 'native');
    cpSync(await nativeDir(), native, { recursive: true, verbatimSymlinks: true });
    chmodSync(clone, 0o700);
    const dir = mkdtempSync(join(tmpdir(), 'pg-'));
    dirs.push(dir);
    server = await startPgInstance(dir, 'private-clone', { native });
    const c = new pg.Client({ connectionString: server.adminUrl });
    await c.connect();
    try {
      expect((await c.query('SELECT 1 + 1 AS two')).rows).toEqual([{ two: 2 }]);
    } finally {
      await c.end();
    }
  });

  it('fails with an error that says why when its user cannot reach its data dir either', { timeout: 60_000 }, async () => {
    const closed = mkdtempSync(join(tmpdir(), 'closed-'));
    dirs.push(closed);
    chmodSync(closed, 0o700);
    const native = join(closed, 'native');
    cpSync(await nativeDir(), native, { recursive: true, verbatimSymlinks: true });
    const dir = join(closed, 'pg');
    mkdirSync(dir);
    await expect(startPgInstance(dir, 'closed', { native })).rejects.toThrow(
      /The test Postgres server did not start \(its binaries\).*EACCES.*let the user postgres through every dir above/s,
    );
  });
});
