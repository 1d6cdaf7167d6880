// What the control API and `berth logs` ask about the runs being driven, answered for a run that
// any daemon on the store drives (issue #21: several daemons, one store; any of them answers).
//
// The Supervisor answers for the runs it drives itself (its drivers hold the instances in memory);
// `sharedRuns` answers from the store for every run, asking the local Supervisor first so that a
// run driven here is answered as before. Two ports, each as narrow as its user needs:
// - InstanceLookup: the instance a run holds now (RunLogs: a live log is read from it);
// - RunCounts: how many runs are driven and active (GET /healthz, the dashboard's Account page).
import type { AttemptRow, RunRow, Store } from '../../store/index.js';
import { attemptIsLive } from '../../wire/run-states.js';

export interface InstanceLookup {
  /** The instance a live run holds now, or null. */
  instanceOf(runId: string): number | null;
}

export interface RunCounts {
  /** Runs being driven: not ended, not held after a restore. */
  readonly liveCount: number;
  /** Of those, the ones admitted (past the queue of `daemon.max_active_runs`). */
  readonly activeCount: number;
}

/**
 * The instance a run holds as the store shows it: that of its latest attempt, made (an instance id
 * recorded), not ended (no outcome, or `running`) and not confirmed destroyed; null for a run that
 * has ended.
 */
function heldInstance(run: Pick<RunRow, 'ended_at'>, latest: AttemptRow | undefined): number | null {
  if (run.ended_at !== null || !latest || latest.instance_id === null || latest.destroy_confirmed_at !== null) return null;
  return attemptIsLive(latest) ? latest.instance_id : null;
}

export interface SharedRunsDeps {
  store: Pick<Store, 'runs' | 'attempts'>;
  /** This daemon's own drivers (the Supervisor): asked first about the runs it drives. */
  local: InstanceLookup;
}

/** Answers about any daemon's runs, from the store (the local drivers first for an instance). */
export function sharedRuns({ store, local }: SharedRunsDeps): InstanceLookup & RunCounts {
  const counts = () => store.runs.drivenCount();
  return {
    instanceOf(runId) {
      const here = local.instanceOf(runId);
      if (here !== null) return here;
      const run = store.runs.get(runId);
      return run ? heldInstance(run, store.attempts.latest(runId)) : null;
    },
    get liveCount() {
      return counts().live;
    },
    get activeCount() {
      const { live, queued } = counts();
      return live - queued;
    },
  };
}
