// GET /v1/events/stream: Server-Sent Events of the event log as it is stored. Each message is one
// stored event (`id:` its event-log id, `data:` the event with its run id); a client that comes back
// with `Last-Event-ID` (or `?after=`) gets every event stored after that id, so a reconnect loses
// none. Events are read from the store, never from memory: a stream is a cursor over the events
// table, moved on after every committed transaction (store.onCommit, coalesced to one read per
// turn of the event loop) and at each heartbeat.
//
// A stream's states: sending (reads a page, writes it) → waiting for `drain` when the client reads
// slower than events come (nothing more is read meanwhile, so a slow client costs no memory) → idle
// until the next commit or heartbeat. It ends when the client goes, when the daemon stops (cleanly:
// the response is ended), for one run (`?run=ID`) once that run has ended and its last event was
// sent (an `end` message first), and for a dashboard session's stream once the session has ended.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock, Timer } from '../../clock.js';
import type { EventRow, Store } from '../../store/index.js';
import type { StreamEvent } from '../../wire/control-api.js';
import { toRunEvent } from './run-view.js';

/** Events read per query: a stream far behind catches up in pages. */
const PAGE = 500;
/** How long a client waits before it reconnects, ms (the SSE `retry:` field). */
const RETRY_MS = 1000;

export interface StreamOptions {
  /** Only this run's events; the stream ends once the run has ended. */
  runId?: string;
  /** Send the events stored after this id. */
  after: number;
  /**
   * For a stream opened with a dashboard session: false once the session has ended (sign-out,
   * token rotation, idle time). Asked before every send and at every heartbeat; the stream then ends.
   */
  alive?: () => boolean;
}

class Stream {
  private cursor: number;
  private draining = false;
  private ended = false;
  private heartbeat: Timer | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly options: StreamOptions,
    private readonly hub: EventStreams,
  ) {
    this.cursor = options.after;
  }

  open(): void {
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // A proxy in between must not hold the stream back.
      'x-accel-buffering': 'no',
    });
    this.res.write(`retry: ${RETRY_MS}\n\n`);
    this.res.on('drain', () => {
      this.draining = false;
      this.flush();
    });
    this.res.on('close', () => this.close());
    this.beat();
    this.flush();
  }

  /** Sends what was stored since the cursor, as far as the client takes it. */
  flush(): void {
    if (this.ended || this.draining) return;
    if (this.options.alive && !this.options.alive()) return this.end();
    try {
      this.send();
    } catch {
      // The store cannot be read now: the client reconnects with Last-Event-ID and misses nothing.
      this.res.destroy();
      this.close();
    }
  }

  private send(): void {
    const { store } = this.hub.deps;
    const { runId } = this.options;
    for (;;) {
      // Read before the events: once the run has ended (or retention deleted it), the page read
      // next holds its last event.
      const run = runId === undefined ? undefined : store.runs.get(runId);
      const ended = runId !== undefined && (run === undefined || run.ended_at !== null);
      const rows = runId === undefined ? store.events.since(this.cursor, PAGE) : store.events.list(runId, this.cursor, PAGE);
      for (const row of rows) {
        this.cursor = row.id;
        if (!this.res.write(message(row))) this.draining = true;
      }
      if (this.draining) return;
      if (rows.length === PAGE) continue;
      if (ended) {
        this.res.write('event: end\ndata: {}\n\n');
        this.end();
      }
      return;
    }
  }

  /** Ends the response cleanly (the daemon stops, or the run has ended). */
  end(): void {
    if (this.ended) return;
    this.close();
    this.res.end();
  }

  private close(): void {
    if (this.ended) return;
    this.ended = true;
    this.heartbeat?.cancel();
    this.hub.forget(this);
  }

  /** A comment line every so often keeps proxies and clients from timing the stream out. */
  private beat(): void {
    this.heartbeat = this.hub.deps.clock.setTimer(() => {
      if (this.ended) return;
      if (!this.draining) this.res.write(': heartbeat\n\n');
      this.flush();
      this.beat();
    }, this.hub.deps.heartbeatMs);
  }
}

function message(row: EventRow): string {
  const event: StreamEvent = { ...toRunEvent(row), run_id: row.run_id };
  // JSON has no raw line breaks, so one data line holds it.
  return `id: ${row.id}\ndata: ${JSON.stringify(event)}\n\n`;
}

export interface EventStreamsDeps {
  store: Store;
  clock: Pick<Clock, 'setTimer'>;
  /** Time between heartbeats, ms. */
  heartbeatMs: number;
}

/** Every open stream of the daemon. */
export class EventStreams {
  private readonly open = new Set<Stream>();
  private pending: NodeJS.Immediate | undefined;
  private readonly unsubscribe: () => void;

  constructor(readonly deps: EventStreamsDeps) {
    this.unsubscribe = deps.store.onCommit(() => this.schedule());
  }

  /** Where a stream without Last-Event-ID starts: a run's from its first event, all runs' from now on. */
  startOf(runId: string | undefined): number {
    return runId === undefined ? this.deps.store.events.latestId() : 0;
  }

  serve(_req: IncomingMessage, res: ServerResponse, options: StreamOptions): void {
    const stream = new Stream(res, options, this);
    this.open.add(stream);
    stream.open();
  }

  forget(stream: Stream): void {
    this.open.delete(stream);
  }

  get size(): number {
    return this.open.size;
  }

  /** Sends what is new to every stream now; a stream whose session has ended ends instead. */
  recheck(): void {
    for (const s of [...this.open]) s.flush();
  }

  /** Ends every stream cleanly: the daemon is stopping. */
  closeAll(): void {
    this.unsubscribe();
    if (this.pending) clearImmediate(this.pending);
    this.pending = undefined;
    for (const s of [...this.open]) s.end();
  }

  /** Many commits in one turn (a list that moved a thousand runs) cost one read per stream. */
  private schedule(): void {
    if (this.pending || this.open.size === 0) return;
    this.pending = setImmediate(() => {
      this.pending = undefined;
      for (const s of [...this.open]) s.flush();
    });
  }
}
