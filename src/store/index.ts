// The store: berth.db opened, migrated and locked, with one repository per table.
import { openDatabase, type OpenOptions } from './database.js';
import { createAttemptsRepo } from './attempts.js';
import { createEventsRepo } from './events.js';
import { createRunsRepo } from './runs.js';

export function openStore(options: OpenOptions) {
  const opened = openDatabase(options);
  const { db } = opened;
  return {
    storeId: opened.storeId,
    runs: createRunsRepo(db),
    attempts: createAttemptsRepo(db),
    events: createEventsRepo(db),
    /** Runs fn in one immediate transaction (all or nothing). */
    transaction<T>(fn: () => T): T {
      return db.transaction(fn).immediate();
    },
    close: opened.close,
  };
}

export type Store = ReturnType<typeof openStore>;
export type { RunRow, RunState } from './runs.js';
export type { AttemptRow } from './attempts.js';
export type { EventRow } from './events.js';
export { isEndState } from './runs.js';
