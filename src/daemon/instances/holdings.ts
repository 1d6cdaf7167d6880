// Who holds an instance, and what bills now: the one place that decides either, so that the
// reconciler, the create gate's caps, the account view, `berth costs`, the metrics and the stop
// summary cannot disagree about which instance is whose or what it costs.
//
// A hold is the live attempt of a live run (the only kind today). Every instance berth creates
// carries the label of its store, run and attempt; an instance with this store's prefix is held only
// while its attempt is the live one of a live run. Anything else with the prefix is an orphan (a
// create that surfaced after its attempt was given up, a second instance for one attempt, the
// leftover of an ended run) and is destroyed.
//
// What bills is read from the store alone (src/store/spend.ts prices each hold), never from memory,
// so every figure survives a restart and is the same whoever asks.
import type { Instance } from '../../client/types.js';
import type { Store } from '../../store/index.js';
import type { BillingRow } from '../../store/attempts.js';
import { attemptPrice, attemptSpend, warmPrice, warmSpend } from '../../store/spend.js';
import type { WarmHoldRow } from '../../store/warm-holds.js';
import { attemptIsLive } from '../../wire/run-states.js';
import { parseLabel } from './labels.js';

export type Ownership =
  | { kind: 'foreign' } // not this store's label: never touched
  | { kind: 'owned'; runId: string; n: number }
  /** A warm hold keeps it for the next run of its reuse key (issue #51). */
  | { kind: 'warm'; holdId: number; runId: string; n: number }
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
  // A warm instance keeps its first attempt's label through every hand-over: who holds it now is
  // the warm hold, or the attempt that took it from the newest one.
  const warm = store.warm.latestFor(instance.id);
  if (warm?.state === 'warm') return { kind: 'warm', holdId: warm.id, runId: warm.run_id, n: warm.attempt };
  if (warm?.state === 'released') {
    return { kind: 'orphan', runId: warm.run_id, n: warm.attempt, reason: `its warm hold was released (${warm.ended_why ?? 'ended'})` };
  }
  const { runId, n } = warm?.state === 'taken' ? { runId: warm.taken_run_id!, n: warm.taken_attempt! } : label;
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

/** One holder's instance as it may bill: an attempt's, made or being made, or a warm hold's. */
export interface Bill {
  /** A warm hold's id; absent for an attempt's. */
  warmHoldId?: number;
  /** The run it bills to (a warm hold's: the run that handed it over), and its attempt. */
  runId: string;
  n: number;
  /** Null while its create is in flight (it may have made one). */
  instanceId: number | null;
  /** When it may have started billing (ms). */
  since: number;
  /** $/h it bills now: 0 once its destroy is confirmed or its holder ended. */
  usdPerHour: number;
  /** Not yet seen running: what its boot may still cost is not spent yet. */
  booting: boolean;
  /** $ it cost from `from` (default: always) to the `now` it was read at. */
  usd(from?: number): number;
}

const mayHaveBilled = (a: BillingRow) => a.create_state === 'created' || a.create_state === 'intent';

function bill(a: BillingRow, now: number): Bill {
  const usdPerHour = attemptPrice(a, a.run_ended_at);
  return {
    runId: a.run_id,
    n: a.n,
    instanceId: a.instance_id,
    since: a.instance_created_at ?? a.started_at,
    usdPerHour,
    booting: usdPerHour > 0 && a.first_running_at === null,
    usd: (from = -Infinity) => attemptSpend(a, a.run_ended_at, now, from),
  };
}

function warmBill(h: WarmHoldRow, now: number): Bill {
  return {
    warmHoldId: h.id,
    runId: h.run_id,
    n: h.attempt,
    instanceId: h.instance_id,
    since: h.since,
    usdPerHour: warmPrice(h),
    booting: false,
    usd: (from = -Infinity) => warmSpend(h, now, from),
  };
}

/** Every hold that may have billed since `from` (creates in flight and warm holds included), priced as of `now`. */
export function billsSince(store: Store, from: number, now: number): Bill[] {
  return [
    ...store.attempts
      .billingSince(from)
      .filter(mayHaveBilled)
      .map((a) => bill(a, now)),
    ...store.warm.billingSince(from).map((h) => warmBill(h, now)),
  ];
}

/** The bill of one attempt's instance, if it was journaled. */
export function billOf(store: Store, runId: string, n: number, now: number): Bill | undefined {
  const a = store.attempts.get(runId, n);
  return a ? bill({ ...a, run_ended_at: store.runs.get(runId)?.ended_at ?? null }, now) : undefined;
}

/** The warm holds that bill now (warm, or released and not yet gone), with the run that left each. */
export const warmHoldsBilling = (store: Store, now: number): WarmHoldRow[] =>
  store.warm.billingSince(now).filter((h) => h.state !== 'taken');

/** $/h the bills sum to now. */
export const usdPerHour = (bills: readonly Bill[]): number => bills.reduce((s, b) => s + b.usdPerHour, 0);

/** $ the bills cost from `from` to when they were read. */
export const usdSince = (bills: readonly Bill[], from = -Infinity): number => bills.reduce((s, b) => s + b.usd(from), 0);

/** The instances made that bill now, each with its holder and price, and their sum. */
export function billingNow(store: Store, now: number): { n: number; usdPerHour: number; each: Bill[] } {
  const each = billsSince(store, now, now).filter((b) => b.instanceId !== null && b.usdPerHour > 0);
  return { n: each.length, usdPerHour: usdPerHour(each), each };
}

/** What every holder's instances have cost up to `now`, USD: the runs purged since included. */
export const spentUsd = (store: Store, now: number): number =>
  store.spendUsd(now) + store.warm.billingSince(-Infinity).reduce((s, h) => s + warmSpend(h, now), 0);
