// `berth store migrate --to URL`: copies a SQLite store into an empty Postgres database, whole:
// every table (runs, attempts, events, the outbox, instance keys, webhook events, kept outputs,
// blobs, the name counters, meta with the store id, so that the instances labelled with it stay this store's), in one Postgres transaction
// that also creates the schema, so a failure part way leaves the database as empty as it was.
//
// The SQLite store is opened as the daemon opens it (its lock taken for the whole copy, so no
// daemon runs on it meanwhile, and checked against store.json), and once the copy has committed
// it is marked as moved: a daemon then refuses to start on it, since two stores with one store id
// would both act on the same instances.
import { countText } from '../count-text.js';
import { StoreError, StoreWriteError } from '../errors.js';
import { MOVED_KEY, openDatabase, type OpenedDatabase } from './database.js';
import { connectPg, migratePg, openFailure } from './pg/open.js';
import type { PgDb } from './pg/pg-db.js';
import type { SqlDb } from './sql-db.js';
import { describePgUrl } from './store-url.js';

/**
 * Every table that holds what a store knows, parents before children: the kept outputs' manifests
 * and the packed workdirs (blobs) too, or a moved workdir run's next attempt would fail over without
 * its code. Not copied: what several daemons of one Postgres store share while they run (leases,
 * rate slots, sightings), which a SQLite store, held by one daemon, never fills for another.
 */
const TABLES = [
  'meta',
  'runs',
  'attempts',
  'events',
  'outbox',
  'webhook_events',
  'instance_keys',
  'run_outputs',
  'blobs',
  'run_name_suffixes',
  // Warm instances billing now (issue #51): a moved store keeps them held, and their spend.
  'warm_holds',
] as const;
type Table = (typeof TABLES)[number];
/** Rows read from SQLite at a time. */
const READ_BATCH = 1_000;
/** Postgres takes at most 65535 parameters in one statement; fewer keeps each INSERT small. */
const MAX_PARAMS = 20_000;

export interface MigrateOptions {
  /** BERTH_HOME (its lock and store.json), and the SQLite file when not its berth.db. */
  home: string;
  file?: string | undefined;
  url: string;
}

export interface MigrateResult {
  storeId: string;
  where: string;
  rows: Record<Table, number>;
}

function columnsOf(db: PgDb, table: Table): string[] {
  const rows = db
    .prepare(
      `SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`,
    )
    .all(table) as { name: string }[];
  return rows.map((r) => r.name);
}

function copyTable(source: SqlDb, target: PgDb, table: Table): number {
  const columns = columnsOf(target, table);
  const perInsert = Math.max(1, Math.floor(MAX_PARAMS / columns.length));
  const read = source.prepare(`SELECT rowid AS berth_rowid, * FROM ${table} WHERE rowid > ? ORDER BY rowid LIMIT ${READ_BATCH}`);
  const statements = new Map<number, ReturnType<PgDb['prepare']>>();
  const insert = (n: number) => {
    let s = statements.get(n);
    if (!s) {
      const row = `(${columns.map(() => '?').join(', ')})`;
      // meta already holds the rows the schema's migration made (generation, purged_spend_usd): the copy's win.
      const conflict = table === 'meta' ? ' ON CONFLICT (key) DO UPDATE SET value = excluded.value' : '';
      s = target.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${Array(n).fill(row).join(', ')}${conflict}`);
      statements.set(n, s);
    }
    return s;
  };
  let copied = 0;
  for (let after = 0; ;) {
    const rows = read.all(after) as Array<Record<string, unknown>>;
    if (rows.length === 0) break;
    after = rows.at(-1)!.berth_rowid as number;
    for (let i = 0; i < rows.length; i += perInsert) {
      const chunk = rows.slice(i, i + perInsert);
      const values = chunk.flatMap((r) =>
        columns.map((c) => {
          if (!(c in r))
            throw new StoreError(`berth.db's ${table} has no column ${c}: start this berth's daemon on it once, then migrate.`);
          return r[c];
        }),
      );
      copied += insert(chunk.length).run(...values).changes;
    }
  }
  return copied;
}

function count(db: SqlDb, table: Table): number {
  return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
}

function ensureEmpty(target: PgDb, where: string): void {
  const tables = target.prepare(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = current_schema()`).get() as { n: number };
  if (tables.n > 0) {
    throw new StoreError(
      `The ${where} database is not empty (${countText(tables.n, 'table')}): migrate into a new, empty database; nothing was changed.`,
    );
  }
}

export function migrateToPg(options: MigrateOptions): MigrateResult {
  const where = describePgUrl(options.url);
  let source: OpenedDatabase | undefined;
  let target: PgDb | undefined;
  try {
    // The daemon's open: its lock (a running daemon is refused), store.json's checks, its schema.
    source = openDatabase({ home: options.home, file: options.file, lock: true });
    const from = source.db;
    try {
      target = connectPg({ url: options.url, exclusive: true });
      ensureEmpty(target, where);
    } catch (err) {
      throw openFailure(where, err);
    }
    const rows = copyAll(from, target, where);
    from
      .prepare(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`)
      .run(MOVED_KEY, JSON.stringify({ to: where, at: new Date().toISOString() }));
    return { storeId: source.storeId, where, rows };
  } finally {
    target?.close();
    source?.close();
  }
}

/** The schema and every row, in one transaction: all of it, or (thrown) none. */
function copyAll(from: SqlDb, pg: PgDb, where: string): Record<Table, number> {
  try {
    return pg.transaction(() => {
      migratePg(pg, where);
      const copied = Object.fromEntries(TABLES.map((t) => [t, copyTable(from, pg, t)])) as Record<Table, number>;
      // Ids copied as they were: the next event and notification are numbered after them.
      for (const [table, column] of [
        ['events', 'id'],
        ['outbox', 'seq'],
        ['warm_holds', 'id'],
      ] as const) {
        pg.prepare(
          `SELECT setval(pg_get_serial_sequence('${table}', '${column}'), COALESCE((SELECT max(${column}) FROM ${table}), 0) + 1, false)`,
        ).get();
      }
      for (const t of TABLES) {
        if (t !== 'meta' && count(pg, t) !== count(from, t)) throw new StoreError(`The copy of ${t} is incomplete: nothing was changed.`);
      }
      return copied;
    });
  } catch (err) {
    if (err instanceof StoreError && !(err instanceof StoreWriteError)) throw err;
    const e = err as { code?: string; message?: string };
    throw new StoreError(
      `The copy into the ${where} database failed (${e.code ?? 'error'}: ${e.message ?? String(err)}): nothing was changed.`,
      err,
    );
  }
}
