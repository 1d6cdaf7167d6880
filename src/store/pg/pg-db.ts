// Postgres behind the SqlDb interface (../sql-db.ts), on the synchronous bridge (./bridge.ts): the
// repositories' SQL with its placeholders translated, transactions as BEGIN ... COMMIT on the one
// connection (savepoints inside), and every transient failure a StoreWriteError, which the daemon
// already answers by pausing the run and trying again (src/daemon/runs/run-driver.ts).
import { StoreWriteError } from '../../errors.js';
import type { Dialect, SqlDb, Statement } from '../sql-db.js';
import { PgCallError, type SyncBridge } from './bridge.js';
import { isTransientPgCode } from './pg-errors.js';
import { bindValues, translatePlaceholders } from './placeholders.js';

const pgDialect: Dialect = {
  name: 'postgres',
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  jsonTextValues: (param) => `(SELECT json_array_elements_text(CAST(${param} AS json)))`,
};

/**
 * Postgres's TEXT cannot hold a NUL character (SQLite's can), and berth keeps text it does not
 * control: container log tails, the service's status messages and error details. A NUL becomes
 * U+FFFD, so such a write is stored instead of failing again at every retry.
 */
function storable(values: unknown[]): unknown[] {
  return values.map((v) => (typeof v === 'string' && v.includes('\u0000') ? v.replaceAll('\u0000', '\ufffd') : v));
}

/** A failed call: transient ones become StoreWriteError (retryable); the rest are thrown as they are. */
function failure(err: unknown): unknown {
  if (err instanceof PgCallError && isTransientPgCode(err.code)) return new StoreWriteError(err.code, err);
  return err;
}

export interface PgDb extends SqlDb {
  close(): void;
}

export function pgDb(bridge: SyncBridge): PgDb {
  let depth = 0;
  const query = (text: string, params: unknown[], txn?: 'begin' | 'end') => {
    try {
      return bridge.call({ kind: 'query', sql: text, params: storable(params), txn: txn ?? (depth > 0 ? 'in' : undefined) });
    } catch (err) {
      throw failure(err);
    }
  };
  const plain = (sql: string, txn?: 'begin' | 'end') => query(sql, [], txn);

  return {
    dialect: pgDialect,
    prepare(sql: string): Statement {
      const t = translatePlaceholders(sql);
      return {
        run: (...params) => ({ changes: query(t.text, bindValues(t, params)).rowCount }),
        get: (...params) => query(t.text, bindValues(t, params)).rows[0],
        all: (...params) => query(t.text, bindValues(t, params)).rows,
      };
    },
    exec(sql: string) {
      try {
        bridge.call({ kind: 'exec', sql });
      } catch (err) {
        throw failure(err);
      }
    },
    transaction<T>(fn: () => T): T {
      const savepoint = depth > 0 ? `berth_${depth}` : null;
      plain(savepoint ? `SAVEPOINT ${savepoint}` : 'BEGIN', savepoint ? undefined : 'begin');
      depth++;
      let result: T;
      try {
        result = fn();
      } catch (err) {
        depth--;
        try {
          plain(savepoint ? `ROLLBACK TO SAVEPOINT ${savepoint}` : 'ROLLBACK', savepoint ? undefined : 'end');
        } catch {
          // The connection is gone: Postgres has rolled the transaction back already.
        }
        throw err;
      }
      depth--;
      if (savepoint) {
        plain(`RELEASE SAVEPOINT ${savepoint}`);
      } else {
        try {
          plain('COMMIT', 'end');
        } catch (err) {
          // A COMMIT that failed on a live connection leaves the transaction aborted: end it.
          try {
            plain('ROLLBACK', 'end');
          } catch {
            // gone with the connection
          }
          throw err;
        }
      }
      return result;
    },
    close() {
      bridge.close();
    },
  };
}
