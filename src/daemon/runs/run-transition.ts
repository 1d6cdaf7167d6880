// One transition of a run, stored: the events it emitted (each journaled into the attempts table and
// written to the event log, its notification queued by the hooks), a `state` event when the run's
// state changed, and the run row with the machine's snapshot, all in one transaction written only
// while this daemon holds the run (the ownership fence). The run driver (./run-driver.ts) calls it
// after every transition; what the driver does when it throws (pause, hand over) is the driver's.
import { RUN_MACHINE_VERSION, type RunEmitted } from '../../../machines/run-machine.js';
import { describeAttempts, ERRORS_LISTING_ATTEMPTS, type AttemptOutcome, type RunError } from '../../../machines/run-rules.js';
import type { RunPlan } from '../../job-spec/run-plan.js';
import type { AttemptRow, RunState, Store } from '../../store/index.js';
import type { RunOwnership } from '../cluster/run-ownership.js';
import type { AttemptJournal } from './attempt-journal.js';
import { recordEmitted, type LoggedEvent } from './event-log.js';
import type { RunHooks } from './run-hooks.js';

export interface TransitionDeps {
  store: Store;
  journal: AttemptJournal;
  ownership: Pick<RunOwnership, 'write'>;
  hooks?: RunHooks | undefined;
}

export interface Transition {
  runId: string;
  spec: RunPlan;
  events: RunEmitted[];
  from: RunState;
  to: RunState;
  /** What the machine's context holds that the run row shows. */
  context: { relaxLevel: number; attemptCount: number; error: RunError | null };
  /** The machine's persisted snapshot, as JSON. */
  snapshotJson: string;
  now: number;
}

/** Stores one transition; returns each event's logged line, in order. Throws what the store or the fence throws. */
export function storeTransition(deps: TransitionDeps, t: Transition): LoggedEvent[] {
  const { store } = deps;
  const run = { id: t.runId, name: t.spec.name, state: t.to };
  return deps.ownership.write(t.runId, () => {
    const lines = t.events.map((e) => {
      deps.journal.record(t.runId, e, t.now);
      const line = recordEmitted(store, t.spec, t.runId, e, t.now, t.to);
      deps.hooks?.stored(run, e, line, t.now);
      return line;
    });
    if (t.to !== t.from) {
      store.events.append({ runId: t.runId, at: t.now, type: 'state', message: `${t.from} → ${t.to}`, data: { from: t.from, to: t.to } });
    }
    store.runs.saveProgress(t.runId, {
      state: t.to,
      relaxLevel: t.context.relaxLevel,
      attempt: t.context.attemptCount,
      error: t.context.error && withAttemptStory(t.context.error, store.attempts.forRun(t.runId)),
      snapshotJson: t.snapshotJson,
      machineVersion: RUN_MACHINE_VERSION,
      at: t.now,
    });
    return lines;
  });
}

/**
 * A run that failed for want of a working offer says which offers it tried and why. The story is
 * read from the attempts table (written in the same transaction, just before), not carried in the
 * machine's context, so a run that went through thousands of offers keeps a small snapshot.
 */
function withAttemptStory(error: RunError, attempts: AttemptRow[]): RunError {
  if (!ERRORS_LISTING_ATTEMPTS.has(error.kind)) return error;
  const tried = describeAttempts(
    attempts.map((a) => ({
      n: a.n,
      offerId: a.offer_id,
      machineId: a.machine_id ?? 0,
      instanceId: a.instance_id,
      outcome: a.outcome as AttemptOutcome | null,
      detail: a.detail,
    })),
  );
  return { ...error, message: `${error.message} Tried: ${tried}` };
}
