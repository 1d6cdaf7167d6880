// The warm_holds table (issue #51): instances kept running after a task ended cleanly, for the next
// run of the same reuse key to take instead of renting. Each write that moves an instance from one
// holder to another is one transaction with the other holder's row, so that at every moment the
// instance has exactly one holder in the store (or none, once released: then it is an orphan, and
// the reconciler destroys it):
//   hand     the donor attempt's billing ends (handed_at, destroy_confirmed_at) and the hold begins;
//   take     the hold ends and the taker's attempt row (journaled as created, on that instance) begins;
//   release  idle_s passed, a cap, a cancel of the donor, the daemon stopping for good: it is destroyed.
//
// Spend: a hold bills its dph_total from `since` to its take, or, released, to its destroy confirmed
// (or now). The donor stops billing at `since` and the taker starts at the take, so no moment is
// counted twice.
import type { SqlDb } from './sql-db.js';

type WarmState = 'warm' | 'taken' | 'released';

export interface WarmHoldRow {
  id: number;
  instance_id: number;
  run_id: string;
  attempt: number;
  reuse_key: string;
  relax_level: number;
  offer_id: number;
  machine_id: number;
  gpu_name: string | null;
  num_gpus: number | null;
  dph_total: number;
  disk_dph: number;
  since: number;
  idle_until: number;
  state: WarmState;
  ended_at: number | null;
  ended_why: string | null;
  taken_run_id: string | null;
  taken_attempt: number | null;
  destroy_confirmed_at: number | null;
}

export interface WarmHand {
  instanceId: number;
  runId: string;
  n: number;
  reuseKey: string;
  relaxLevel: number;
  offerId: number;
  machineId: number;
  gpu: { name: string; count: number } | null;
  dphTotal: number;
  diskDph: number;
  at: number;
  idleUntil: number;
}

export function createWarmHoldsRepo(db: SqlDb) {
  const insert = db.prepare(
    `INSERT INTO warm_holds (instance_id, run_id, attempt, reuse_key, relax_level, offer_id, machine_id, gpu_name, num_gpus,
       dph_total, disk_dph, since, idle_until, state)
     VALUES (@instanceId, @runId, @n, @reuseKey, @relaxLevel, @offerId, @machineId, @gpuName, @numGpus,
       @dphTotal, @diskDph, @at, @idleUntil, 'warm')`,
  );
  // The donor stops billing at the hand-over: the hold bills from then.
  const handed = db.prepare(
    `UPDATE attempts SET handed_at = @at, destroy_confirmed_at = COALESCE(destroy_confirmed_at, @at)
     WHERE run_id = @runId AND n = @n AND instance_id = @instanceId AND handed_at IS NULL`,
  );
  const byDonor = db.prepare(`SELECT * FROM warm_holds WHERE run_id = ? AND attempt = ? ORDER BY id DESC LIMIT 1`);
  const get = db.prepare(`SELECT * FROM warm_holds WHERE id = ?`);
  const live = db.prepare(`SELECT * FROM warm_holds WHERE state = 'warm' ORDER BY id`);
  const liveFor = db.prepare(`SELECT * FROM warm_holds WHERE state = 'warm' AND instance_id = ?`);
  const latestFor = db.prepare(`SELECT * FROM warm_holds WHERE instance_id = ? ORDER BY id DESC LIMIT 1`);
  const take = db.prepare(
    `UPDATE warm_holds SET state = 'taken', ended_at = @at, ended_why = @why, taken_run_id = @runId, taken_attempt = @n
     WHERE id = @id AND state = 'warm'`,
  );
  const release = db.prepare(
    `UPDATE warm_holds SET state = 'released', ended_at = @at, ended_why = @why WHERE id = @id AND state = 'warm'`,
  );
  const gone = db.prepare(
    `UPDATE warm_holds SET destroy_confirmed_at = @at WHERE instance_id = @instanceId AND state = 'released' AND destroy_confirmed_at IS NULL`,
  );
  const billing = db.prepare(
    `SELECT * FROM warm_holds WHERE state = 'warm'
       OR (state = 'taken' AND ended_at > @from)
       OR (state = 'released' AND (destroy_confirmed_at IS NULL OR destroy_confirmed_at > @from))`,
  );

  return {
    /**
     * The donor attempt's instance becomes a warm hold: one transaction with the attempt's end of
     * billing. Idempotent (a hand-over repeated after a restart finds its hold); null when the attempt
     * does not hold that instance any more.
     */
    hand(h: WarmHand): WarmHoldRow | null {
      return db.transaction(() => {
        const before = byDonor.get(h.runId, h.n) as WarmHoldRow | undefined;
        if (before && before.instance_id === h.instanceId) return before;
        if (handed.run({ runId: h.runId, n: h.n, instanceId: h.instanceId, at: h.at }).changes !== 1) return null;
        insert.run({ ...h, gpuName: h.gpu?.name ?? null, numGpus: h.gpu?.count ?? null });
        return byDonor.get(h.runId, h.n) as WarmHoldRow;
      });
    },
    get(id: number): WarmHoldRow | undefined {
      return get.get(id) as WarmHoldRow | undefined;
    },
    /** The hold an attempt's instance went to, if it went to one. */
    ofDonor(runId: string, n: number): WarmHoldRow | undefined {
      return byDonor.get(runId, n) as WarmHoldRow | undefined;
    },
    /** Every hold still warm (waiting for a taker), oldest first. */
    live(): WarmHoldRow[] {
      return live.all() as WarmHoldRow[];
    },
    /** The warm hold on this instance, if one holds it now. */
    liveFor(instanceId: number): WarmHoldRow | undefined {
      return liveFor.get(instanceId) as WarmHoldRow | undefined;
    },
    /** The newest hold that ever held this instance. */
    latestFor(instanceId: number): WarmHoldRow | undefined {
      return latestFor.get(instanceId) as WarmHoldRow | undefined;
    },
    /** The hold ends: `runId`'s attempt `n` takes its instance (call inside the transaction that journals that attempt). False: not warm any more. */
    take(id: number, runId: string, n: number, at: number): boolean {
      return take.run({ id, runId, n, at, why: `taken by run ${runId} attempt #${n}` }).changes === 1;
    },
    /** The hold ends and nobody holds the instance: it is to be destroyed. False: not warm any more. */
    release(id: number, why: string, at: number): boolean {
      return release.run({ id, why, at }).changes === 1;
    },
    /** A released hold's instance is no longer listed: it bills no more. */
    gone(instanceId: number, at: number): void {
      gone.run({ instanceId, at });
    },
    /** Every hold that may have billed since `from`. */
    billingSince(from: number): WarmHoldRow[] {
      // -Infinity (every hold ever) is no BIGINT for Postgres: the smallest time there is.
      return billing.all({ from: Number.isFinite(from) ? from : Number.MIN_SAFE_INTEGER }) as WarmHoldRow[];
    },
  };
}
