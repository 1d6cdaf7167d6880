// The attempts table: one row per offer tried, the journal of its create, and what its instance
// cost. A row in create_state 'intent' means a create call may have reached the service: whoever
// finds it must look for the attempt's label in the instance list before anything else.
//
// Only src/daemon/runs/attempt-journal.ts calls the writes below; the SQL lives here.
//
// Money: per attempt the instance's billed $/h (`dph_total`: the offer's billed price, replaced by
// the list's own figure once the instance is listed), when it was made (`instance_created_at`, the
// earliest it can have been: when its create was sent), when it was first seen running and when its
// destroy was confirmed (null while it may still bill). When the price changes (a bid raised, or the
// list showing another dph_total), what the instance accrued so far moves into `usd_before` and
// `dph_since` marks when the new price applies. Spend and runtime are computed from these
// (src/store/spend.ts).
import type { AttemptRow } from './attempt-row.js';
import type { SqlDb } from './sql-db.js';
import { attemptSpend, billedDph } from './spend.js';

export type { AttemptRow } from './attempt-row.js';

/** An attempt with its run's end (an instance whose destroy was never confirmed is counted up to it). */
export type BillingRow = AttemptRow & { run_ended_at: number | null };

export interface AttemptIntent {
  runId: string;
  n: number;
  offerId: number;
  machineId: number;
  /** The offer's billed price, disk included. */
  dphTotal: number;
  label: string;
  at: number;
  /** The GPUs the offer rents (its gpu_name and num_gpus); absent or null when unknown. */
  gpu?: { name: string; count: number } | null;
}

export interface ObservedStatus {
  actual_status: string | null;
  status_msg?: string | null;
  ssh_host?: string | null;
  ssh_port?: number | null;
  /** What the instance is billed, $/h, from the service's record; replaces the offer's quote. */
  dph_total?: number | null;
  /** $/h of its disk alone (the record's `storage_total_cost`): what it bills while stopped (./spend.ts, billedDph). */
  storage_total_cost?: number | null;
}

export function createAttemptsRepo(db: SqlDb) {
  const get = db.prepare(`SELECT * FROM attempts WHERE run_id = ? AND n = ?`);
  const insertIntent = db.prepare(
    `INSERT INTO attempts (run_id, n, offer_id, machine_id, dph_total, label, create_state, started_at, gpu_name, num_gpus)
     VALUES (@runId, @n, @offerId, @machineId, @dphTotal, @label, 'intent', @at, @gpuName, @numGpus)
     ON CONFLICT (run_id, n) DO NOTHING`,
  );
  // Idempotent: the create's answer, the attempt's own label look-up and the reconciler's sweep may
  // each find the same instance; an attempt never takes a second one.
  const adopt = db.prepare(
    `UPDATE attempts SET create_state = 'created', instance_id = @instanceId,
       instance_created_at = COALESCE(instance_created_at, @createdAt)
     WHERE run_id = @runId AND n = @n AND (create_state = 'intent' OR (create_state = 'created' AND instance_id = @instanceId))`,
  );
  const notCreated = db.prepare(
    `UPDATE attempts SET create_state = ?, create_detail = ? WHERE run_id = ? AND n = ? AND create_state = 'intent'`,
  );
  // A new price: what accrued at the old one since it applied moves into usd_before (SQLite reads
  // every column of the row before any is set, so these see the old dph_total and dph_since; so
  // does Postgres). The cast tells Postgres the parameter's type, which `IS NULL` does not.
  const NEW_PRICE = `CAST(@dph_total AS DOUBLE PRECISION) IS NOT NULL AND dph_total IS NOT NULL AND @dph_total != dph_total AND instance_created_at IS NOT NULL`;
  const { greatest, jsonTextValues } = db.dialect;
  const priceColumns = `
       usd_before = CASE WHEN ${NEW_PRICE}
         THEN usd_before + dph_total * ${greatest('0', '@at - COALESCE(dph_since, instance_created_at)')} / 3600000.0 ELSE usd_before END,
       dph_since = CASE WHEN ${NEW_PRICE} THEN ${greatest('@at', 'COALESCE(dph_since, instance_created_at)')} ELSE dph_since END,
       dph_total = COALESCE(@dph_total, dph_total)`;
  const status = db.prepare(
    `UPDATE attempts SET actual_status = @actual_status, status_msg = @status_msg, ssh_host = @ssh_host, ssh_port = @ssh_port,
       ${priceColumns},
       first_running_at = CASE WHEN @actual_status = 'running' THEN COALESCE(first_running_at, @at) ELSE first_running_at END
     WHERE run_id = @runId AND n = @n`,
  );
  const price = db.prepare(`UPDATE attempts SET ${priceColumns} WHERE run_id = @runId AND n = @n`);
  const mayBill = db.prepare(
    `SELECT a.*, r.ended_at AS run_ended_at FROM attempts a JOIN runs r ON r.id = a.run_id
     WHERE a.destroy_confirmed_at IS NULL AND a.create_state IN ('intent', 'created')`,
  );
  const confirmedAfter = db.prepare(
    `SELECT a.*, r.ended_at AS run_ended_at FROM attempts a JOIN runs r ON r.id = a.run_id
     WHERE a.destroy_confirmed_at IS NOT NULL AND a.destroy_confirmed_at > ?`,
  );
  const outcome = db.prepare(
    `UPDATE attempts SET outcome = @outcome, detail = @detail, ended_at = @endedAt WHERE run_id = @runId AND n = @n`,
  );
  const destroyed = db.prepare(
    `UPDATE attempts SET destroy_confirmed_at = COALESCE(destroy_confirmed_at, @at)
     WHERE run_id = @runId AND n = @n AND instance_id = @instanceId`,
  );
  const ready = db.prepare(
    `UPDATE attempts SET ready_at = @at, ready_via = @via, ssh_endpoints = @endpoints WHERE run_id = @runId AND n = @n`,
  );
  const logTail = db.prepare(`UPDATE attempts SET log_tail = @text WHERE run_id = @runId AND n = @n`);
  const followed = db.prepare(`UPDATE attempts SET log_tail = @tail, follow_offset = @offset WHERE run_id = @runId AND n = @n`);
  // The first pin stands: a second login never replaces it.
  const pin = db.prepare(`UPDATE attempts SET ssh_host_key = @key WHERE run_id = @runId AND n = @n AND ssh_host_key IS NULL`);
  const recycle = db.prepare(
    `UPDATE attempts SET warm_hold_id = COALESCE(@holdId, warm_hold_id), recycle_state = @state, recycle_sha = COALESCE(@sha, recycle_sha)
     WHERE run_id = @runId AND n = @n`,
  );
  const forRun = db.prepare(`SELECT * FROM attempts WHERE run_id = ? ORDER BY n`);
  // Any number of runs in one statement: their ids as one JSON array parameter.
  const forRuns = db.prepare(`SELECT * FROM attempts WHERE run_id IN ${jsonTextValues('?')} ORDER BY run_id, n`);
  const latest = db.prepare(`SELECT * FROM attempts WHERE run_id = ? ORDER BY n DESC LIMIT 1`);
  // An attempt still on its offer: its create may be in flight or its instance is booting on it
  // (the local OfferClaims hold the same ones: from the intent until the attempt ends). The first
  // three terms are the attempts_billing index's, so only attempts that may bill are looked at.
  const ON_OFFER = `a.destroy_confirmed_at IS NULL AND a.create_state IN ('intent', 'created') AND a.outcome IS NULL`;
  const onOffers = db.prepare(
    `SELECT a.offer_id, a.run_id FROM attempts a JOIN runs r ON r.id = a.run_id WHERE ${ON_OFFER} AND r.ended_at IS NULL`,
  );
  const onOffer = db.prepare(
    `SELECT a.run_id FROM attempts a JOIN runs r ON r.id = a.run_id
     WHERE ${ON_OFFER} AND r.ended_at IS NULL AND a.offer_id = ? AND a.run_id <> ? LIMIT 1`,
  );
  const everyAttempt = db.prepare(`SELECT a.*, r.ended_at AS run_ended_at FROM attempts a JOIN runs r ON r.id = a.run_id`);

  const begin = (a: AttemptIntent): { row: AttemptRow; fresh: boolean } => {
    const before = get.get(a.runId, a.n) as AttemptRow | undefined;
    if (before) return { row: before, fresh: false };
    const { gpu, ...row } = a;
    insertIntent.run({ ...row, gpuName: gpu?.name ?? null, numGpus: gpu?.count ?? null });
    return { row: get.get(a.runId, a.n) as AttemptRow, fresh: true };
  };

  return {
    get(runId: string, n: number): AttemptRow | undefined {
      return get.get(runId, n) as AttemptRow | undefined;
    },
    /**
     * Journals the intent to create (committed before the call) and returns the row: a fresh
     * 'intent' when this is the first try, or what an earlier process already recorded.
     */
    beginCreate(a: AttemptIntent): { row: AttemptRow; fresh: boolean } {
      return db.transaction(() => begin(a));
    },
    /** The attempt owns this instance (its create answered, or a list showed its label); false when it holds another or gave up. */
    adopt(runId: string, n: number, instanceId: number, createdAt: number): boolean {
      return adopt.run({ runId, n, instanceId, createdAt }).changes === 1;
    },
    /** The create made nothing (the offer was gone or refused, or it failed); only a row still in 'intent'. */
    notCreated(runId: string, n: number, state: 'offer_gone' | 'failed', detail: string): void {
      notCreated.run(state, detail, runId, n);
    },
    setStatus(runId: string, n: number, s: ObservedStatus, at: number): void {
      status.run({
        runId,
        n,
        at,
        actual_status: s.actual_status,
        status_msg: s.status_msg ?? null,
        ssh_host: s.ssh_host ?? null,
        ssh_port: s.ssh_port ?? null,
        dph_total: billedDph(s),
      });
    },
    /** The instance's billed $/h changed at `at` (a bid raised): what it accrued so far is kept. */
    setPrice(runId: string, n: number, dphTotal: number, at: number): void {
      price.run({ runId, n, at, dph_total: dphTotal });
    },
    /**
     * Every attempt whose instance may have billed since `from`: those not confirmed destroyed
     * (creates in flight included), and those confirmed destroyed after `from`.
     */
    billingSince(from: number): BillingRow[] {
      // -Infinity (`berth costs` without --since) is no BIGINT for Postgres: the smallest time there is.
      const since = Number.isFinite(from) ? from : Number.MIN_SAFE_INTEGER;
      return [...(mayBill.all() as BillingRow[]), ...(confirmedAfter.all(since) as BillingRow[])];
    },
    setOutcome(runId: string, n: number, value: string, detail: string | null, endedAt: number | null): void {
      outcome.run({ runId, n, outcome: value, detail, endedAt });
    },
    /** A list taken after the destroy no longer shows the attempt's instance: it bills no more. */
    destroyConfirmed(runId: string, n: number, instanceId: number, at: number): void {
      destroyed.run({ runId, n, instanceId, at });
    },
    /** The run took the attempt's instance as ready, `via` how, with the SSH endpoints to show. */
    setReady(runId: string, n: number, via: string, endpoints: unknown[], at: number): void {
      ready.run({ runId, n, via, endpoints: JSON.stringify(endpoints), at });
    },
    /** A warm instance's take (issue #51): the hold it came from and how far its update + recycle got. */
    setRecycle(runId: string, n: number, r: { holdId?: number; state: 'intent' | 'sent'; sha?: string }): void {
      recycle.run({ runId, n, holdId: r.holdId ?? null, state: r.state, sha: r.sha ?? null });
    },
    /** Keeps the last lines of a failed attempt's container log. */
    setLogTail(runId: string, n: number, text: string): void {
      logTail.run({ runId, n, text });
    },
    /** A task's output read over SSH up to byte `offset` (exclusive), and its tail kept so far: one statement. */
    setFollowed(runId: string, n: number, offset: number, tail: string): void {
      followed.run({ runId, n, offset, tail });
    },
    /** Pins the attempt's instance's host key (SHA256 fingerprint), unless one is pinned already. */
    pinHostKey(runId: string, n: number, key: string): void {
      pin.run({ runId, n, key });
    },
    forRun(runId: string): AttemptRow[] {
      return forRun.all(runId) as AttemptRow[];
    },
    /** Every attempt of these runs, in one query (by run, oldest first). */
    forRuns(runIds: readonly string[]): AttemptRow[] {
      return runIds.length === 0 ? [] : (forRuns.all(JSON.stringify(runIds)) as AttemptRow[]);
    },
    latest(runId: string): AttemptRow | undefined {
      return latest.get(runId) as AttemptRow | undefined;
    },
    /** The offer of every live run's attempt still on it (creating, or its instance booting), with its run. */
    onOffers(): Array<{ offer_id: number; run_id: string }> {
      return onOffers.all() as Array<{ offer_id: number; run_id: string }>;
    },
    /** A run other than `runId` whose attempt is still on the offer, if any. */
    onOffer(offerId: number, runId: string): string | undefined {
      return (onOffer.get(offerId, runId) as { run_id: string } | undefined)?.run_id;
    },
    /** What every attempt in the table has cost up to `now`, USD, counted as the money guard counts (./spend.ts). */
    spendUsd(now: number): number {
      let usd = 0;
      for (const a of everyAttempt.all() as BillingRow[]) usd += attemptSpend(a, a.run_ended_at, now);
      return usd;
    },
  };
}
