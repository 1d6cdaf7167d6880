// Warm instances (issue #51): which ended attempt's instance is kept for the next run of the same
// reuse key instead of destroyed, which warm instance a run may take instead of renting, and when an
// untaken one goes. The moves between holders are the store's (src/store/warm-holds.ts), each one
// transaction with the other holder's row; this module decides them.
//
//   hand over  at the destroy of an attempt whose task ended on its own (exit 0 or a task failure),
//              its outputs all taken, its instance listed running at its own price, its run's spec
//              warm, and what idle_s may bill within the daemon's caps: the instance goes to a hold
//              for idle_s instead (the task wrapper keeps it running, and destroys it at idle_s
//              whatever became of the daemon: src/job-spec/task-script.ts);
//   offer      a run whose reuse key, relax level, blocked offers and machines, and price cap allow
//              it is offered the oldest such hold first, before any search (a hold with less than a
//              margin of its idle_s left is not offered: the container destroys itself about then);
//   expire     on every complete sweep, holds past idle_s are released; the reconciler then destroys
//              them as orphans (./holdings.ts classifies a released hold's instance so).
// Never handed over: an outbid, a loss, a failure of the host, a cancel, a limit, outputs missing,
// an instance not listed running, a spec without warm. A released or taken hold is never offered.
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { RunPlan } from '../../job-spec/run-plan.js';
import { reuseKey } from '../../job-spec/reuse-key.js';
import type { Store } from '../../store/index.js';
import type { WarmHoldRow } from '../../store/warm-holds.js';
import { warmHoldsBilling } from './holdings.js';

/** Outcomes of a task that ended on its own: only these leave an instance to reuse. */
const CLEAN_ENDS: ReadonlySet<string> = new Set(['succeeded', 'task_failed']);
/** A hold is offered only while at least this much of its idle_s is left (at most half of it). */
const OFFER_MARGIN_MS = 60_000;

export interface WarmPoolDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** The run's plan, while the daemon drives it. */
  planOf(runId: string): RunPlan | undefined;
  /** Why the daemon's caps refuse `dphTotal` more for `seconds` (budget.max_usd_per_day), or null. */
  capsRefuse(dphTotal: number, seconds: number): string | null;
}

/** What a run searching may take instead of an offer. */
export interface WarmOffer {
  holdId: number;
  instanceId: number;
  offerId: number;
  machineId: number;
  dphTotal: number;
  diskDph: number;
  gpu: { name: string; count: number } | null;
}

export class WarmPool {
  constructor(private readonly deps: WarmPoolDeps) {}

  /**
   * At the destroy of attempt `n`: the instance goes to a warm hold instead, if it may. Idempotent:
   * a destroy repeated after a restart finds the hold it made. Null: destroy it.
   */
  handOver(input: { runId: string; n: number; instanceId: number; outcome: string | null }): { holdId: number; idleUntil: number } | null {
    const { store, clock, log } = this.deps;
    const before = store.warm.ofDonor(input.runId, input.n);
    if (before && before.instance_id === input.instanceId) return { holdId: before.id, idleUntil: before.idle_until };
    const plan = this.deps.planOf(input.runId);
    const why = this.refusal(input, plan);
    if (why !== null || !plan) {
      if (plan?.task && plan.task.warmIdleS > 0)
        log.info({ runId: input.runId, attempt: input.n, instanceId: input.instanceId }, `not kept warm: ${why}`);
      return null;
    }
    const a = store.attempts.get(input.runId, input.n)!;
    const idleS = plan.task!.warmIdleS;
    const capped = this.deps.capsRefuse(a.dph_total ?? 0, idleS);
    if (capped !== null) {
      log.info({ runId: input.runId, attempt: input.n, instanceId: input.instanceId }, `not kept warm: ${capped}`);
      return null;
    }
    const at = clock.now();
    const hold = store.warm.hand({
      instanceId: input.instanceId,
      runId: input.runId,
      n: input.n,
      reuseKey: reuseKey(plan),
      relaxLevel: store.runs.get(input.runId)?.relax_level ?? 0,
      offerId: a.offer_id,
      machineId: a.machine_id ?? 0,
      gpu: a.gpu_name !== null && a.num_gpus !== null ? { name: a.gpu_name, count: a.num_gpus } : null,
      dphTotal: a.dph_total ?? 0,
      diskDph: 0,
      at,
      idleUntil: at + idleS * 1000,
    });
    return hold ? { holdId: hold.id, idleUntil: hold.idle_until } : null;
  }

  /** Why attempt `n`'s instance may not be kept warm, or null. */
  private refusal(
    input: { runId: string; n: number; instanceId: number; outcome: string | null },
    plan: RunPlan | undefined,
  ): string | null {
    if (!plan?.task || plan.task.warmIdleS <= 0) return 'its spec asks for no warm instance';
    if (input.outcome === null || !CLEAN_ENDS.has(input.outcome))
      return `its attempt ended ${input.outcome ?? 'without an outcome'}, not by its task's own end`;
    // A failure under keep_on_failure_s: its wrapper keeps it for SSH and destroys it itself at the
    // keep's end, whatever the daemon does (src/job-spec/task-script.ts stopOrKeep).
    if (input.outcome === 'task_failed' && plan.task.keepOnFailureS > 0) return 'its failure was kept for SSH (keep_on_failure_s)';
    const a = this.deps.store.attempts.get(input.runId, input.n);
    if (!a || a.instance_id !== input.instanceId || (a.warm_hold_id !== null && a.recycle_state !== 'sent'))
      return 'its attempt does not hold it as made';
    if (a.actual_status !== 'running') return `it was last listed ${a.actual_status ?? 'without a status'}, not running`;
    if (plan.collect !== null) {
      const out = this.deps.store.outputs.get(input.runId, input.n);
      if (out?.state !== 'kept') return `its outputs were not all taken (${out?.state ?? 'none recorded'})`;
    }
    const run = this.deps.store.runs.get(input.runId);
    if (run?.cancel_requested_at != null) return 'its run was cancelled';
    return null;
  }

  /**
   * The hold run `runId` may take instead of searching, if any: its reuse key, a donor's relax level
   * no stricter than the run's now, not blocked, billed within its cap, with time left.
   */
  offerFor(
    runId: string,
    plan: RunPlan,
    relaxLevel: number,
    blocked: { offerIds: readonly number[]; machineIds: readonly number[] },
  ): WarmOffer | null {
    const now = this.deps.clock.now();
    const key = reuseKey(plan);
    const fit = this.deps.store.warm
      .live()
      .find(
        (h) =>
          h.reuse_key === key &&
          h.relax_level <= relaxLevel &&
          h.dph_total <= plan.max_price_per_hour &&
          !blocked.offerIds.includes(h.offer_id) &&
          !blocked.machineIds.includes(h.machine_id) &&
          h.idle_until - now >= Math.min(OFFER_MARGIN_MS, (h.idle_until - h.since) / 2),
      );
    if (!fit) return null;
    this.deps.log.debug({ runId, holdId: fit.id, instanceId: fit.instance_id }, 'a warm instance fits the run');
    return offerOf(fit);
  }

  /** The live hold on offer `offerId` whose reuse key is the run's: a create on that offer takes it instead. */
  holdOn(offerId: number, plan: RunPlan): WarmOffer | null {
    const key = reuseKey(plan);
    const h = this.deps.store.warm.live().find((x) => x.offer_id === offerId && x.reuse_key === key);
    return h ? offerOf(h) : null;
  }

  /** Releases the holds whose idle_s has passed (the reconciler destroys them next). */
  private expire(): void {
    const now = this.deps.clock.now();
    for (const h of this.deps.store.warm.live()) {
      if (h.idle_until > now) continue;
      if (this.deps.store.warm.release(h.id, 'its idle_s passed with no taker', now)) {
        this.deps.log.info(
          { runId: h.run_id, holdId: h.id, instanceId: h.instance_id },
          'a warm instance had no taker within idle_s: destroying it',
        );
      }
    }
  }

  /**
   * A complete sweep of the account, listed from `startedAt` on: holds past idle_s are released
   * (the reconciler destroys them as orphans in the same sweep), and a hold whose instance the
   * sweep no longer lists is over: its container destroyed it at idle_s (a daemon away meanwhile),
   * or it was destroyed outside berth. It bills no more from then, and is never offered.
   */
  sweep(listed: ReadonlySet<number>, startedAt: number): void {
    this.expire();
    const { store, log } = this.deps;
    for (const h of warmHoldsBilling(store, startedAt)) {
      if (listed.has(h.instance_id)) continue;
      if (h.state === 'warm' && h.since < startedAt) {
        if (
          store.warm.release(
            h.id,
            'its instance is gone (its container destroyed it at idle_s, or it was destroyed outside berth)',
            startedAt,
          )
        ) {
          log.info({ runId: h.run_id, holdId: h.id, instanceId: h.instance_id }, 'a warm instance is gone from the lists');
        }
        store.warm.gone(h.instance_id, startedAt);
      } else if (h.state === 'released' && h.destroy_confirmed_at === null && (h.ended_at ?? 0) < startedAt) {
        store.warm.gone(h.instance_id, startedAt);
      }
    }
  }

  /** Releases the warm hold run `runId` handed over (`berth cancel` or `berth stop` of an ended run). True when one was. */
  releaseOf(runId: string, why: string): boolean {
    const now = this.deps.clock.now();
    let released = false;
    for (const h of this.deps.store.warm.live()) {
      if (h.run_id === runId && this.deps.store.warm.release(h.id, why, now)) released = true;
    }
    return released;
  }
}

function offerOf(h: WarmHoldRow): WarmOffer {
  return {
    holdId: h.id,
    instanceId: h.instance_id,
    offerId: h.offer_id,
    machineId: h.machine_id,
    dphTotal: h.dph_total,
    diskDph: h.disk_dph,
    gpu: h.gpu_name !== null && h.num_gpus !== null ? { name: h.gpu_name, count: h.num_gpus } : null,
  };
}
