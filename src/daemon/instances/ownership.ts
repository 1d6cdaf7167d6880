// Who owns a listed instance. Every instance berth creates carries the label of its store, run and
// attempt; an instance with this store's prefix is owned only while its attempt is the live one of
// a live run. Anything else with the prefix is an orphan (a create that surfaced after its attempt
// was given up, a second instance for one attempt, the leftover of an ended run) and is destroyed.
import type { Instance } from '../../client/types.js';
import type { Store } from '../../store/index.js';
import { attemptIsLive } from '../../wire/run-states.js';
import { parseLabel } from './labels.js';

export type Ownership =
  | { kind: 'foreign' } // not this store's label: never touched
  | { kind: 'owned'; runId: string; n: number }
  | { kind: 'adopt'; runId: string; n: number } // its create is journaled but the instance id was never recorded
  | { kind: 'orphan'; runId: string; n: number; reason: string };

export function classifyInstance(
  instance: Instance,
  store: Store,
  isLiveRun: (runId: string) => boolean,
  /** Stores this one replaced (`berth daemon --replace-store`, store.sweep_store_ids): all their instances are orphans. */
  sweptStores: ReadonlySet<string> = new Set(),
): Ownership {
  const label = parseLabel(instance.label);
  if (label && sweptStores.has(label.storeId)) {
    return { kind: 'orphan', runId: label.runId, n: label.n, reason: `made by store ${label.storeId}, which this store replaced` };
  }
  if (!label || label.storeId !== store.storeId) return { kind: 'foreign' };
  const { runId, n } = label;
  if (!isLiveRun(runId)) return { kind: 'orphan', runId, n, reason: 'its run has ended or is unknown' };
  const attempt = store.attempts.get(runId, n);
  if (!attempt) return { kind: 'orphan', runId, n, reason: `attempt #${n} was never journaled` };
  if (!attemptIsLive(attempt)) {
    return { kind: 'orphan', runId, n, reason: `attempt #${n} already ended (${attempt.outcome})` };
  }
  if (attempt.instance_id === null) {
    return attempt.create_state === 'intent'
      ? { kind: 'adopt', runId, n }
      : { kind: 'orphan', runId, n, reason: `attempt #${n} recorded no instance (${attempt.create_state})` };
  }
  if (attempt.instance_id !== instance.id) {
    return { kind: 'orphan', runId, n, reason: `attempt #${n} owns instance ${attempt.instance_id}, not this one` };
  }
  return { kind: 'owned', runId, n };
}
