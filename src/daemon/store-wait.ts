// A start-up step that finds berth.db locked by another program (a `sqlite3` shell holding
// BEGIN IMMEDIATE, a backup tool), or a Postgres store that does not answer (its server
// restarting, the network cut), waits and tries again, saying so in the log, for as long as it
// takes: the lock is someone else's transaction and the server comes back, and nothing is lost
// meanwhile. The daemon never exits for it (under the systemd unit of docs/operating.md an exit 2
// would keep it down while instances bill) and never advises a restore for it. Any other failure
// is the step's own, thrown as it is. Seen (chaos-pg, seed 184132459): a daemon restarted just
// before its Postgres server was killed exited 2 half way through resuming its runs. The steps
// are made to be called again after a failure part way (runs already resumed are skipped).
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { isStoreAway, isStoreBusy } from '../store/busy.js';

/** First pause between tries, ms; it doubles up to MAX_PAUSE_MS. */
const FIRST_PAUSE_MS = 250;
const MAX_PAUSE_MS = 5_000;
/** While the lock lasts, the log says so again this often. */
const SAY_AGAIN_MS = 30_000;

export interface StoreWaitDeps {
  clock: Pick<Clock, 'now' | 'sleep'>;
  log: Logger;
  /** Ends the wait (the daemon was asked to stop): rejects with BerthError('aborted'). */
  signal?: AbortSignal;
}

/** Runs `step` until it gets through a busy berth.db: `what` says what waits (the log's words). */
export async function whileStoreBusy<T>(what: string, step: () => T, deps: StoreWaitDeps): Promise<T> {
  const { clock, log } = deps;
  const since = clock.now();
  let pause = FIRST_PAUSE_MS;
  let saidAt: number | undefined;
  let away = false;
  for (;;) {
    try {
      const result = step();
      if (saidAt !== undefined) {
        const waited = (clock.now() - since) / 1000;
        const store = away ? 'the Postgres store answers again' : 'berth.db is free again';
        log.info({ waited_s: waited }, `${store} after ${waited.toFixed(1)} s: went on to ${what}`);
      }
      return result;
    } catch (err) {
      away = isStoreAway(err);
      if (!away && !isStoreBusy(err)) throw err;
      if (saidAt === undefined || clock.now() - saidAt >= SAY_AGAIN_MS) {
        saidAt = clock.now();
        log.warn(
          {
            code: (err as { sqliteCode?: string; code?: string }).sqliteCode ?? (err as { code?: string }).code,
            waited_s: (saidAt - since) / 1000,
          },
          away
            ? `the Postgres store does not answer (its server restarting or out of reach?): waiting for it to ${what}; trying again every few seconds, nothing is lost meanwhile`
            : `berth.db is locked by another program (a sqlite3 shell or a backup holding a transaction?): waiting for it to ${what}; trying again every few seconds, nothing is lost meanwhile`,
        );
      }
    }
    await clock.sleep(pause, deps.signal);
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
  }
}
