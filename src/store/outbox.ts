// The notification outbox: one row per notification per target, written in the transaction that
// stores the run's event (src/daemon/runs/run-driver.ts), so that an event is never stored without its
// notifications nor the other way round, whenever the daemon dies. The notifier
// (src/daemon/notify/notifier.ts) POSTs them. A row's states:
//   pending (next_at: when it may go) → delivered (a 2xx) | dead (undeliverable for too long, or its
//   target left the config). A POST in flight has its next_at pushed past its timeout first (a
//   claim), so a killed daemon's POSTs go again after a restart: at least once.
import type { DeliveryState } from '../wire/notify-events.js';
import type { SqlDb } from './sql-db.js';

export interface OutboxRow {
  seq: number;
  id: string;
  type: string;
  run_id: string;
  log_id: number | null;
  target: number;
  target_url: string;
  body: string;
  state: DeliveryState;
  attempts: number;
  created_at: number;
  next_at: number | null;
  finished_at: number | null;
  last_error: string | null;
}

export interface NewDelivery {
  id: string;
  type: string;
  runId: string;
  logId: number | null;
  target: number;
  targetUrl: string;
  body: string;
  at: number;
}

/** What became of one POST. */
export type DeliveryOutcome =
  | { seq: number; kind: 'delivered'; at: number }
  | { seq: number; kind: 'failed'; nextAt: number; error: string }
  | { seq: number; kind: 'dead'; at: number; error: string };

export function createOutboxRepo(db: SqlDb) {
  const insert = db.prepare(
    `INSERT INTO outbox (id, type, run_id, log_id, target, target_url, body, created_at, next_at)
     VALUES (@id, @type, @runId, @logId, @target, @targetUrl, @body, @at, @at)`,
  );
  const due = db.prepare(`SELECT * FROM outbox WHERE state = 'pending' AND target_url = ? AND next_at <= ? ORDER BY next_at, seq LIMIT ?`);
  const nextDue = db.prepare(
    `SELECT min(next_at) AS at FROM outbox WHERE state = 'pending' AND target_url IN ${db.dialect.jsonTextValues('?')}`,
  );
  const claim = db.prepare(`UPDATE outbox SET attempts = attempts + 1, next_at = ? WHERE seq = ? AND state = 'pending'`);
  const delivered = db.prepare(`UPDATE outbox SET state = 'delivered', finished_at = ?, next_at = NULL, last_error = NULL WHERE seq = ?`);
  const failed = db.prepare(`UPDATE outbox SET next_at = ?, last_error = ? WHERE seq = ? AND state = 'pending'`);
  const dead = db.prepare(
    `UPDATE outbox SET state = 'dead', finished_at = ?, next_at = NULL, last_error = ? WHERE seq = ? AND state = 'pending'`,
  );
  const orphaned = db.prepare(
    `UPDATE outbox SET state = 'dead', finished_at = ?, next_at = NULL, last_error = ?
     WHERE state = 'pending' AND target_url NOT IN ${db.dialect.jsonTextValues('?')}`,
  );
  // The cast tells Postgres the parameter's type, which `IS NULL` does not.
  const newest = db.prepare(`SELECT * FROM outbox WHERE (CAST(@state AS TEXT) IS NULL OR state = @state) ORDER BY seq DESC LIMIT @limit`);
  const newestBefore = db.prepare(
    `SELECT * FROM outbox WHERE seq < @before AND (CAST(@state AS TEXT) IS NULL OR state = @state) ORDER BY seq DESC LIMIT @limit`,
  );
  const counts = db.prepare(`SELECT state, count(*) AS n FROM outbox GROUP BY state`);
  const finishedBefore = db.prepare(`DELETE FROM outbox WHERE state <> 'pending' AND finished_at < ?`);

  // A burst of a thousand notifications is a handful of commits, not two thousand (each commit
  // waits for the disk: synchronous=FULL).
  const claimAll = (seqs: readonly number[], retryAt: number) => seqs.filter((seq) => claim.run(retryAt, seq).changes === 1);
  const settleAll = (outcomes: readonly DeliveryOutcome[]) => {
    for (const o of outcomes) {
      if (o.kind === 'delivered') delivered.run(o.at, o.seq);
      else if (o.kind === 'failed') failed.run(o.nextAt, o.error, o.seq);
      else dead.run(o.at, o.error, o.seq);
    }
  };

  return {
    /** Call inside the transaction that stores the event. */
    add(d: NewDelivery): void {
      insert.run(d);
    },
    /** Pending deliveries to `url` that may go at `now`, oldest first. */
    due(url: string, now: number, limit: number): OutboxRow[] {
      return due.all(url, now, limit) as OutboxRow[];
    },
    /** When the first pending delivery to one of `urls` may go; null when none waits. */
    nextDueAt(urls: readonly string[]): number | null {
      return (nextDue.get(JSON.stringify(urls)) as { at: number | null }).at;
    },
    /**
     * These POSTs go now: each is counted, and not due again before `retryAt` (should the daemon
     * die meanwhile). Returns the seqs claimed (those still pending), in one transaction.
     */
    claim(seqs: readonly number[], retryAt: number): number[] {
      return db.transaction(() => claimAll(seqs, retryAt));
    },
    /** Records what became of POSTs, in one transaction. */
    settle(outcomes: readonly DeliveryOutcome[]): void {
      db.transaction(() => settleAll(outcomes));
    },
    /** Pending deliveries to a URL no longer configured are dead; returns how many. */
    orphaned(configured: readonly string[], at: number): number {
      return orphaned.run(at, 'its target is no longer in the config (notify)', JSON.stringify(configured)).changes;
    },
    /** Newest first; `before` (a seq) pages on. */
    list(limit: number, before?: number, state?: DeliveryState): OutboxRow[] {
      const params = { limit, state: state ?? null };
      return (before === undefined ? newest.all(params) : newestBefore.all({ ...params, before })) as OutboxRow[];
    },
    counts(): Record<DeliveryState, number> {
      const out: Record<DeliveryState, number> = { pending: 0, delivered: 0, dead: 0 };
      for (const r of counts.all() as Array<{ state: DeliveryState; n: number }>) out[r.state] = r.n;
      return out;
    },
    /** Retention: deletes delivered and dead rows that finished before `before`. */
    purgeFinished(before: number): number {
      return finishedBefore.run(before).changes;
    },
  };
}
