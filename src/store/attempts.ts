// The attempts table: one row per offer tried, the journal of its create, and what its instance
// cost. A row in create_state 'intent' means a create call may have reached the service: whoever
// finds it must look for the attempt's label in the instance list before anything else.
//
// Only src/daemon/attempt-journal.ts calls the writes below; the SQL lives here.
//
// Money: per attempt the instance's billed $/h (`dph_total`: the offer's billed price, replaced by
// the list's own figure once the instance is listed), when it was made (`instance_created_at`, the
// earliest it can have been: when its create was sent), when it was first seen running and when its
// destroy was confirmed (null while it may still bill). Spend and runtime are computed from these.
import type { Db } from './database.js';

/**
 * What an attempt's instance has cost, USD, as SQL over an attempts row: its billed $/h times the
 * time it has existed, from when its create was sent to its confirmed destroy (or `@now` while it
 * may still bill). NULL for an attempt that made no instance. The money guard (issue #11) and the
 * spend counter of /metrics count alike.
 */
export const ATTEMPT_SPEND_SQL = `COALESCE(dph_total, 0) * MAX(0, COALESCE(destroy_confirmed_at, @now) - instance_created_at) / 3600000.0`;

export type CreateState = 'intent' | 'created' | 'offer_gone' | 'failed';

export interface AttemptRow {
  run_id: string;
  n: number;
  offer_id: number;
  machine_id: number | null;
  /** Billed $/h, disk included: the offer's until the instance is listed, then the list's dph_total. */
  dph_total: number | null;
  label: string;
  create_state: CreateState;
  create_detail: string | null;
  instance_id: number | null;
  actual_status: string | null;
  status_msg: string | null;
  ssh_host: string | null;
  ssh_port: number | null;
  outcome: string | null;
  detail: string | null;
  started_at: number;
  ended_at: number | null;
  /** When the create that made the instance was sent (it cannot have billed before); null without an instance. */
  instance_created_at: number | null;
  /** When a list first showed the instance running. */
  first_running_at: number | null;
  /** When a list taken after the destroy no longer showed the instance; null while it may still bill. */
  destroy_confirmed_at: number | null;
}

export interface AttemptIntent {
  runId: string;
  n: number;
  offerId: number;
  machineId: number;
  /** The offer's billed price, disk included. */
  dphTotal: number;
  label: string;
  at: number;
}

export interface ObservedStatus {
  actual_status: string | null;
  status_msg?: string | null;
  ssh_host?: string | null;
  ssh_port?: number | null;
  /** What the instance is billed, $/h, from the service's record; replaces the offer's quote. */
  dph_total?: number | null;
}

export function createAttemptsRepo(db: Db) {
  const get = db.prepare(`SELECT * FROM attempts WHERE run_id = ? AND n = ?`);
  const insertIntent = db.prepare(
    `INSERT INTO attempts (run_id, n, offer_id, machine_id, dph_total, label, create_state, started_at)
     VALUES (@runId, @n, @offerId, @machineId, @dphTotal, @label, 'intent', @at)
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
  const status = db.prepare(
    `UPDATE attempts SET actual_status = @actual_status, status_msg = @status_msg, ssh_host = @ssh_host, ssh_port = @ssh_port,
       dph_total = COALESCE(@dph_total, dph_total),
       first_running_at = CASE WHEN @actual_status = 'running' THEN COALESCE(first_running_at, @at) ELSE first_running_at END
     WHERE run_id = @runId AND n = @n`,
  );
  const outcome = db.prepare(
    `UPDATE attempts SET outcome = @outcome, detail = @detail, ended_at = @endedAt WHERE run_id = @runId AND n = @n`,
  );
  const destroyed = db.prepare(
    `UPDATE attempts SET destroy_confirmed_at = COALESCE(destroy_confirmed_at, @at)
     WHERE run_id = @runId AND n = @n AND instance_id = @instanceId`,
  );
  const forRun = db.prepare(`SELECT * FROM attempts WHERE run_id = ? ORDER BY n`);
  // Any number of runs in one statement: their ids as one JSON array parameter.
  const forRuns = db.prepare(`SELECT * FROM attempts WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, n`);
  const latest = db.prepare(`SELECT * FROM attempts WHERE run_id = ? ORDER BY n DESC LIMIT 1`);
  const spend = db.prepare(`SELECT COALESCE(SUM(${ATTEMPT_SPEND_SQL}), 0) AS usd FROM attempts`);
  // Made and not yet confirmed gone: each may be billing now.
  const live = db.prepare(
    `SELECT count(*) AS n, COALESCE(SUM(dph_total), 0) AS usdPerHour FROM attempts
     WHERE instance_id IS NOT NULL AND instance_created_at IS NOT NULL AND destroy_confirmed_at IS NULL`,
  );

  const begin = db.transaction((a: AttemptIntent): { row: AttemptRow; fresh: boolean } => {
    const before = get.get(a.runId, a.n) as AttemptRow | undefined;
    if (before) return { row: before, fresh: false };
    insertIntent.run(a);
    return { row: get.get(a.runId, a.n) as AttemptRow, fresh: true };
  });

  return {
    get(runId: string, n: number): AttemptRow | undefined {
      return get.get(runId, n) as AttemptRow | undefined;
    },
    /**
     * Journals the intent to create (committed before the call) and returns the row: a fresh
     * 'intent' when this is the first try, or what an earlier process already recorded.
     */
    beginCreate(a: AttemptIntent): { row: AttemptRow; fresh: boolean } {
      return begin.immediate(a);
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
        dph_total: s.dph_total ?? null,
      });
    },
    setOutcome(runId: string, n: number, value: string, detail: string | null, endedAt: number | null): void {
      outcome.run({ runId, n, outcome: value, detail, endedAt });
    },
    /** A list taken after the destroy no longer shows the attempt's instance: it bills no more. */
    destroyConfirmed(runId: string, n: number, instanceId: number, at: number): void {
      destroyed.run({ runId, n, instanceId, at });
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
    /** What every attempt in the table has cost up to `now`, USD (see ATTEMPT_SPEND_SQL). */
    spendUsd(now: number): number {
      return (spend.get({ now }) as { usd: number }).usd;
    },
    /** Instances made and not confirmed gone, and their summed billed $/h. */
    liveInstances(): { n: number; usdPerHour: number } {
      return live.get() as { n: number; usdPerHour: number };
    },
  };
}

export type AttemptsRepo = ReturnType<typeof createAttemptsRepo>;
