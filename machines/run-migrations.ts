// Stored snapshots of older machine versions, brought to the current shape, so that upgrading
// berth resumes its runs instead of failing them (a run that cannot be resumed is failed and its
// instances destroyed, which costs the user a working instance). One step per version; pure.
import type { RunContext } from './run-types.js';

/** The part of a persisted xstate snapshot a migration may change. */
export interface StoredRunSnapshot {
  context: Record<string, unknown>;
  [key: string]: unknown;
}

/** Gone-offer budget of runs stored before it existed (the config default). */
const V1_GONE_OFFERS_PER_SEARCH = 3;

const STEPS: Record<number, (s: StoredRunSnapshot) => StoredRunSnapshot> = {
  // v1 → v2: the attempt history left the context (the attempts table holds it); gone offers are
  // kept apart from blocked ones, with a per-search budget.
  1: (s) => {
    const { history: _history, ...context } = s.context;
    const limits = context['limits'] as Record<string, unknown>;
    const next: Partial<RunContext> = {
      goneOffers: [],
      goneThisSearch: 0,
      lastEnded: null,
    };
    return { ...s, context: { ...context, ...next, limits: { goneOffersPerSearch: V1_GONE_OFFERS_PER_SEARCH, ...limits } } };
  },
};

/** The snapshot in the shape of machine version `to`, or null when no migration leads there. */
export function migrateRunSnapshot(snapshot: StoredRunSnapshot, from: number, to: number): StoredRunSnapshot | null {
  let current = snapshot;
  for (let v = from; v < to; v++) {
    const step = STEPS[v];
    if (!step) return null;
    current = step(current);
  }
  return from <= to ? current : null;
}

/** Whether a snapshot stored by machine version `from` can be resumed by version `to`. */
export function canMigrate(from: number, to: number): boolean {
  if (from > to) return false;
  for (let v = from; v < to; v++) if (!STEPS[v]) return false;
  return true;
}
