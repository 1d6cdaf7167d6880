// The messages between the store's thread and the Postgres worker (./worker.ts, ./bridge.ts).
// Everything crossing is structured-cloned: rows are plain objects, errors are reduced to
// {code, message} with the URL's password removed, so nothing secret rides on a `cause`.

export interface WorkerSettings {
  /** The connection string, password included: it lives in the worker and in no message. */
  url: string;
  /** Longest a statement may run on the server, ms (Postgres's statement_timeout). */
  statementTimeoutMs: number;
  /** Longest a connection may take to be made, ms. */
  connectTimeoutMs: number;
  /**
   * An advisory lock every connection takes before its first statement, or null: while berth has
   * no leases (issue #21 item 2), one daemon per Postgres store, and a connection made again after
   * a loss writes only if this daemon still holds the store.
   */
  exclusiveLock: number | null;
  /** The Int32 the worker sets and notifies once an answer is posted. */
  signal: SharedArrayBuffer;
}

export type Request =
  | {
      id: number;
      kind: 'query';
      sql: string;
      params: unknown[];
      /**
       * Its place in a transaction: 'begin' (BEGIN), 'in' (a statement inside), 'end' (COMMIT or
       * ROLLBACK). A statement inside a transaction whose connection was lost must fail, never run
       * on a new connection outside it.
       */
      txn?: 'begin' | 'in' | 'end' | undefined;
    }
  /** Several statements in one round trip, no parameters (migrations). */
  | { id: number; kind: 'exec'; sql: string }
  | { id: number; kind: 'close' };

export interface QueryResult {
  rows: Record<string, unknown>[];
  /** Rows the statement changed (INSERT, UPDATE, DELETE), else rows returned. */
  rowCount: number;
}

/** A failure as the worker saw it: Postgres's SQLSTATE (e.g. 28P01) or Node's (ECONNREFUSED). */
export interface WireError {
  code: string;
  message: string;
}

export type Answer = { id: number; ok: true; result: QueryResult } | { id: number; ok: false; error: WireError };
