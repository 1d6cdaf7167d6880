// Opens berth.db: WAL, synchronous=FULL (the side-effect journal must survive power loss, not only
// a killed process), migrations by user_version, and the store id that names this database in
// every instance label.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { StoreError } from '../errors.js';
import { acquireLock, type StoreLock } from './lock.js';
import { MIGRATIONS } from './migrations.js';

export type Db = Database.Database;

export interface OpenedDatabase {
  db: Db;
  storeId: string;
  close(): void;
}

export interface OpenOptions {
  /** Directory holding berth.db (BERTH_HOME). */
  home: string;
  /** Take the one-daemon lock (the daemon does; the CLI's read-only tools and tests may not). */
  lock?: boolean;
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

function ensureStoreId(db: Db): string {
  const row = db.prepare(`SELECT value FROM meta WHERE key = 'store_id'`).get() as { value: string } | undefined;
  if (row) return row.value;
  const id = randomBytes(4).toString('hex');
  db.prepare(`INSERT INTO meta (key, value) VALUES ('store_id', ?), ('created_at', ?)`).run(id, String(Date.now()));
  return id;
}

export function openDatabase(options: OpenOptions): OpenedDatabase {
  mkdirSync(options.home, { recursive: true, mode: 0o700 });
  let lock: StoreLock | undefined;
  if (options.lock) lock = acquireLock(join(options.home, 'daemon.lock'));
  let db: Db;
  try {
    db = new Database(join(options.home, 'berth.db'), { timeout: 5000 });
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    migrate(db);
  } catch (err) {
    lock?.release();
    if (err instanceof StoreError) throw err;
    throw new StoreError(`Cannot open ${join(options.home, 'berth.db')}: ${(err as Error).message}`, err);
  }
  const storeId = ensureStoreId(db);
  let closed = false;
  return {
    db,
    storeId,
    close() {
      if (closed) return;
      closed = true;
      try {
        db.pragma('wal_checkpoint(TRUNCATE)');
      } finally {
        db.close();
        lock?.release();
      }
    },
  };
}
