// The append-only event log of each run: what happened, oldest first, for `berth events`.
import type { Db } from './database.js';

export interface EventRow {
  id: number;
  run_id: string;
  at: number;
  type: string;
  message: string;
  data_json: string | null;
}

export interface NewEvent {
  runId: string;
  at: number;
  type: string;
  message: string;
  /** Secret-free details (never env values or keys). */
  data?: unknown;
}

export function createEventsRepo(db: Db) {
  const insert = db.prepare(
    `INSERT INTO events (run_id, at, type, message, data_json) VALUES (@runId, @at, @type, @message, @dataJson)`,
  );
  const after = db.prepare(`SELECT * FROM events WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?`);
  return {
    append(e: NewEvent): number {
      const info = insert.run({ ...e, dataJson: e.data === undefined ? null : JSON.stringify(e.data) });
      return Number(info.lastInsertRowid);
    },
    list(runId: string, afterId = 0, limit = 10_000): EventRow[] {
      return after.all(runId, afterId, limit) as EventRow[];
    },
  };
}

export type EventsRepo = ReturnType<typeof createEventsRepo>;
