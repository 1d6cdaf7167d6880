// Reconciles the service's list of instances with the store, on every complete sweep of the
// account (the poller's, handed over by ./poll-router.ts): an instance carrying this store's label is
//   owned   its attempt is the live one of a live run: left alone (its run watches it);
//   adopt   its attempt journaled a create that recorded no instance yet (a crash, or an unknown
//           outcome): the attempt takes it, through the journal's one adopt call;
//   orphan  anything else with the prefix (its run has ended, its attempt gave up or holds another,
//           a store this one replaced): destroyed;
//   foreign another label, another store's: never touched.
//
// An orphan's destroy is sent again while later sweeps still list it, at most every
// `retryMs`; once a complete sweep no longer lists it, the destroy is confirmed (and journaled).
// Failures are warnings at first and `ALERT` errors once they keep happening (./destroy-alerts.ts).
import type { Instance, MarketClient } from '../../client/types.js';
import type { Clock } from '../../clock.js';
import { toRunError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import { DestroyFailures } from './destroy-alerts.js';
import { classifyInstance } from './holdings.js';
import type { WarmPool } from './warm-pool.js';

/** What the reconciler writes through the attempt journal (../runs/attempt-journal.ts is one). */
interface OwnershipJournal {
  /** The attempt takes the listed instance its journaled create never recorded; false when it holds another or gave up. */
  adopt(runId: string, n: number, instanceId: number, sentAt: number): boolean;
  /** An orphan's destroy is confirmed: a complete sweep no longer lists it. */
  orphanGone(runId: string, n: number, instanceId: number, at: number): void;
}

interface ReconcilerDeps {
  /** Warm holds past their idle_s are released at each sweep, and destroyed as orphans in it; those gone are over (./warm-pool.ts). */
  warm?: Pick<WarmPool, 'sweep'>;
  store: Store;
  journal: OwnershipJournal;
  client: MarketClient;
  clock: Clock;
  log: Logger;
  /** Whether a run may still own an instance (not ended). */
  isLive(runId: string): boolean;
  /** Instances labelled with these store ids are orphans (stores this one replaced). */
  sweptStores: ReadonlySet<string>;
  /** How long after sending an orphan's destroy it is sent again if still listed. */
  retryMs: number;
}

interface OrphanDestroy {
  runId: string;
  n: number;
  sentAt: number;
  /** The call itself failed (already reported); otherwise it was accepted or is in flight. */
  failed: boolean;
}

export class Reconciler {
  /** Orphans whose destroy was sent and not yet confirmed by a sweep. */
  private readonly orphans = new Map<number, OrphanDestroy>();
  private readonly failures = new DestroyFailures();
  private readonly abort = new AbortController();

  constructor(private readonly deps: ReconcilerDeps) {}

  /** A complete sweep of the account, listed from `startedAt` on. */
  sweep(instances: Instance[], startedAt: number): void {
    const { store, log, journal } = this.deps;
    const listed = new Set(instances.map((i) => i.id));
    this.tryWrite(() => this.deps.warm?.sweep(listed, startedAt), 0);
    for (const [id, orphan] of this.orphans) {
      // Sent before this sweep started, and not in it: gone.
      if (listed.has(id) || orphan.sentAt > startedAt) continue;
      this.orphans.delete(id);
      this.failures.clear(id);
      log.info({ runId: orphan.runId, instanceId: id }, 'an orphan instance is gone');
      this.tryWrite(() => journal.orphanGone(orphan.runId, orphan.n, id, startedAt), id);
    }
    for (const inst of instances) {
      const owner = classifyInstance(inst, store, this.deps.isLive, this.deps.sweptStores);
      if (owner.kind === 'adopt') {
        // The earliest it can have been made: when its create was journaled.
        const startedAtRow = store.attempts.get(owner.runId, owner.n)?.started_at ?? startedAt;
        const ok = this.tryWrite(() => journal.adopt(owner.runId, owner.n, inst.id, startedAtRow), inst.id);
        if (ok) log.info({ runId: owner.runId, attempt: owner.n, instanceId: inst.id }, 'adopted an instance whose create was journaled');
      } else if (owner.kind === 'orphan') {
        this.destroyOrphan(inst, owner.runId, owner.n, owner.reason);
      }
    }
  }

  /** Abandons in-flight destroys (the next start's first sweep finds what is left). */
  stop(): void {
    this.abort.abort();
  }

  /** A store that refuses writes must not stop the sweep: the write is tried again on the next one. */
  private tryWrite(write: () => unknown, instanceId: number): boolean {
    try {
      write();
      return true;
    } catch (err) {
      this.deps.log.warn({ instanceId, err: toRunError(err) }, 'could not record what a sweep found; trying again on the next sweep');
      return false;
    }
  }

  private destroyOrphan(inst: Instance, runId: string, n: number, reason: string): void {
    const { client, store, log, clock } = this.deps;
    const now = clock.now();
    const pending = this.orphans.get(inst.id);
    if (pending !== undefined && now - pending.sentAt < this.deps.retryMs) return;
    // Accepted before and still listed long after: that destroy did not take.
    if (pending !== undefined && !pending.failed) this.reportFailure(inst.id, runId, 'still listed after its destroy was accepted');
    const destroy: OrphanDestroy = { runId, n, sentAt: now, failed: false };
    this.orphans.set(inst.id, destroy);
    log.warn({ runId, instanceId: inst.id, label: inst.label, reason }, 'destroying an instance no live run owns');
    try {
      if (store.runs.get(runId)) {
        store.events.append({
          runId,
          at: now,
          type: 'orphan.destroy',
          message: `destroying instance ${inst.id}: ${reason}`,
          data: { instanceId: inst.id },
        });
      }
    } catch {
      // The store refuses writes: the destroy matters more than its event.
    }
    client.destroyInstance(inst.id, { signal: this.abort.signal }).catch((err: unknown) => {
      if (this.abort.signal.aborted) return;
      // Sent again on a later sweep while the instance is still listed.
      destroy.failed = true;
      this.reportFailure(inst.id, runId, toRunError(err).message);
    });
  }

  private reportFailure(instanceId: number, runId: string, why: string): void {
    const alert = this.failures.failed(instanceId);
    const fields = { runId, instanceId, failures: this.failures.count(instanceId) };
    if (alert)
      this.deps.log.error(
        fields,
        `ALERT: the destroy of orphan instance ${instanceId} keeps failing (${why}); it may be billing. Retrying`,
      );
    else this.deps.log.warn(fields, `the destroy of orphan instance ${instanceId} did not take (${why}); retrying`);
  }
}
