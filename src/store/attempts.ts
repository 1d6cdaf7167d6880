// The attempts table: one row per offer tried, and the journal of its create. A row in
// create_state 'intent' means a create call may have reached the service: whoever finds it must
// look for the attempt's label in the instance list before anything else.
import type { Db } from './database.js';

export type CreateState = 'intent' | 'created' | 'offer_gone' | 'failed';
export type DestroyState = 'none' | 'requested' | 'confirmed';

export interface AttemptRow {
  run_id: string;
  n: number;
  offer_id: number;
  machine_id: number | null;
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
  destroy_state: DestroyState;
  started_at: number;
  ended_at: number | null;
}

export interface AttemptStart {
  runId: string;
  n: number;
  offerId: number;
  machineId: number | null;
  dphTotal: number | null;
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
  const fillDetails = db.prepare(
    `UPDATE attempts SET machine_id = COALESCE(machine_id, @machineId), dph_total = COALESCE(dph_total, @dphTotal)
     WHERE run_id = @runId AND n = @n`,
  );
  const created = db.prepare(
    `UPDATE attempts SET create_state = 'created', instance_id = ? WHERE run_id = ? AND n = ?`,
  );
  const createResult = db.prepare(
    `UPDATE attempts SET create_state = ?, create_detail = ? WHERE run_id = ? AND n = ? AND create_state = 'intent'`,
  );
  const status = db.prepare(
    `UPDATE attempts SET actual_status = @actual_status, status_msg = @status_msg, ssh_host = @ssh_host, ssh_port = @ssh_port,
       dph_total = COALESCE(@dph_total, dph_total)
     WHERE run_id = @runId AND n = @n`,
  );
  const outcome = db.prepare(
    `UPDATE attempts SET outcome = @outcome, detail = @detail, ended_at = @endedAt WHERE run_id = @runId AND n = @n`,
  );
  const destroy = db.prepare(`UPDATE attempts SET destroy_state = ? WHERE run_id = ? AND n = ?`);
  const forRun = db.prepare(`SELECT * FROM attempts WHERE run_id = ? ORDER BY n`);
  const latest = db.prepare(`SELECT * FROM attempts WHERE run_id = ? ORDER BY n DESC LIMIT 1`);

  const begin = db.transaction((a: AttemptStart): AttemptRow => {
    insertIntent.run(a);
    return get.get(a.runId, a.n) as AttemptRow;
  });

  return {
    get(runId: string, n: number): AttemptRow | undefined {
      return get.get(runId, n) as AttemptRow | undefined;
    },
    /**
     * Journals the intent to create (committed before the call) and returns the row: a fresh
     * 'intent' when this is the first try, or what an earlier process already recorded.
     */
    beginCreate(a: AttemptStart): { row: AttemptRow; fresh: boolean } {
      const before = get.get(a.runId, a.n) as AttemptRow | undefined;
      const row = before ?? begin(a);
      return { row, fresh: before === undefined };
    },
    /** Called for `attempt.started`: the actor normally wrote the row already; fill what it lacked. */
    noteStarted(a: AttemptStart): void {
      insertIntent.run(a);
      fillDetails.run(a);
    },
    markCreated(runId: string, n: number, instanceId: number): void {
      created.run(instanceId, runId, n);
    },
    markCreateResult(runId: string, n: number, state: 'offer_gone' | 'failed', detail: string): void {
      createResult.run(state, detail, runId, n);
    },
    setStatus(runId: string, n: number, s: ObservedStatus): void {
      status.run({
        runId,
        n,
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
    setDestroyState(runId: string, n: number, state: DestroyState): void {
      destroy.run(state, runId, n);
    },
    forRun(runId: string): AttemptRow[] {
      return forRun.all(runId) as AttemptRow[];
    },
    latest(runId: string): AttemptRow | undefined {
      return latest.get(runId) as AttemptRow | undefined;
    },
  };
}

export type AttemptsRepo = ReturnType<typeof createAttemptsRepo>;
