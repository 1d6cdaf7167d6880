// Whether a store failure is another program holding berth.db's write lock (a `sqlite3` shell in a
// transaction, a backup tool): transient, to be waited out, never a reason to stop the daemon or to
// advise a restore. SQLite says SQLITE_BUSY (or an extended SQLITE_BUSY_*) once the busy timeout has
// passed, SQLITE_LOCKED for a conflict inside one process.
import { StoreWriteError } from '../errors.js';
import { isTransientPgCode } from './pg/pg-errors.js';

function sqliteCodeOf(err: unknown): string | undefined {
  if (err instanceof StoreWriteError) return err.sqliteCode;
  const code = err !== null && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

export function isStoreBusy(err: unknown): boolean {
  const code = sqliteCodeOf(err);
  return code !== undefined && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** A damaged database file (or not a database at all): the one store failure a restore is the answer to. */
export function isStoreDamaged(err: unknown): boolean {
  const code = sqliteCodeOf(err);
  return code !== undefined && (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB');
}

/**
 * A Postgres store that does not answer now (the server restarting, the network cut): transient, as
 * ./pg/pg-errors.ts reads its codes; the daemon waits for it as for a locked berth.db.
 */
export function isStoreAway(err: unknown): boolean {
  return err instanceof StoreWriteError && isTransientPgCode(err.sqliteCode);
}
