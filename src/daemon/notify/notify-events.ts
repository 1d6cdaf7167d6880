// Which events of the run machine become notifications (src/wire/notify-events.ts names them).
// An attempt's end is told once it has ended (its instance confirmed gone), from `attempt.ended`,
// the one event every attempt emits exactly once.
import type { RunEmitted } from '../../../machines/run-machine.js';
import { countsAgainstLimit } from '../../../machines/run-rules.js';
import type { NotifyEvent } from '../../wire/notify-events.js';

export function notifyEventOf(e: RunEmitted): NotifyEvent | null {
  switch (e.type) {
    case 'attempt.running':
      return 'run.running';
    case 'attempt.ended':
      if (e.outcome === 'lost') return 'instance.lost';
      // A task that failed and starts again (max_restarts) is a failed attempt too.
      if (e.outcome === 'task_failed') return 'attempt.failed';
      // A gone offer, a cancel or an expiry is not a failure of the attempt.
      return e.outcome !== 'running' && countsAgainstLimit(e.outcome) ? 'attempt.failed' : null;
    case 'run.failed':
      return e.error.kind === 'task_failed' ? 'run.task_failed' : 'run.failed';
    case 'run.succeeded':
      return 'run.succeeded';
    case 'run.cancelled':
      return 'run.cancelled';
    case 'run.expired':
      return 'run.expired';
    // 'budget.warning' is the money guard's own notice (not a machine event): see Supervisor.warnBudget.
    default:
      return null;
  }
}
