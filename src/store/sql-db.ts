// The small part of a SQL database the repositories use, so that one repository serves both
// backends: better-sqlite3 (./sqlite-db.ts) and Postgres through a synchronous bridge
// (./pg/pg-db.ts). Synchronous on purpose: the daemon runs a transaction to its end before
// anything else runs, and converting it to async is a larger change than a second backend.
//
// SQL written for it works on both: `?` or `@name` placeholders (translated to $n for Postgres),
// standard functions, and the few differences through `dialect`.

/** A parameter list: positional values, or one object whose keys the `@name` placeholders name. */
type Params = unknown[];

export interface Statement {
  /** Runs it; `changes`: rows it inserted, updated or deleted. */
  run(...params: Params): { changes: number };
  /** The first row, or undefined. */
  get(...params: Params): unknown;
  all(...params: Params): unknown[];
}

/** SQL that differs between the backends. */
export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** The larger of two values (SQLite's two-argument max, Postgres's GREATEST). */
  greatest(a: string, b: string): string;
  /** A subquery of the text values of a JSON array given as one parameter, for `x IN (...)`. */
  jsonTextValues(param: string): string;
}

export interface SqlDb {
  readonly dialect: Dialect;
  prepare(sql: string): Statement;
  /** Runs statements without parameters, in one round trip. */
  exec(sql: string): void;
  /**
   * Runs fn in one transaction, all or nothing: on SQLite an immediate one (it takes the write
   * lock first), on Postgres BEGIN ... COMMIT on the store's one connection. Called inside another,
   * it is a savepoint of it.
   */
  transaction<T>(fn: () => T): T;
}
