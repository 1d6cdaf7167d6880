// Opens berth.db: WAL, synchronous=FULL (the side-effect journal must survive power loss, not only
// a killed process), migrations by user_version, and the store id that names this database in
// every instance label. The daemon's open (with `lock`) also makes BERTH_HOME private, takes the
// one-daemon lock, and compares the database with store.json (./identity.ts) to refuse a database
// that went missing, was emptied or replaced, and to hold the live runs of one restored from a backup.
//
// Every failure here is a StoreError whose message says what to do: the daemon prints it and exits 2,
// except a database another program holds locked: a StoreWriteError (SQLITE_BUSY), waited out.
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, realpathSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { StoreError, StoreWriteError } from '../errors.js';
import { isStoreBusy } from './busy.js';
import { prepareHome } from './home.js';
import { MarkWriter, readMark, type MarkReading } from './identity.js';
import { acquireLock, type StoreLock } from './lock.js';
import { MIGRATIONS } from './migrations.js';
import type { SqlDb } from './sql-db.js';
import { sqliteDb } from './sqlite-db.js';

type Db = Database.Database;

/**
 * How long one statement waits for a write lock another program holds, ms. The wait is a
 * synchronous sleep that freezes the whole daemon, so it is short: a write that still finds the
 * store busy fails, its run is paused and retried later from a timer (src/daemon/runs/run-driver.ts).
 */
const BUSY_TIMEOUT_MS = 50;
/**
 * The same wait while opening (migrations, the store id, a restore's hold), when nothing else runs
 * yet. Longer, so that a short transaction of another program is simply waited out; a longer one
 * fails the open with a StoreWriteError (SQLITE_BUSY), which the daemon waits out and tries again
 * (src/daemon/store-wait.ts): a busy database is never a reason to stop.
 */
const OPEN_BUSY_TIMEOUT_MS = 1_000;

export interface RestoreFound {
  /** The generation store.json had seen, and the older one the database holds. */
  markGeneration: number;
  dbGeneration: number;
  /** Runs the restored database showed live: now held. */
  heldRunIds: string[];
}

export interface OpenedDatabase {
  db: SqlDb;
  storeId: string;
  /** Store ids whose instances this store destroys as orphans (stores it replaced). */
  formerStoreIds: string[];
  /** Set when this open found a database older than store.json (a restored backup). */
  restore: RestoreFound | null;
  /** The store id this open replaced (--replace-store), if any. */
  replaced: string | null;
  /** Call inside a transaction that records progress: returns the generation it commits. */
  bumpGeneration(): number;
  /** Call after that transaction committed: mirrors the generation to store.json. */
  committed(generation: number): void;
  /**
   * A shared (Postgres) store: call inside a transaction that shows the store alive (a lease
   * renewal): bumps the database's generation and returns it, for `committed` (./pg/open.ts).
   */
  advance?(): number;
  close(): void;
}

export interface OpenOptions {
  /** BERTH_HOME: holds berth.db (unless `file` names another), the lock and store.json. */
  home: string;
  /** The SQLite file, when not BERTH_HOME's berth.db (store.url set to a path). */
  file?: string | undefined;
  /** The daemon's open: private home, the one-daemon lock and the store.json checks. Tests may leave it out. */
  lock?: boolean;
  /**
   * Start even though berth.db is missing, empty or another store's while store.json names a
   * previous store: that store's instances are then destroyed as orphans (`berth daemon --replace-store`).
   */
  replaceStore?: boolean | undefined;
}

function migrate(db: Db): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > MIGRATIONS.length) {
    throw new StoreError(`berth.db has schema version ${version}, newer than this berth (${MIGRATIONS.length}). Upgrade berth.`);
  }
  if (version === MIGRATIONS.length) return;
  db.transaction(() => {
    for (let v = version; v < MIGRATIONS.length; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}

const meta = (db: Db, key: string) => (db.prepare(`SELECT value FROM meta WHERE key = ?`).get(key) as { value: string } | undefined)?.value;
const setMeta = (db: Db, key: string, value: string) =>
  db.prepare(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`).run(key, value);

function ensureStoreId(db: Db): string {
  const existing = meta(db, 'store_id');
  if (existing) return existing;
  const id = randomBytes(4).toString('hex');
  db.prepare(`INSERT INTO meta (key, value) VALUES ('store_id', ?), ('created_at', ?)`).run(id, String(Date.now()));
  return id;
}

function fileState(path: string): 'missing' | 'empty' | 'present' {
  try {
    return statSync(path).size === 0 ? 'empty' : 'present';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw err;
  }
}

/** One sentence for a SQLite or file-system failure while opening, by its code. */
function openFailure(dbPath: string, err: unknown): StoreError {
  if (err instanceof StoreError) return err;
  const code = (err as { code?: string }).code ?? '';
  const what = `${code || 'error'}: ${(err as Error).message}`.replace(/\s+/g, ' ').slice(0, 300);
  if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
    return new StoreError(
      `${dbPath} is damaged (${what}): stop here, keep the file, and restore berth.db from a backup (docs/operating.md: Backup, Restore).`,
      err,
    );
  }
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EFBIG' || code.startsWith('SQLITE_IOERR')) {
    return new StoreError(`Cannot write ${dbPath} (${what}): the disk may be full; free some space and start again.`, err);
  }
  // Another program holds the write lock: transient (the daemon waits and tries again).
  if (isStoreBusy(err)) return new StoreWriteError(code, err);
  return new StoreError(`Cannot open ${dbPath} (${what}): check that BERTH_HOME is writable.`, err);
}

/**
 * The one-daemon lock of the database file itself (`<file>.lock`, named by the file's real path, so
 * a symlink or a relative path to it finds the same lock): a second home whose store.url names the
 * same file is refused, as a second daemon on one home is.
 */
function lockDatabaseFile(dbPath: string): StoreLock {
  let real: string;
  try {
    real = join(realpathSync(dirname(dbPath)), basename(dbPath));
    if (existsSync(real)) real = realpathSync(real);
  } catch (err) {
    throw new StoreError(
      `Cannot reach the directory of ${dbPath} (${(err as NodeJS.ErrnoException).code ?? String(err)}): check store.url.`,
      err,
    );
  }
  return acquireLock(
    `${real}.lock`,
    () =>
      `Another berth daemon, from another BERTH_HOME, is already using the store ${real} (store.url names the same SQLite file): ` +
      `one SQLite file takes one daemon. Stop it first, give this daemon a store of its own, or share a Postgres store (docs/several-daemons.md).`,
  );
}

export function openDatabase(options: OpenOptions): OpenedDatabase {
  const { home } = options;
  const dbPath = options.file ?? join(home, 'berth.db');
  let lock: StoreLock | undefined;
  let fileLock: StoreLock | undefined;
  let db: Db | undefined;
  let writer: MarkWriter | undefined;
  try {
    if (options.lock) {
      prepareHome(home);
      lock = acquireLock(join(home, 'daemon.lock'));
      fileLock = lockDatabaseFile(dbPath);
    } else {
      mkdirSync(home, { recursive: true, mode: 0o700 });
    }
    const state = fileState(dbPath);
    const reading: MarkReading = options.lock ? readMark(home) : { kind: 'absent' };
    if (state !== 'present' && reading.kind !== 'absent' && !options.replaceStore) throw missingStore(home, state, reading);
    // A WAL left beside a missing or empty database belongs to another database: never replay it.
    if (state !== 'present') for (const f of ['-wal', '-shm']) rmSync(dbPath + f, { force: true });
    // Created private: SQLite gives berth.db-wal and -shm the mode of the database file.
    if (state === 'missing') closeSync(openSync(dbPath, 'a', 0o600));

    db = new Database(dbPath, { timeout: OPEN_BUSY_TIMEOUT_MS });
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    const check = db.pragma('quick_check(1)', { simple: true });
    if (check !== 'ok') throw Object.assign(new Error(String(check)), { code: 'SQLITE_CORRUPT' });
    migrate(db);
    const moved = meta(db, MOVED_KEY);
    if (options.lock && moved) throw movedStore(dbPath, moved);
    const storeId = ensureStoreId(db);
    let generation = Number(meta(db, 'generation') ?? 0);
    let formerStoreIds = JSON.parse(meta(db, 'former_store_ids') ?? '[]') as string[];
    let restore: RestoreFound | null = null;
    let replaced: string | null = null;

    if (options.lock) {
      const mark = reading.kind === 'mark' ? reading.mark : undefined;
      const other = mark !== undefined && mark.storeId !== storeId;
      if (options.replaceStore) {
        if (state === 'present' && !other) {
          throw new StoreError(
            `--replace-store: there is nothing to replace; ${dbPath} is this home's own store (${storeId}). Start without it.`,
          );
        }
        if (mark && other) {
          replaced = mark.storeId;
          formerStoreIds = [...new Set([...formerStoreIds, mark.storeId])];
          setMeta(db, 'former_store_ids', JSON.stringify(formerStoreIds));
        }
      } else if (other) {
        throw new StoreError(
          `${dbPath} belongs to store ${storeId}, but this home last ran store ${mark.storeId} (store.json): put back store ${mark.storeId}'s berth.db, or start with \`berth daemon --replace-store\` to keep this one and destroy every instance labelled with store ${mark.storeId}.`,
        );
      } else if (mark && mark.generation > generation) {
        const heldAt = Date.now();
        const held = db
          .transaction(() => {
            const ids = (
              db!.prepare(`UPDATE runs SET held_at = ? WHERE ended_at IS NULL AND held_at IS NULL RETURNING id`).all(heldAt) as {
                id: string;
              }[]
            ).map((r) => r.id);
            setMeta(db!, 'restored_at', String(heldAt));
            setMeta(db!, 'generation', String(mark.generation + 1));
            return ids;
          })
          .immediate();
        restore = { markGeneration: mark.generation, dbGeneration: generation, heldRunIds: held };
        generation = mark.generation + 1;
      }
      writer = new MarkWriter(home);
      writer.write({ storeId, generation });
    }

    const opened = db;
    opened.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    const setGeneration = opened.prepare(`UPDATE meta SET value = ? WHERE key = 'generation'`);
    let closed = false;
    return {
      db: sqliteDb(opened),
      storeId,
      formerStoreIds,
      restore,
      replaced,
      bumpGeneration() {
        setGeneration.run(String(generation + 1));
        return generation + 1;
      },
      committed(g) {
        if (g <= generation) return;
        generation = g;
        writer?.write({ storeId, generation: g });
      },
      close() {
        if (closed) return;
        closed = true;
        try {
          opened.pragma('wal_checkpoint(TRUNCATE)');
        } catch {
          // a busy or full store: the WAL is replayed at the next open
        } finally {
          opened.close();
          writer?.close();
          fileLock?.release();
          lock?.release();
        }
      },
    };
  } catch (err) {
    db?.close();
    writer?.close();
    fileLock?.release();
    lock?.release();
    throw openFailure(dbPath, err);
  }
}

/** The meta key that marks a SQLite store `berth store migrate` copied to Postgres (./migrate-to-pg.ts). */
export const MOVED_KEY = 'moved_to';

/** A store `berth store migrate` copied to Postgres: running on both would act twice on the same instances. */
function movedStore(dbPath: string, moved: string): StoreError {
  let to = 'Postgres';
  let at = '';
  try {
    const m = JSON.parse(moved) as { to?: string; at?: string };
    to = m.to ?? to;
    at = m.at ? ` on ${m.at}` : '';
  } catch {
    // an older or hand-written mark: say less
  }
  return new StoreError(
    `${dbPath} was copied to the ${to} store${at} (berth store migrate), which now owns its runs and instances: set store.url (or BERTH_STORE_URL) to that database, and keep this file only as a backup.`,
  );
}

function missingStore(home: string, state: 'missing' | 'empty', reading: MarkReading): StoreError {
  const db = `${join(home, 'berth.db')} is ${state === 'missing' ? 'missing' : 'empty'}`;
  const restore = 'put berth.db back from a backup (docs/operating.md: Backup, Restore)';
  if (reading.kind !== 'mark') {
    return new StoreError(
      `${db}, but store.json shows that a store ran here and its instances may still be billing: ${restore}, or start with \`berth daemon --replace-store\` for a new store (list the old store's id in store.sweep_store_ids to destroy its instances).`,
    );
  }
  const id = reading.mark.storeId;
  return new StoreError(
    `${db}, but store.json shows that store ${id} ran here and its instances may still be billing: ${restore}, or start with \`berth daemon --replace-store\` to begin a new store that destroys every instance labelled with store ${id}.`,
  );
}
