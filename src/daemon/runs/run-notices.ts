// The daemon's own word about a run, written as an event on it and, in the same transaction, its
// notification: an idle instance about to be stopped, a budget nearly spent, an account check that
// failed at start. Nothing here drives a run; it only tells.
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { RunHooks } from './run-hooks.js';

export interface RunNoticesDeps {
  store: Store;
  clock: Pick<Clock, 'now'>;
  log: Logger;
  hooks?: RunHooks | undefined;
}

export class RunNotices {
  constructor(private readonly deps: RunNoticesDeps) {}

  /** A notice about a live run (idle.warning): an event on the run and its notification, in one transaction. */
  notice(runId: string, type: 'idle.warning', message: string, data: Record<string, number>): void {
    const { store, clock, hooks, log } = this.deps;
    const row = store.runs.get(runId);
    if (!row || row.ended_at !== null) return;
    const at = clock.now();
    store.transaction(() => {
      const id = store.events.append({ runId, at, type, message, data });
      hooks?.noticed({ id: runId, name: row.name, state: row.state }, type, { id, message, data }, at);
    });
    log.warn({ runId }, `run ${runId}: ${message}`);
  }

  /**
   * The money guard's one-time warning that a run's budget is nearly spent: an event in its log and,
   * in the same transaction, its notification. Given once per run, across restarts (the log says).
   */
  warnBudget(runId: string, message: string, data: Record<string, number>): boolean {
    const { store, clock, hooks, log } = this.deps;
    const row = store.runs.get(runId);
    if (!row || row.ended_at !== null) return false;
    const at = clock.now();
    const given = store.transaction(() => {
      if (store.events.has(runId, 'budget.warning')) return false;
      const id = store.events.append({ runId, at, type: 'budget.warning', message, data });
      hooks?.noticed({ id: runId, name: row.name, state: row.state }, 'budget.warning', { id, message, data }, at);
      return true;
    });
    if (given) log.warn({ runId }, `run ${runId}: ${message}`);
    return given;
  }

  /** One event on each of these runs (an account check that failed at start: it stops them all). */
  noteOn(runIds: readonly string[], type: string, message: string): void {
    const { store, clock } = this.deps;
    if (runIds.length === 0) return;
    store.transaction(() => {
      for (const runId of runIds) store.events.append({ runId, at: clock.now(), type, message, foldKey: `${type}:${message}` });
    });
  }
}
