// One daemon per store. The lock is an exclusive SQLite lock on a small database of its own,
// `daemon.lock`: SQLite takes it with fcntl, so the kernel releases it the moment its holder dies,
// however it dies. There is nothing stale to detect and no pid to trust: a second daemon is told
// "busy" at once, every time, and a dead one's lock is simply free. (A lock file holding a pid was
// raced by daemons starting together, and blocked start-up when the pid was reused.)
//
// A SQLite store is locked twice: its home (`daemon.lock`, for daemon.json and the control token)
// and its database file (`<file>.lock` beside it, by its real path): two homes whose store.url
// names one file would otherwise both start and both drive the same runs.
import { closeSync, openSync, readFileSync, truncateSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { StoreError } from '../errors.js';

export interface StoreLock {
  path: string;
  release(): void;
}

/** The pid the running daemon wrote in daemon.json, to name it in the refusal (never used to decide). */
function daemonPid(home: string): number | undefined {
  try {
    const pid = (JSON.parse(readFileSync(join(home, 'daemon.json'), 'utf8')) as { pid?: unknown }).pid;
    return typeof pid === 'number' ? pid : undefined;
  } catch {
    return undefined;
  }
}

function tryLock(path: string): Database.Database {
  const db = new Database(path, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // In exclusive locking mode the lock taken here is kept until the connection closes.
    db.exec('BEGIN EXCLUSIVE; COMMIT');
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * Takes the lock at `path`. `busy` says who holds it when another process does (by default: another
 * daemon on the home that holds `path`).
 */
export function acquireLock(path: string, busy?: () => string): StoreLock {
  let db: Database.Database | undefined;
  try {
    closeSync(openSync(path, 'a', 0o600));
    try {
      db = tryLock(path);
    } catch (err) {
      // An older berth wrote its pid here: the file is not a database. Emptying it is safe even if
      // another daemon raced us to it, since the lock lives on the file, not in its content.
      if ((err as { code?: string }).code !== 'SQLITE_NOTADB') throw err;
      truncateSync(path, 0);
      db = tryLock(path);
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'SQLITE_BUSY') {
      if (busy) throw new StoreError(busy(), err);
      const pid = daemonPid(dirname(path));
      throw new StoreError(
        `Another berth daemon${pid ? ` (pid ${pid})` : ''} is already using this store (${dirname(path)}). Stop it first, or set BERTH_HOME to another directory.`,
        err,
      );
    }
    throw new StoreError(`Cannot take the lock ${path} (${code ?? (err as Error).message}): check that BERTH_HOME is writable.`, err);
  }
  const held = db;
  return { path, release: () => held.close() };
}
