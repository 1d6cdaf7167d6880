// Stored snapshots of older machine versions, brought to the current shape, so that upgrading
// berth resumes its runs instead of failing them (a run that cannot be resumed is failed and its
// instances destroyed, which costs the user a working instance). One step per version; pure.
import type { RunContext, RunLimits } from './run-types.js';

/** The part of a persisted xstate snapshot a migration may change. */
export interface StoredRunSnapshot {
  context: Record<string, unknown>;
  [key: string]: unknown;
}

/** Gone-offer budget of runs stored before it existed (the config default). */
const V1_GONE_OFFERS_PER_SEARCH = 3;

type Step = (s: StoredRunSnapshot, limits: RunLimits) => StoredRunSnapshot;

const STEPS: Record<number, Step> = {
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
  // v2 → v3: runs can expire (runtime, budget), wait for SSH, and bid; an attempt in flight has no
  // bid of record, so it is never rebid. (The driver puts fresh limits in after every migration.)
  2: (s, limits) => {
    const context = s.context as Record<string, unknown>;
    const upgrade = (a: Record<string, unknown> | null) =>
      a && { diskDph: 0, bidPrice: null, runningSeenAt: null, reachable: null, rebidAt: null, ...a };
    const candidates = (context['candidates'] as Array<Record<string, unknown>> | undefined) ?? [];
    return {
      ...s,
      context: {
        ...context,
        expire: null,
        searchType: limits.bid ? 'bid' : 'on-demand',
        candidates: candidates.map((c) => ({ minBid: null, diskDph: 0, ...c })),
        current: upgrade(context['current'] as Record<string, unknown> | null),
      },
    };
  },
  // v3 → v4: the machine reads no clock; the last ended attempt keeps when it ended (settle judges
  // the deadline by it). Only read right after an attempt ends, so an old one's time never matters.
  3: (s) => {
    const lastEnded = s.context['lastEnded'] as Record<string, unknown> | null;
    return { ...s, context: { ...s.context, lastEnded: lastEnded && { endedAt: 0, ...lastEnded } } };
  },
  // v4 → v5: tasks (issue #19). `running` became a parent of `watching` and `checkingTask`; a run
  // stored running resumes watching. No task has restarted or ended yet (runs stored before had none).
  4: (s) => {
    const context = s.context as Record<string, unknown>;
    const current = context['current'] as Record<string, unknown> | null;
    return {
      ...s,
      value: s['value'] === 'running' ? { running: 'watching' } : s['value'],
      context: { ...context, taskRestarts: 0, taskExit: null, current: current && { taskChecked: false, ...current } },
    };
  },
  // v5 → v6: a task's instance that stops while booting has its log read in `booting.checkingTask`
  // (before, in `running.checkingTask`). A state was added, none removed or reshaped: nothing to change.
  5: (s) => s,
  // v6 → v7: a task's end can be its onstart's failure (issue #29); an end recorded before was the task's.
  6: (s) => ({ ...s, context: { taskOnstart: false, ...s.context } }),
  // v7 → v8: a task's outputs are taken in `collecting` (issue #40). A state was added and an
  // optional field (`current.collectUntil`); runs stored before had no outputs: nothing to change.
  7: (s) => s,
  // v8 → v9: readiness by SSH logs in after the banner (issue #39), in `booting.loggingIn`. A state
  // was added, none removed or reshaped: nothing to change (an older berth cannot resume a run stored in it).
  8: (s) => s,
  // v9 → v10: an attempt keeps since when its listed status has been what it is (issue #49:
  // `current.statusSince`, optional). A run stored before counts it from its next list: a stop
  // while booting gets its blip window again, bounded by the boot deadline as before.
  9: (s) => s,
  // v10 → v11: an instance its task stopped before its outputs were taken is started again, kept
  // stopped meanwhile for `limits.stoppedKeepS` (issue #48): the limits as this berth derives them.
  10: (s, limits) => {
    const context = s.context as Record<string, unknown>;
    const stored = context['limits'] as Record<string, unknown>;
    return limits.stoppedKeepS === undefined
      ? s
      : { ...s, context: { ...context, limits: { ...stored, stoppedKeepS: limits.stoppedKeepS } } };
  },
  // v11 → v12: a task that failed for good may keep its instance in `keeping` (issue #50), its bound
  // in `current.keepUntil` (optional). A state was added, none removed or reshaped: nothing to change.
  11: (s) => s,
  // v12 → v13: a destroy may hand the instance to a warm hold instead (issue #51: DestroyOutput's
  // optional `handed`), which settles the run at once. Nothing stored changes shape.
  12: (s) => s,
};

/**
 * The snapshot in the shape of machine version `to`, or null when no migration leads there.
 * `limits` are the run's limits as this berth derives them from its spec and configuration.
 */
export function migrateRunSnapshot(snapshot: StoredRunSnapshot, from: number, to: number, limits: RunLimits): StoredRunSnapshot | null {
  let current = snapshot;
  for (let v = from; v < to; v++) {
    const step = STEPS[v];
    if (!step) return null;
    current = step(current, limits);
  }
  return from <= to ? current : null;
}

/** Whether a snapshot stored by machine version `from` can be resumed by version `to`. */
export function canMigrate(from: number, to: number): boolean {
  if (from > to) return false;
  for (let v = from; v < to; v++) if (!STEPS[v]) return false;
  return true;
}
