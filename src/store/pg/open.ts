// Opens a Postgres store: connects (any failure here is one sentence naming the server and the
// database, never the password, and the daemon exits 2), migrates under an advisory lock, and reads
// or makes the store id that names the store's instances.
//
// A restored backup is detected as a restored SQLite file is (../identity.ts), with a coarser
// generation: not every transaction bumps it (every daemon's every write would contend for one
// row), but every lease renewal does (`advance`, every third of cluster.lease_s per daemon), and
// each daemon mirrors what it committed in its home's store.json. A database whose generation is
// below the mark of a daemon's home at start was put back from a backup taken before that daemon's
// last renewal: its live runs are held until `berth resume RUN` or `berth cancel RUN`, as after a
// restored berth.db. A mark of another store id (a home that ran a SQLite store) is only replaced.
import { randomBytes } from 'node:crypto';
import { StoreError } from '../../errors.js';
import type { OpenedDatabase, RestoreFound } from '../database.js';
import { MarkWriter, readMark, type MarkReading } from '../identity.js';
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

function generationOf(db: PgDb): number {
  return Number((db.prepare(`SELECT value FROM meta WHERE key = 'generation'`).get() as { value: string } | undefined)?.value ?? 0);
}

/** Holds the live runs of a database older than this home's mark (a restored backup); null when it is not. */
function holdIfRestored(db: PgDb, storeId: string, reading: MarkReading): RestoreFound | null {
  if (reading.kind !== 'mark' || reading.mark.storeId !== storeId) return null;
  const seen = reading.mark.generation;
  return db.transaction(() => {
    const generation = generationOf(db);
    if (seen <= generation) return null;
    const heldAt = Date.now();
    const held = (
      db.prepare(`UPDATE runs SET held_at = ? WHERE ended_at IS NULL AND held_at IS NULL RETURNING id`).all(heldAt) as { id: string }[]
    ).map((r) => r.id);
    db.prepare(`INSERT INTO meta (key, value) VALUES ('restored_at', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`).run(
      String(heldAt),
    );
    db.prepare(`INSERT INTO meta (key, value) VALUES ('generation', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`).run(
      String(seen + 1),
    );
    return { markGeneration: seen, dbGeneration: generation, heldRunIds: held };
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
  /** The daemon's home, whose store.json mirrors the generation (the daemon's open; tests leave it out). */
  markHome?: string | undefined;
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
  let writer: MarkWriter | undefined;
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
    const restore = options.markHome ? holdIfRestored(db, storeId, readMark(options.markHome)) : null;
    writer = options.markHome ? new MarkWriter(options.markHome) : undefined;
    writer?.write({ storeId, generation: generationOf(db) });
    const advance = db.prepare(
      `INSERT INTO meta (key, value) VALUES ('generation', '1')
       ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + 1 AS TEXT) RETURNING value`,
    );
    const mark = writer;
    return {
      db,
      storeId,
      formerStoreIds: JSON.parse(former?.value ?? '[]') as string[],
      restore,
      replaced: null,
      // Not every transaction: the lease renewals count (see the top of the file).
      bumpGeneration: () => 0,
      advance: () => Number((advance.get() as { value: string }).value),
      committed: (generation) => {
        if (generation > 0) mark?.write({ storeId, generation });
      },
      close: () => {
        db.close();
        mark?.close();
      },
    };
  } catch (err) {
    db.close();
    writer?.close();
    throw openFailure(where, err);
  }
}
