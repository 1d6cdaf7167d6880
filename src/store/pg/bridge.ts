// A synchronous call into Postgres. The whole daemon uses the store synchronously (better-sqlite3
// is synchronous, and `store.transaction(fn)` runs fn to the end before anything else), so the
// Postgres store keeps that shape: its `pg` client lives in a worker thread (./worker.ts), and each
// call posts one request and blocks this thread with Atomics.wait until the worker answers, then
// takes the answer with receiveMessageOnPort. No event loop turns meanwhile, exactly as during a
// better-sqlite3 call; the cost is one thread hop per statement (docs/postgres.md).
//
// Never a hung daemon: the server bounds a statement (statement_timeout), the client bounds the
// answer (query_timeout), and this side bounds the wait. A wait that runs out terminates the worker,
// which drops its connection (Postgres rolls back what it had open), and the next call starts a new
// worker. Each failure comes back as a PgCallError with a code; ./pg-db.ts decides what it means.
//
// Not synckit's createSyncFn: a timed-out call must take its worker down with it (a late answer
// must never be read as the next call's), and the worker runs as compiled JavaScript in the tests.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { StoreError } from '../../errors.js';
import { packagePath } from '../../package-path.js';
import type { Answer, QueryResult, Request, WorkerSettings } from './protocol.js';

export interface BridgeOptions {
  url: string;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
  /** Longest this thread is blocked for one call, ms; past it the worker is ended. */
  waitMs: number;
  /** See WorkerSettings.exclusiveLock. */
  exclusiveLock?: number | null;
}

/** A call that failed: Postgres's SQLSTATE, a Node error code, or PG_BRIDGE_TIMEOUT. */
export class PgCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'PgCallError';
  }
}

type Distribute<T> = T extends unknown ? Omit<T, 'id'> : never;
type Call = Distribute<Request>;

/** The compiled worker: beside this file in dist/, or dist's copy when running from src/ (vitest). */
function workerPath(): string {
  const here = fileURLToPath(import.meta.url);
  const path = here.endsWith('.js') ? join(dirname(here), 'worker.js') : packagePath('dist', 'src', 'store', 'pg', 'worker.js');
  if (!existsSync(path)) throw new StoreError(`The Postgres worker ${path} is missing: run \`npm run build\`.`);
  return path;
}

interface Live {
  worker: Worker;
  port: MessagePort;
  signal: Int32Array;
}

export class SyncBridge {
  private live: Live | undefined;
  private nextId = 1;

  constructor(private readonly options: BridgeOptions) {}

  private start(): Live {
    const shared = new SharedArrayBuffer(4);
    const settings: WorkerSettings = {
      url: this.options.url,
      statementTimeoutMs: this.options.statementTimeoutMs,
      connectTimeoutMs: this.options.connectTimeoutMs,
      exclusiveLock: this.options.exclusiveLock ?? null,
      signal: shared,
    };
    const worker = new Worker(workerPath(), { workerData: settings });
    // The store's close ends it; it never keeps a process alive on its own.
    worker.unref();
    // A worker that fails to load is seen as a call that times out; the listener keeps the
    // error from becoming an uncaught exception of this thread.
    worker.on('error', () => undefined);
    const { port1, port2 } = new MessageChannel();
    worker.postMessage(port2, [port2]);
    port1.unref();
    return { worker, port: port1, signal: new Int32Array(shared) };
  }

  /** Sends one request and blocks until its answer; throws PgCallError. */
  call(request: Call): QueryResult {
    const live = (this.live ??= this.start());
    const id = this.nextId++;
    const seen = Atomics.load(live.signal, 0);
    live.port.postMessage({ ...request, id });
    const deadline = Date.now() + this.options.waitMs;
    for (;;) {
      const message = receiveMessageOnPort(live.port)?.message as Answer | undefined;
      if (message) {
        if (message.id !== id) continue; // cannot happen: one request at a time, and a timed-out worker is gone
        if (message.ok) return message.result;
        throw new PgCallError(message.error.code, message.error.message);
      }
      const left = deadline - Date.now();
      if (left <= 0) break;
      Atomics.wait(live.signal, 0, seen, left);
    }
    this.stop();
    throw new PgCallError('PG_BRIDGE_TIMEOUT', `no answer from Postgres within ${this.options.waitMs} ms`);
  }

  /** Ends the worker and its connection now (a next call starts another). */
  stop(): void {
    const live = this.live;
    this.live = undefined;
    if (!live) return;
    live.port.close();
    void live.worker.terminate();
  }

  /** Closes the connection cleanly, then ends the worker. */
  close(): void {
    if (!this.live) return;
    try {
      this.call({ kind: 'close' });
    } catch {
      // ended below either way
    }
    this.stop();
  }
}
