// GET /v1/events/stream: Server-Sent Events of the event log as it is stored. Each message is one
// stored event (`id:` its event-log id, `data:` the event with its run id); a client that comes back
// with `Last-Event-ID` (or `?after=`) gets every event stored after that id, so a reconnect loses
// none. Events are read from the store, never from memory: a stream is a cursor over the events
// table, moved on after every committed transaction (store.onCommit, coalesced to one read per
// turn of the event loop) and at each heartbeat.
//
// A store that several daemons share (`storePollMs`): the others' events are found by a timer that
// reads the new event ids once for all streams (./event-frontier.ts), and streams read only up to
// that frontier, so an event whose transaction commits after one with a higher id is still sent,
// in id order, and a reconnect's Last-Event-ID still misses nothing.
//
// A stream's states: sending (reads a page, writes it) → waiting for `drain` when the client reads
// slower than events come (nothing more is read meanwhile, so a slow client costs no memory) → idle
// until the next commit or heartbeat. It ends when the client goes, when the daemon stops (cleanly:
// the response is ended), for one run (`?run=ID`) once that run has ended and its last event was
// sent (an `end` message first), and for a dashboard session's stream once the session has ended.
//
// A stream of one run opened with `output=1` also carries the run's task output while this daemon
// follows it over SSH (../task-end/live-output.ts): `output` messages without an `id:` (they are not
// stored events, so Last-Event-ID still names the last event), written as they come. While the
// client reads slower than they come, they are left out and counted (the next one sent says how
// many): a slow client holds no more than one message in memory.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../../clock.js';
import { PeriodicLoop } from '../../periodic-loop.js';
import type { EventRow, Store } from '../../store/index.js';
import type { StreamEvent, StreamOutput } from '../../wire/control-api.js';
import { EventFrontier } from './event-frontier.js';
import { toRunEvent } from './run-view.js';

/** Events read per query: a stream far behind catches up in pages. */
const PAGE = 500;
/** How long a client waits before it reconnects, ms (the SSE `retry:` field). */
const RETRY_MS = 1000;
/**
 * A shared store's default `storeSettleMs`: how long an event id may be missing, while other
 * connections write events all along, before it counts as gone. Long, because an id counted gone
 * too early is never sent if its transaction commits after all; a quiet moment ends the wait sooner.
 */
const SETTLE_MS = 30_000;

export interface StreamOptions {
  /** Only this run's events; the stream ends once the run has ended. */
  runId?: string;
  /** Send the events stored after this id. */
  after: number;
  /**
   * False once what opened the stream no longer holds: a dashboard session that ended (sign-out,
   * token rotation, idle time), or a control token rotated since. Asked before every send and at
   * every heartbeat; the stream then ends.
   */
  alive?: () => boolean;
  /** With runId: the run's task output too, as `output` messages. */
  output?: boolean;
}

class Stream {
  private cursor: number;
  private draining = false;
  private ended = false;
  /** Output lines not written since the last `output` message (the client read too slowly). */
  private leftOut = 0;
  private unwatch: (() => void) | undefined;
  /** A comment line every so often keeps proxies and clients from timing the stream out. */
  private readonly heartbeat: PeriodicLoop;

  constructor(
    private readonly res: ServerResponse,
    private readonly options: StreamOptions,
    private readonly hub: EventStreams,
  ) {
    this.cursor = options.after;
    this.heartbeat = new PeriodicLoop({
      clock: hub.deps.clock,
      intervalMs: hub.deps.heartbeatMs,
      run: () => {
        if (!this.draining) this.res.write(': heartbeat\n\n');
        this.flush();
      },
      // The response cannot be written: the client reconnects with Last-Event-ID and misses nothing.
      onError: () => {
        this.res.destroy();
        this.close();
      },
    });
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
    this.heartbeat.start();
    const { runId, output } = this.options;
    if (output && runId !== undefined) this.unwatch = this.hub.deps.output?.watch(runId, (o) => this.sendOutput(o));
    this.flush();
  }

  /** A batch of the run's output, written now, or left out (and counted) while the client catches up. */
  private sendOutput(o: StreamOutput): void {
    if (this.ended) return;
    if (this.draining) {
      this.leftOut += o.left_out + o.lines.length;
      return;
    }
    const data: StreamOutput = { ...o, left_out: o.left_out + this.leftOut };
    this.leftOut = 0;
    if (!this.res.write(`event: output\ndata: ${JSON.stringify(data)}\n\n`)) this.draining = true;
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
    const upTo = this.hub.upTo();
    for (;;) {
      // Read before the events: once the run has ended (or retention deleted it), the page read
      // next holds its last event.
      const run = runId === undefined ? undefined : store.runs.get(runId);
      const ended = runId !== undefined && (run === undefined || run.ended_at !== null);
      const rows = runId === undefined ? store.events.since(this.cursor, PAGE, upTo) : store.events.list(runId, this.cursor, PAGE, upTo);
      for (const row of rows) {
        this.cursor = row.id;
        if (!this.res.write(message(row))) this.draining = true;
      }
      if (this.draining) return;
      if (rows.length === PAGE) continue;
      // The run's last events may lie past the frontier still: the end waits for them.
      if (ended && (upTo === Number.MAX_SAFE_INTEGER || store.events.list(runId, this.cursor, 1).length === 0)) {
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
    this.unwatch?.();
    this.heartbeat.stop();
    this.hub.forget(this);
  }
}

function message(row: EventRow): string {
  const event: StreamEvent = { ...toRunEvent(row), run_id: row.run_id };
  // JSON has no raw line breaks, so one data line holds it.
  return `id: ${row.id}\ndata: ${JSON.stringify(event)}\n\n`;
}

export interface EventStreamsDeps {
  store: Store;
  clock: Pick<Clock, 'setTimer' | 'now'>;
  /** Time between heartbeats, ms. */
  heartbeatMs: number;
  /**
   * Set when other daemons write to the same store: every so often (ms) the new events are looked
   * for (one query for all open streams), and streams read only up to the settled frontier.
   */
  storePollMs?: number | undefined;
  /**
   * With storePollMs: how long a missing event id may still be a transaction in flight while other
   * connections keep writing events, ms (default 30000; see ./event-frontier.ts).
   */
  storeSettleMs?: number | undefined;
  /** A followed task's output, for streams opened with `output` (absent: such streams carry events only). */
  output?: { watch(runId: string, fn: (o: StreamOutput) => void): () => void } | undefined;
}

/** Every open stream of the daemon. */
export class EventStreams {
  private readonly open = new Set<Stream>();
  private pending: NodeJS.Immediate | undefined;
  private readonly unsubscribe: () => void;
  private frontier: EventFrontier | undefined;
  /**
   * A shared store: looks for other daemons' events until closeAll, with streams open or not, so
   * that a gap is timed from when it appeared and a new stream does not wait for old gaps to settle.
   */
  private readonly poll: PeriodicLoop | undefined;

  constructor(readonly deps: EventStreamsDeps) {
    this.unsubscribe = deps.store.onCommit(() => this.schedule());
    if (deps.storePollMs === undefined) return;
    this.poll = new PeriodicLoop({
      clock: deps.clock,
      intervalMs: deps.storePollMs,
      run: () => {
        if (this.shared().advance()) for (const s of [...this.open]) s.flush();
      },
      onError: () => {
        // The store cannot be read now: the next tick tries again; streams keep their cursors.
      },
    });
    this.poll.start();
  }

  /** Where a stream without Last-Event-ID starts: a run's from its first event, all runs' from now on. */
  startOf(runId: string | undefined): number {
    if (runId !== undefined) return 0;
    if (this.deps.storePollMs === undefined) return this.deps.store.events.latestId();
    const frontier = this.shared();
    frontier.advance();
    return frontier.value;
  }

  /** The highest event id a stream may read now. */
  upTo(): number {
    return this.deps.storePollMs === undefined ? Number.MAX_SAFE_INTEGER : this.shared().value;
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
    this.poll?.stop();
    if (this.pending) clearImmediate(this.pending);
    this.pending = undefined;
    for (const s of [...this.open]) s.end();
  }

  /** Many commits in one turn (a list that moved a thousand runs) cost one read per stream. */
  private schedule(): void {
    if (this.pending || this.open.size === 0) return;
    this.pending = setImmediate(() => {
      this.pending = undefined;
      if (!this.moveFrontier()) return;
      for (const s of [...this.open]) s.flush();
    });
  }

  /** The frontier of a shared store, made on first use (it reads the store). */
  private shared(): EventFrontier {
    this.frontier ??= new EventFrontier(this.deps.store.events, this.deps.clock, this.deps.storeSettleMs ?? SETTLE_MS);
    return this.frontier;
  }

  /** Reads the new ids (shared store); false when the store cannot be read now (the next tick tries again). */
  private moveFrontier(): boolean {
    try {
      this.frontier?.advanceIfClear();
      return true;
    } catch {
      return false;
    }
  }
}
