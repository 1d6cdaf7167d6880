// Opens a Postgres store: connects (any failure here is one sentence naming the server and the
// database, never the password, and the daemon exits 2), migrates under an advisory lock, and reads
// or makes the store id that names the store's instances. The one-daemon lock file and the
// store.json mirror are SQLite's: a Postgres store's identity lives in its database, and a restored
// backup of it is not detected here (README: Postgres store).
import { randomBytes } from 'node:crypto';
import { StoreError } from '../../errors.js';
import type { OpenedDatabase } from '../database.js';
import { describePgUrl, pgUrlProblem } from '../store-url.js';
import { PgCallError, SyncBridge } from './bridge.js';
import { PG_MIGRATIONS } from './migrations.js';
import { isPgAuthCode } from './pg-errors.js';
import { pgDb, type PgDb } from './pg-db.js';
import type { SqlDb } from '../sql-db.js';

/** Longest one statement may run on the server, ms: a store call never takes longer than this. */
const STATEMENT_TIMEOUT_MS = 5_000;
/** Longest a (re)connection may take, ms. */
const CONNECT_TIMEOUT_MS = 3_000;
/**
 * Longest the daemon's thread is blocked for one call, ms: a connect and a statement that both
 * take all their time, and a margin. Past it the worker is ended (./bridge.ts).
 */
const WAIT_MS = CONNECT_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + 2_000;
/** The advisory lock key that serialises migrations of one database (any constant; "berth" in ASCII). */
const MIGRATION_LOCK = 0x6265727468;
/** The advisory lock a daemon holds on every connection to its store (see WorkerSettings.exclusiveLock). */
const DAEMON_LOCK = 0x6265727469;

/** Brings the database's schema up to this berth's, in one transaction (a savepoint inside another). */
export function migratePg(db: SqlDb, where: string): void {
  db.transaction(() => {
    db.prepare(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`).get();
    db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`);
    const row = db.prepare(`SELECT COALESCE(max(version), 0) AS v FROM schema_migrations`).get() as { v: number };
    if (row.v > PG_MIGRATIONS.length) {
      throw new StoreError(
        `The ${where} store has schema version ${row.v}, newer than this berth (${PG_MIGRATIONS.length}). Upgrade berth.`,
      );
    }
    const mark = db.prepare(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`);
    for (let v = row.v; v < PG_MIGRATIONS.length; v++) {
      db.exec(PG_MIGRATIONS[v]!);
      mark.run(v + 1, Date.now());
    }
  });
}

function ensureStoreId(db: PgDb): string {
  // Two daemons opening a new database together: one insert wins, both read it.
  db.prepare(`INSERT INTO meta (key, value) VALUES ('store_id', ?), ('created_at', ?) ON CONFLICT (key) DO NOTHING`).run(
    randomBytes(4).toString('hex'),
    String(Date.now()),
  );
  return (db.prepare(`SELECT value FROM meta WHERE key = 'store_id'`).get() as { value: string }).value;
}

/** One sentence for a failure to open, by its code. */
export function openFailure(where: string, err: unknown): StoreError {
  if (err instanceof StoreError && !(err.cause instanceof PgCallError)) return err;
  const call = err instanceof PgCallError ? err : err instanceof StoreError && err.cause instanceof PgCallError ? err.cause : undefined;
  const what = call ? `${call.code}: ${call.message}` : String((err as Error).message ?? err);
  if (call?.code === 'BERTH_STORE_IN_USE') {
    return new StoreError(
      `Another berth daemon is already using the ${where} store. Stop it first, or set store.url to another database.`,
      call,
    );
  }
  if (call && isPgAuthCode(call.code)) {
    return new StoreError(`Cannot open the ${where} store (${what}): check the user, password and database in store.url.`, call);
  }
  return new StoreError(`Cannot open the ${where} store (${what}): check that the server is up and store.url is right.`, call);
}

export interface PgOpenOptions {
  url: string;
  /** The daemon's open: one daemon per store (an advisory lock held by each of its connections). */
  exclusive?: boolean | undefined;
  /** Shorter bounds for tests of a server that is gone, ms. */
  timeouts?: { statementMs: number; connectMs: number };
}

/** A connection to the database, not yet checked nor migrated (every call may throw). */
export function connectPg(options: PgOpenOptions): PgDb {
  const problem = pgUrlProblem(options.url);
  if (problem) throw new StoreError(`store.url ${problem}.`);
  const statementMs = options.timeouts?.statementMs ?? STATEMENT_TIMEOUT_MS;
  const connectMs = options.timeouts?.connectMs ?? CONNECT_TIMEOUT_MS;
  const bridge = new SyncBridge({
    url: options.url,
    statementTimeoutMs: statementMs,
    connectTimeoutMs: connectMs,
    waitMs: options.timeouts ? connectMs + statementMs + 2_000 : WAIT_MS,
    exclusiveLock: options.exclusive ? DAEMON_LOCK : null,
  });
  return pgDb(bridge);
}

export function openPgDatabase(options: PgOpenOptions): OpenedDatabase {
  const where = describePgUrl(options.url);
  const db = connectPg(options);
  try {
    // Its connections ask for synchronous commits (./worker.ts); a server or pooler that did not
    // honour that would acknowledge commits it may lose: refused, naming the fix.
    const sync = (db.prepare(`SELECT current_setting('synchronous_commit') AS v`).get() as { v: string }).v;
    if (sync === 'off') {
      throw new StoreError(
        `The ${where} store commits with synchronous_commit off: a commit is acknowledged before it is durable, and a server crash would lose what berth did (an instance's create intent). Let berth's sessions set it (a pooler must pass startup options), or ALTER DATABASE ... SET synchronous_commit = on.`,
      );
    }
    migratePg(db, where);
    const storeId = ensureStoreId(db);
    const former = db.prepare(`SELECT value FROM meta WHERE key = 'former_store_ids'`).get() as { value: string } | undefined;
    return {
      db,
      storeId,
      formerStoreIds: JSON.parse(former?.value ?? '[]') as string[],
      restore: null,
      replaced: null,
      // The generation and store.json detect a restored SQLite file; nothing to count here.
      bumpGeneration: () => 0,
      committed: () => undefined,
      close: () => db.close(),
    };
  } catch (err) {
    db.close();
    throw openFailure(where, err);
  }
}
