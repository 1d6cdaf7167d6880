// The one writer of the attempts table (src/store/attempts.ts holds its SQL). Three parties learn
// what an attempt did, and each tells this journal, never the table:
// - the create actor (create-actor.ts): the intent, committed before the create is sent, then what
//   the create made, or that it made nothing;
// - the reconciler: an instance a sweep found under the label of a create still in 'intent';
//   adopted through the same call the create actor uses;
// - the run driver: what the run machine reported (status, running and where SSH answered, ended,
//   destroy confirmed), in the transaction that stores the machine's snapshot;
// - the failure logs (failure-logs.ts): a failed attempt's last container log lines.
import type { RunEmitted } from '../../../machines/run-machine.js';
import { sshEndpoints } from '../../../machines/run-rules.js';
import type { AttemptRow, Store } from '../../store/index.js';
import { attemptLabel } from '../instances/labels.js';
import type { RunOwnership } from '../cluster/run-ownership.js';

interface AttemptStart {
  runId: string;
  n: number;
  offerId: number;
  machineId: number;
  /** The offer's billed price, disk included. */
  dphTotal: number;
  /** The GPUs the offer rents; absent or null when unknown. */
  gpu?: { name: string; count: number } | null;
}

export class AttemptJournal {
  /**
   * `ownership`: whether this daemon still holds a run; a create's intent is written only while it
   * does (several daemons on one store; on a store of its own, every run is this daemon's).
   */
  constructor(
    private readonly store: Store,
    private readonly ownership: Pick<RunOwnership, 'write'>,
  ) {}

  /** The label the attempt's instance carries (store, run and attempt: found again after a crash). */
  labelOf(runId: string, n: number): string {
    return attemptLabel(this.store.storeId, runId, n);
  }

  /**
   * Commits the intent to create before the call: a fresh row, or (fresh: false) what an earlier
   * process already recorded for this attempt, which the caller must honour instead of calling again.
   */
  begin(a: AttemptStart, at: number): { row: AttemptRow; fresh: boolean } {
    return this.ownership.write(a.runId, () => this.store.attempts.beginCreate({ ...a, label: this.labelOf(a.runId, a.n), at }));
  }

  /**
   * Attempt `a` takes warm hold `holdId`'s instance instead of a create (issue #51), in one
   * transaction: its intent, the hold's end and the attempt's holding of the instance, with its
   * recycle journaled as `intent` (the update + recycle may be sent from now on; `recycleSha`: the
   * sha256 of its onstart, which a restart compares with the instance's record). False: the hold
   * is no longer warm (another run took it, or it was released) and the attempt has made nothing.
   */
  takeWarm(a: AttemptStart, holdId: number, instanceId: number, recycleSha: string, at: number): boolean {
    return this.ownership.write(a.runId, () =>
      this.store.transaction(() => {
        const { fresh } = this.store.attempts.beginCreate({ ...a, label: this.labelOf(a.runId, a.n), at });
        if (!fresh) return false;
        if (!this.store.warm.take(holdId, a.runId, a.n, at)) {
          this.store.attempts.notCreated(a.runId, a.n, 'offer_gone', `warm hold #${holdId} was taken or released first`);
          return false;
        }
        this.store.attempts.adopt(a.runId, a.n, instanceId, at);
        this.store.attempts.setRecycle(a.runId, a.n, { holdId, state: 'intent', sha: recycleSha });
        return true;
      }),
    );
  }

  /** The taken instance's update + recycle was answered: its fresh container is on its way. */
  recycleSent(runId: string, n: number): void {
    this.ownership.write(runId, () => this.store.attempts.setRecycle(runId, n, { state: 'sent' }));
  }

  /**
   * The attempt owns this instance: its create answered with it, or a list showed the attempt's
   * label. `sentAt`: when the create was sent (billing cannot have begun earlier). False when the
   * attempt already holds another instance or gave up on its create: this one is then an orphan.
   */
  adopt(runId: string, n: number, instanceId: number, sentAt: number): boolean {
    return this.store.attempts.adopt(runId, n, instanceId, sentAt);
  }

  /** What is journaled of this attempt so far, if anything (a create of an earlier process). */
  find(runId: string, n: number): AttemptRow | undefined {
    return this.store.attempts.get(runId, n);
  }

  /** The create made no instance: the offer was gone or refused, or it failed (and no label appeared). */
  notCreated(runId: string, n: number, why: 'offer_gone' | 'failed', detail: string): void {
    this.store.attempts.notCreated(runId, n, why, detail);
  }

  /** An orphan's destroy is confirmed (a complete sweep no longer lists it): its attempt bills no more. */
  orphanGone(runId: string, n: number, instanceId: number, at: number): void {
    this.store.transaction(() => {
      // Its key can do nothing any more, as after a run's own destroy.
      this.store.instanceKeys.forget(instanceId);
      this.store.attempts.destroyConfirmed(runId, n, instanceId, at);
      // A released warm hold on it bills no more either.
      this.store.warm.gone(instanceId, at);
    });
  }

  /** The last lines of a failed attempt's container log (already cut to size and scrubbed of secrets). */
  logTail(runId: string, n: number, text: string): void {
    this.store.attempts.setLogTail(runId, n, text);
  }

  /** What the run machine reported; call inside the transaction that stores its snapshot. */
  record(runId: string, e: RunEmitted, at: number): void {
    const { attempts } = this.store;
    switch (e.type) {
      case 'attempt.status':
        return attempts.setStatus(runId, e.n, e.status, at);
      case 'attempt.running':
        attempts.setStatus(runId, e.n, e.status, at);
        // The endpoints to print: those that answered with a banner, else (ready by status or by
        // the callback, never probed) those the list shows.
        attempts.setReady(runId, e.n, e.via, e.reachable ?? sshEndpoints(e.status), at);
        return attempts.setOutcome(runId, e.n, 'running', null, null);
      case 'attempt.ended':
        return attempts.setOutcome(runId, e.n, e.outcome, e.detail, at);
      case 'destroy.confirmed':
        // Its key can do nothing any more, and its log was asked for before the destroy.
        this.store.instanceKeys.forget(e.instanceId);
        return attempts.destroyConfirmed(runId, e.n, e.instanceId, at);
      case 'bid.raised':
        // The instance bills the new bid from now on (the money guard's spend and price).
        return attempts.setPrice(runId, e.n, e.dphTotal, at);
      default:
        // attempt.started and attempt.instance: the create actor journaled both before the machine heard of them.
        return;
    }
  }
}
