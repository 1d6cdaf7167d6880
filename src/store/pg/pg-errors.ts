// Which Postgres failures are transient (the server restarting, the network cut, a statement timed
// out, a lock or serialization conflict): the store answers them with a StoreWriteError, so a run
// pauses and is retried, and a request is answered 503, as for a busy SQLite file. The one table.
// Anything else (a constraint, a syntax error) is a bug, thrown as it is.

/** SQLSTATE classes (first two characters) that are transient. */
const TRANSIENT_CLASSES = new Set([
  '08', // connection exception
  '53', // insufficient resources (too many connections, disk full)
  '57', // operator intervention: query_canceled (statement_timeout), admin/crash shutdown, cannot connect now
  '40', // transaction rollback: serialization failure, deadlock
  '58', // system error (I/O)
]);

const TRANSIENT_CODES = new Set([
  '55P03', // lock_not_available
  '25P03', // idle_in_transaction_session_timeout
  // Node's, for the socket
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  // The pg client's own (no SQLSTATE): connection lost, connect or query timed out.
  'PG_CONNECTION',
  // No answer within the bridge's bound (./bridge.ts).
  'PG_BRIDGE_TIMEOUT',
  // A connection made again after a loss found another daemon holding the store: no write until
  // this one holds it again (./worker.ts).
  'BERTH_STORE_IN_USE',
]);

export function isTransientPgCode(code: string): boolean {
  return TRANSIENT_CODES.has(code) || (/^[0-9A-Z]{5}$/.test(code) && TRANSIENT_CLASSES.has(code.slice(0, 2)));
}

/** A wrong user or password, or no such database or role: the URL is wrong, not the moment. */
export function isPgAuthCode(code: string): boolean {
  return code.startsWith('28') || code === '3D000';
}
