// What the daemon's observers (notifications, /metrics) hear from each run's driver, without the
// driver knowing them: one call inside the transaction that stores a transition, one after it has
// committed. Neither may throw for a reason of its own, nor wait.
import type { RunEmitted } from '../../../machines/run-machine.js';
import type { NotifyEvent } from '../../wire/notify-events.js';
import type { RunState } from '../../wire/run-states.js';
import type { LoggedEvent } from './event-log.js';

export interface RunHooks {
  /** One machine event, just written to the event log, inside the transaction: may write to the store (the outbox). */
  stored(run: { id: string; name: string; state: RunState }, e: RunEmitted, logged: LoggedEvent, at: number): void;
  /**
   * The transaction committed. `detectionMs`: when the run became `running` here, the time since
   * the start of the instance list that first showed its instance running (if one did).
   */
  committed(runId: string, events: readonly RunEmitted[], at: number, detectionMs: number | undefined): void;
  /** A notice of the daemon's own about a run (a budget nearly spent), just logged, inside the transaction. */
  noticed(
    run: { id: string; name: string; state: RunState },
    type: NotifyEvent,
    logged: { id: number; message: string; data: unknown },
    at: number,
  ): void;
}
