// The Postgres worker: a thread that owns one connection and answers the store's requests one at a
// time (./bridge.ts blocks the store's thread until each answer is posted). One connection, so that
// the BEGIN ... COMMIT of a transaction spans every statement sent in between.
//
// States: no connection → connecting (on the first request, or the first after a loss) → connected;
// an error event on the connection (server gone, network cut) drops it, and the next request
// connects again. A transaction open on a lost connection is lost with it: Postgres rolls it back,
// and its next statement here fails, which the store turns into a StoreWriteError.
import { parentPort, workerData } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import pg from 'pg';
import type { Answer, Request, WireError, WorkerSettings } from './protocol.js';

// BIGINT (ms timestamps, count(*)) and NUMERIC arrive as strings; the store works in JS numbers,
// exactly as better-sqlite3 returns them. Every value berth keeps fits in a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number(v));

const settings = workerData as WorkerSettings;
const signal = new Int32Array(settings.signal);
const password = passwordOf(settings.url);

function passwordOf(url: string): string {
  try {
    return decodeURIComponent(new URL(url).password);
  } catch {
    return '';
  }
}

/** An error as it may be shown: its code and a message that never holds the password. */
function wire(err: unknown): WireError {
  const e = err as { code?: unknown; message?: unknown };
  let message = typeof e.message === 'string' ? e.message : String(err);
  if (password) message = message.split(password).join('***');
  // The pg client's own errors carry no SQLSTATE: each is about the connection (lost, timed out).
  return { code: typeof e.code === 'string' && e.code ? e.code : 'PG_CONNECTION', message: message.replace(/\s+/g, ' ').slice(0, 300) };
}

let client: pg.Client | undefined;
/** The connection the open transaction began on; a statement of it runs there or nowhere. */
let txnClient: pg.Client | undefined;

/** First wait after a failed connect before the next try, ms; it doubles up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;
/**
 * A server that cannot be reached: until `until`, requests fail at once with its last error
 * instead of each trying to connect. A connect to a server that does not answer takes the whole
 * connect timeout, and the store's thread is blocked meanwhile; without this every store call of
 * the daemon would cost that much while the server is away.
 */
let down: { until: number; waitMs: number; error: WireError } | undefined;

async function connection(): Promise<pg.Client> {
  if (client) return client;
  if (down && Date.now() < down.until) {
    throw Object.assign(new Error(`${down.error.message} (tried again in ${down.until - Date.now()} ms)`), { code: down.error.code });
  }
  try {
    const c = await connect();
    down = undefined;
    return c;
  } catch (err) {
    const waitMs = down ? Math.min(down.waitMs * 2, RETRY_MAX_MS) : RETRY_FIRST_MS;
    down = { until: Date.now() + waitMs, waitMs, error: wire(err) };
    throw err;
  }
}

async function connect(): Promise<pg.Client> {
  const c = new pg.Client({
    connectionString: settings.url,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    statement_timeout: settings.statementTimeoutMs,
    // Also bounds a statement whose answer never comes back (a cut network the server never saw).
    query_timeout: settings.statementTimeoutMs + 1_000,
    keepAlive: true,
    application_name: 'berth',
    // The server's side of a dead connection (a daemon's machine gone, a partition) must end within
    // a minute or two, not the OS's two hours: until it does, its transaction's locks and the
    // daemon's advisory lock stay taken. A transaction is never left open for long by berth (each
    // runs to its end at once), so one idle for a minute belongs to a frozen daemon.
    //
    // Commits are synchronous whatever the server's or the database's default: with
    // synchronous_commit off a commit is acknowledged before its WAL is on disk, and a server crash
    // then loses transactions berth acted on (a create intent gone: the next owner creates again).
    options: [
      '-c synchronous_commit=on',
      '-c tcp_keepalives_idle=30',
      '-c tcp_keepalives_interval=10',
      '-c tcp_keepalives_count=3',
      '-c idle_in_transaction_session_timeout=60000',
    ].join(' '),
  });
  // Without a listener an error event would end the thread; the request in flight fails on its own.
  c.on('error', () => {
    if (client === c) client = undefined;
  });
  c.on('end', () => {
    if (client === c) client = undefined;
  });
  try {
    await c.connect();
    if (settings.exclusiveLock !== null) {
      const r = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [settings.exclusiveLock]);
      if (!r.rows[0]?.ok) throw Object.assign(new Error('another berth daemon is using this store'), { code: 'BERTH_STORE_IN_USE' });
    }
  } catch (err) {
    c.end().catch(() => undefined);
    throw err;
  }
  client = c;
  return c;
}

/** The pg client's own errors (no SQLSTATE), a connection exception (08) or the server ending it (57P0x). */
function connectionLost(code: string): boolean {
  return !/^[0-9A-Z]{5}$/.test(code) || code.startsWith('08') || code.startsWith('57P');
}

async function answer(req: Request): Promise<Answer> {
  const stale = client !== undefined;
  const first = await attempt(req);
  // A BEGIN sent on a connection the server had already ended (a restart the worker had not seen
  // yet) did nothing: it goes once more, on a new connection. Nothing else is sent twice.
  if (stale && !first.ok && req.kind === 'query' && req.txn === 'begin' && connectionLost(first.error.code)) return attempt(req);
  return first;
}

async function attempt(req: Request): Promise<Answer> {
  try {
    if (req.kind === 'close') {
      const c = client;
      client = undefined;
      await c?.end();
      return { id: req.id, ok: true, result: { rows: [], rowCount: 0 } };
    }
    if (req.kind === 'query' && (req.txn === 'in' || req.txn === 'end')) {
      const began = txnClient;
      if (req.txn === 'end') txnClient = undefined;
      if (!began || began !== client) {
        // Its connection is gone, and with it the transaction (Postgres rolled it back): a
        // ROLLBACK has nothing left to do; anything else fails.
        if (req.txn === 'end' && /^ROLLBACK/i.test(req.sql)) return { id: req.id, ok: true, result: { rows: [], rowCount: 0 } };
        return { id: req.id, ok: false, error: { code: 'PG_CONNECTION', message: 'the connection was lost inside a transaction' } };
      }
    }
    const c = await connection();
    if (req.kind === 'query' && req.txn === 'begin') txnClient = c;
    if (req.kind === 'exec') {
      await c.query(req.sql);
      return { id: req.id, ok: true, result: { rows: [], rowCount: 0 } };
    }
    const r = await c.query({ text: req.sql, values: req.params });
    return { id: req.id, ok: true, result: { rows: r.rows as Record<string, unknown>[], rowCount: r.rowCount ?? 0 } };
  } catch (err) {
    // A connection that failed (lost, timed out, ended by the server) is not used again, whether
    // or not its error or end event has come yet: the next request makes a new one.
    const failure = wire(err);
    if (client && connectionLost(failure.code)) {
      client.end().catch(() => undefined);
      client = undefined;
    }
    return { id: req.id, ok: false, error: failure };
  }
}

parentPort!.once('message', (port: MessagePort) => {
  // One request at a time: the store's thread is blocked until this answer is posted.
  port.on('message', (req: Request) => {
    void answer(req).then((a) => {
      port.postMessage(a);
      Atomics.add(signal, 0, 1);
      Atomics.notify(signal, 0);
    });
  });
});
