// better-sqlite3 behind the SqlDb interface (./sql-db.ts): a thin pass-through, so the SQLite
// store behaves exactly as it did when the repositories held better-sqlite3 itself.
import type Database from 'better-sqlite3';
import type { Dialect, SqlDb, Statement } from './sql-db.js';

const sqliteDialect: Dialect = {
  name: 'sqlite',
  greatest: (a, b) => `MAX(${a}, ${b})`,
  jsonTextValues: (param) => `(SELECT value FROM json_each(${param}))`,
};

export function sqliteDb(db: Database.Database): SqlDb {
  return {
    dialect: sqliteDialect,
    prepare(sql: string): Statement {
      const s = db.prepare(sql);
      return {
        run: (...params) => ({ changes: s.run(...params).changes }),
        get: (...params) => s.get(...params),
        all: (...params) => s.all(...params),
      };
    },
    exec(sql: string) {
      db.exec(sql);
    },
    transaction<T>(fn: () => T): T {
      // Nested: better-sqlite3 makes the inner one a savepoint.
      return db.transaction(fn).immediate();
    },
  };
}
