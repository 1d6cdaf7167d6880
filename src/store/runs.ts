// The runs table: one row per submitted run, with its state, error and the machine's snapshot.
import { isEndState, type RunState } from '../wire/run-states.js';
import type { RunError } from '../errors.js';
import type { AttemptRow } from './attempts.js';
import { attemptSpend } from './spend.js';
import type { SqlDb } from './sql-db.js';

export { isEndState, type RunState };

export interface RunRow {
  id: string;
  name: string;
  spec_json: string;
  state: RunState;
  created_at: number;
  updated_at: number;
  ended_at: number | null;
  idempotency_key: string | null;
  relax_level: number;
  attempt: number;
  error_json: string | null;
  snapshot_json: string | null;
  machine_version: number | null;
  /** Set when a restored database showed this run live: it waits for `berth resume` or a cancel. */
  held_at: number | null;
  cancel_requested_at: number | null;
  /** sha256 of the submitted spec, to tell a repeat from an Idempotency-Key reused for another spec. */
  request_hash: string | null;
}

export interface NewRun {
  id: string;
  name: string;
  specJson: string;
  createdAt: number;
  idempotencyKey?: string | undefined;
  requestHash?: string | undefined;
}

export interface RunProgress {
  state: RunState;
  relaxLevel: number;
  attempt: number;
  error: RunError | null;
  snapshotJson: string;
  machineVersion: number;
  at: number;
}

/** Which runs a list shows (the dashboard's filters). */
export interface RunFilter {
  states?: readonly RunState[];
  /** A part of the name, in any case. */
  name?: string;
}

export function createRunsRepo(db: SqlDb) {
  const insert = db.prepare(
    `INSERT INTO runs (id, name, spec_json, state, created_at, updated_at, idempotency_key, request_hash)
     VALUES (@id, @name, @specJson, 'queued', @createdAt, @createdAt, @idempotencyKey, @requestHash)
     ON CONFLICT (idempotency_key) DO NOTHING`,
  );
  const byId = db.prepare(`SELECT * FROM runs WHERE id = ?`);
  const byKey = db.prepare(`SELECT * FROM runs WHERE idempotency_key = ?`);
  // Newest first; among runs created in the same millisecond, by id. A page after a run starts
  // just past it in that order (keyset paging: stable while runs are added).
  const all = db.prepare(`SELECT * FROM runs ORDER BY created_at DESC, id LIMIT ?`);
  const allAfter = db.prepare(
    `SELECT * FROM runs WHERE created_at < @createdAt OR (created_at = @createdAt AND id > @id) ORDER BY created_at DESC, id LIMIT @limit`,
  );
  // The dashboard's filters: one statement per shape of filter (states or not, a name or not, a
  // page after a run or not), made when first asked for, so that each is plain SQL both backends plan well.
  const filteredBy = new Map<string, ReturnType<SqlDb['prepare']>>();
  const filterStatement = (f: RunFilter, what: 'rows' | 'count', after: boolean) => {
    const states = (f.states?.length ?? 0) > 0;
    const key = `${what}:${states}:${Boolean(f.name)}:${after}`;
    let statement = filteredBy.get(key);
    if (!statement) {
      const where = [
        states ? `state IN ${db.dialect.jsonTextValues('@states')}` : '',
        f.name ? `lower(name) LIKE @name ESCAPE '\\'` : '',
        after ? '(created_at < @createdAt OR (created_at = @createdAt AND id > @id))' : '',
      ].filter(Boolean);
      const clause = where.length > 0 ? `WHERE ${where.join(' AND ')}` : '';
      statement = db.prepare(
        what === 'count'
          ? `SELECT count(*) AS n FROM runs ${clause}`
          : `SELECT * FROM runs ${clause} ORDER BY created_at DESC, id LIMIT @limit`,
      );
      filteredBy.set(key, statement);
    }
    return statement;
  };
  const filterParams = (f: RunFilter): Record<string, unknown> => ({
    ...((f.states?.length ?? 0) > 0 ? { states: JSON.stringify(f.states) } : {}),
    // LIKE's own wildcards in the name are matched as themselves.
    ...(f.name ? { name: `%${f.name.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%` } : {}),
  });
  const live = db.prepare(`SELECT * FROM runs WHERE ended_at IS NULL ORDER BY created_at, id`);
  // Names among live runs, by the partial index runs_live_name, and the suffix each name tries next
  // (run_name_suffixes): a submission's name costs a few index look-ups however many runs are stored.
  const nameIsLive = db.prepare(`SELECT 1 AS live FROM runs WHERE name = ? AND ended_at IS NULL LIMIT 1`);
  const takeSuffix = db.prepare(
    `INSERT INTO run_name_suffixes (name, next_n) VALUES (?, 3)
     ON CONFLICT (name) DO UPDATE SET next_n = run_name_suffixes.next_n + 1 RETURNING next_n - 1 AS n`,
  );
  const forgetSuffix = db.prepare(`DELETE FROM run_name_suffixes WHERE name = ?`);
  const progress = db.prepare(
    `UPDATE runs SET state = @state, relax_level = @relaxLevel, attempt = @attempt, error_json = @errorJson,
       snapshot_json = @snapshotJson, machine_version = @machineVersion, updated_at = @at,
       ended_at = CASE WHEN @ended = 1 THEN CAST(@at AS BIGINT) ELSE NULL END
     WHERE id = @id`,
  );
  const cancelRequest = db.prepare(
    `UPDATE runs SET cancel_requested_at = COALESCE(cancel_requested_at, ?) WHERE id = ? AND ended_at IS NULL`,
  );
  const release = db.prepare(`UPDATE runs SET held_at = NULL WHERE id = ? AND held_at IS NOT NULL`);
  const heldCount = db.prepare(`SELECT count(*) AS n FROM runs WHERE held_at IS NOT NULL AND ended_at IS NULL`);
  const driven = db.prepare(
    `SELECT count(*) AS live, COALESCE(sum(CASE WHEN state = 'queued' THEN 1 ELSE 0 END), 0) AS queued
     FROM runs WHERE ended_at IS NULL AND held_at IS NULL`,
  );
  const endedBefore = db.prepare(`SELECT id FROM runs WHERE ended_at IS NOT NULL AND ended_at < ? LIMIT 500`);
  const deleteAttempts = db.prepare(`DELETE FROM attempts WHERE run_id = ?`);
  // The spend of what is deleted is kept in one sum, so that total spend never goes down.
  const attemptsOf = db.prepare(`SELECT * FROM attempts WHERE run_id = ?`);
  const keepSpend = db.prepare(`UPDATE meta SET value = CAST(CAST(value AS DOUBLE PRECISION) + ? AS TEXT) WHERE key = 'purged_spend_usd'`);
  const deleteEvents = db.prepare(`DELETE FROM events WHERE run_id = ?`);
  const deleteRun = db.prepare(`DELETE FROM runs WHERE id = ?`);
  const deleteLease = db.prepare(`DELETE FROM run_leases WHERE run_id = ?`);
  const deleteOutputs = db.prepare(`DELETE FROM run_outputs WHERE run_id = ?`);
  const setState = db.prepare(
    `UPDATE runs SET state = @state, error_json = @errorJson, updated_at = @at,
       ended_at = CASE WHEN @ended = 1 THEN @at ELSE ended_at END WHERE id = @id`,
  );

  return {
    /** Inserts a run; with an idempotency key already used, returns the earlier run instead. */
    insert(run: NewRun): { row: RunRow; created: boolean } {
      const info = insert.run({ ...run, idempotencyKey: run.idempotencyKey ?? null, requestHash: run.requestHash ?? null });
      if (info.changes === 1) return { row: byId.get(run.id) as RunRow, created: true };
      return { row: byKey.get(run.idempotencyKey) as RunRow, created: false };
    },
    get(id: string): RunRow | undefined {
      return byId.get(id) as RunRow | undefined;
    },
    /** Up to `limit` runs, newest first; with `after`, those that come after that run in this order. */
    list(limit = 1000, after?: Pick<RunRow, 'id' | 'created_at'>): RunRow[] {
      if (after) return allAfter.all({ createdAt: after.created_at, id: after.id, limit }) as RunRow[];
      return all.all(limit) as RunRow[];
    },
    /** As `list`, only the runs in one of `states` (when given) whose name holds `name` (any case, when given). */
    listFiltered(filter: RunFilter, limit: number, after?: Pick<RunRow, 'id' | 'created_at'>): RunRow[] {
      const page = after ? { createdAt: after.created_at, id: after.id } : {};
      return filterStatement(filter, 'rows', after !== undefined).all({ ...filterParams(filter), ...page, limit }) as RunRow[];
    },
    /** How many runs `listFiltered` pages through. */
    count(filter: RunFilter = {}): number {
      const params = filterParams(filter);
      // A statement without placeholders takes no parameter object (Postgres refuses one).
      const statement = filterStatement(filter, 'count', false);
      const row = (Object.keys(params).length > 0 ? statement.get(params) : statement.get()) as { n: number | string };
      return Number(row.n);
    },
    live(): RunRow[] {
      return live.all() as RunRow[];
    },
    /**
     * The name a run about to be inserted takes, in the same transaction: `name` when no live run
     * has it, else `name-N` for the next N of the name's counter that no live run has (a run named
     * `train-3` as written is stepped over). The counter starts again at 2 once `name` itself is
     * free, so suffixes stay small; each look-up is one row of an index, whatever the store holds.
     */
    claimName(name: string): string {
      if (nameIsLive.get(name) === undefined) {
        forgetSuffix.run(name);
        return name;
      }
      for (;;) {
        const { n } = takeSuffix.get(name) as { n: number | string };
        const candidate = `${name}-${Number(n)}`;
        if (nameIsLive.get(candidate) === undefined) return candidate;
      }
    },
    saveProgress(id: string, p: RunProgress): void {
      progress.run({
        id,
        state: p.state,
        relaxLevel: p.relaxLevel,
        attempt: p.attempt,
        errorJson: p.error ? JSON.stringify(p.error) : null,
        snapshotJson: p.snapshotJson,
        machineVersion: p.machineVersion,
        at: p.at,
        ended: isEndState(p.state) ? 1 : 0,
      });
    },
    /** Records that the user asked to cancel (kept until the run's actor has the CANCEL). */
    requestCancel(id: string, at: number): void {
      cancelRequest.run(at, id);
    },
    /**
     * Lifts a restore hold: the user confirmed the run may go on (or cancels it, or a limit ends it).
     * False when it was not held (another daemon lifted it first).
     */
    release(id: string): boolean {
      return release.run(id).changes > 0;
    },
    heldCount(): number {
      return (heldCount.get() as { n: number }).n;
    },
    /** Runs some daemon drives (not ended, not held after a restore), and how many of them wait in the queue. */
    drivenCount(): { live: number; queued: number } {
      const row = driven.get() as { live: number | string; queued: number | string };
      return { live: Number(row.live), queued: Number(row.queued) };
    },
    /**
     * Deletes up to 500 runs that ended before `before`, with their attempts and events (call in a
     * transaction, again while it returns 500). Their idempotency keys go with them; what their
     * instances cost (as of `now`) is added to the purged spend.
     */
    purgeEnded(before: number, now: number): number {
      const ids = (endedBefore.all(before) as { id: string }[]).map((r) => r.id);
      for (const id of ids) {
        const endedAt = (byId.get(id) as RunRow).ended_at;
        keepSpend.run((attemptsOf.all(id) as AttemptRow[]).reduce((usd, a) => usd + attemptSpend(a, endedAt, now), 0));
        deleteAttempts.run(id);
        deleteEvents.run(id);
        deleteLease.run(id);
        deleteOutputs.run(id);
        deleteRun.run(id);
      }
      return ids.length;
    },
    /** For runs that cannot be resumed (unreadable snapshot): state and error only. */
    setState(id: string, state: RunState, error: RunError | null, at: number): void {
      setState.run({ id, state, errorJson: error ? JSON.stringify(error) : null, at, ended: isEndState(state) ? 1 : 0 });
    },
  };
}
