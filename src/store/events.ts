// The event log of each run: what happened, oldest first, for `berth events`. Appended to, except
// that a repeat of one of the run's last two events (same fold key: a search retried through an
// outage alternates "searching" and "search failed") replaces that row with a count, so an outage
// of any length costs a few rows per run, not one per try. The repeat gets a new id, so that
// `berth events --follow` (which reads after the last id it saw) still shows it.
import type { SqlDb } from './sql-db.js';

export interface EventRow {
  id: number;
  run_id: string;
  at: number;
  type: string;
  message: string;
  data_json: string | null;
  /** How many times this event happened in a row; `at` is the last time, `first_at` the first. */
  count: number;
  first_at: number | null;
  fold_key: string | null;
}

export interface NewEvent {
  runId: string;
  at: number;
  type: string;
  message: string;
  /** Secret-free details (never env values or keys). */
  data?: unknown;
  /** Events with the same key fold into one row when one repeats another of the run's last two. */
  foldKey?: string;
}

export function createEventsRepo(db: SqlDb) {
  const insert = db.prepare(
    `INSERT INTO events (run_id, at, type, message, data_json, count, first_at, fold_key)
     VALUES (@runId, @at, @type, @message, @dataJson, @count, @firstAt, @foldKey) RETURNING id`,
  );
  const lastTwo = db.prepare(`SELECT id, at, count, first_at, fold_key FROM events WHERE run_id = ? ORDER BY id DESC LIMIT 2`);
  const remove = db.prepare(`DELETE FROM events WHERE id = ?`);
  const after = db.prepare(`SELECT * FROM events WHERE run_id = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?`);
  const olderThan = db.prepare(`DELETE FROM events WHERE at < ?`);
  const anyAfter = db.prepare(`SELECT * FROM events WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`);
  const idsAfter = db.prepare(`SELECT id FROM events WHERE id > ? ORDER BY id LIMIT ?`);
  const newest = db.prepare(`SELECT max(id) AS id FROM events`);
  const ofType = db.prepare(`SELECT 1 FROM events WHERE run_id = ? AND type = ? LIMIT 1`);
  // A transaction that drew an event id (INSERT) or removes events holds this lock until it ends.
  const writers =
    db.dialect.name === 'postgres'
      ? db.prepare(
          `SELECT count(*) AS n FROM pg_locks
           WHERE relation = CAST('events' AS regclass) AND mode = 'RowExclusiveLock' AND granted AND pid <> pg_backend_pid()`,
        )
      : undefined;
  return {
    append(e: NewEvent): number {
      let count = 1;
      let firstAt: number | null = null;
      if (e.foldKey !== undefined) {
        const recent = lastTwo.all(e.runId) as Array<Pick<EventRow, 'id' | 'at' | 'count' | 'first_at' | 'fold_key'>>;
        const same = recent.find((r) => r.fold_key === e.foldKey);
        if (same) {
          remove.run(same.id);
          count = same.count + 1;
          firstAt = same.first_at ?? same.at;
        }
      }
      const row = insert.get({
        runId: e.runId,
        at: e.at,
        type: e.type,
        message: e.message,
        dataJson: e.data === undefined ? null : JSON.stringify(e.data),
        count,
        firstAt,
        foldKey: e.foldKey ?? null,
      });
      return (row as { id: number }).id;
    },
    /** The run's events after `afterId` (and up to `upTo`), oldest first. */
    list(runId: string, afterId = 0, limit = 10_000, upTo = Number.MAX_SAFE_INTEGER): EventRow[] {
      return after.all(runId, afterId, upTo, limit) as EventRow[];
    },
    /** Events of every run after `afterId` (and up to `upTo`), oldest first. */
    since(afterId: number, limit: number, upTo = Number.MAX_SAFE_INTEGER): EventRow[] {
      return anyAfter.all(afterId, upTo, limit) as EventRow[];
    },
    /** The ids of the events after `afterId`, ascending (an index-only read: the stream's frontier). */
    idsAfter(afterId: number, limit: number): number[] {
      return (idsAfter.all(afterId, limit) as Array<{ id: number }>).map((r) => r.id);
    },
    /**
     * Whether another connection is in a transaction that writes events now (Postgres). On SQLite
     * never: its writers take turns, so no reader sees an id while a lower one is still in flight.
     */
    othersWriting(): boolean {
      return writers !== undefined && Number((writers.get() as { n: number | string }).n) > 0;
    },
    /** Whether the run's log holds an event of this type (a one-time notice already given). */
    has(runId: string, type: string): boolean {
      return ofType.get(runId, type) !== undefined;
    },
    /** The id of the newest event (0 when there is none). */
    latestId(): number {
      return (newest.get() as { id: number | null }).id ?? 0;
    },
    /** Deletes every event older than `before` (retention). */
    purgeBefore(before: number): number {
      return olderThan.run(before).changes;
    },
  };
}
