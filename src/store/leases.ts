// The run_leases table (issue #21 item 2, its start): each live run is owned by one daemon through a
// lease with an expiry, renewed while that daemon lives. A lease's epoch grows each time the run
// changes hands (or its owner takes it back after letting it expire), so a write fenced with an
// old epoch is refused even if its daemon still believes it owns the run.
//
// A lease's states: none → held (acquire) → held again (renew, before expires_at) → expired (no
// renewal; acquire by anyone moves it to held with epoch + 1) → none (release, at the run's end).
//
// The fence (`holds`) is an UPDATE of the lease row, not a read: on Postgres it keeps the row
// locked until the fenced transaction commits, so a take-over waits for it and then sees its
// writes (the new owner finds the intent in the journal and reconciles it). On SQLite a write
// transaction already excludes every other.
//
// Times are ms since epoch. The daemons measure them on the database's clock (`serverNow`), so that
// machines whose clocks disagree still agree on when a lease ends. Rows whose run_id starts with
// `~` are not runs: `~daemon:ID`, a daemon's heartbeat, and `~leader`, who does the account-wide
// duties (src/daemon/cluster/).
import type { SqlDb } from './sql-db.js';

export interface Lease {
  run_id: string;
  owner: string;
  epoch: number;
  expires_at: number;
}

export function createLeasesRepo(db: SqlDb) {
  const acquire = db.prepare(
    `INSERT INTO run_leases (run_id, owner, epoch, expires_at) VALUES (@runId, @owner, 1, @expiresAt)
     ON CONFLICT (run_id) DO UPDATE SET
       owner = excluded.owner,
       epoch = CASE WHEN run_leases.owner = excluded.owner AND run_leases.expires_at > @now
                 THEN run_leases.epoch ELSE run_leases.epoch + 1 END,
       expires_at = excluded.expires_at
     WHERE run_leases.owner = excluded.owner OR run_leases.expires_at <= @now
     RETURNING run_id, owner, epoch, expires_at`,
  );
  const renew = db.prepare(
    `UPDATE run_leases SET expires_at = @expiresAt WHERE owner = @owner AND expires_at > @now RETURNING run_id, owner, epoch, expires_at`,
  );
  const fence = db.prepare(
    `UPDATE run_leases SET expires_at = expires_at
     WHERE run_id = @runId AND owner = @owner AND epoch = @epoch AND expires_at > @now RETURNING run_id`,
  );
  const takeFrom = db.prepare(
    `UPDATE run_leases SET owner = @owner, epoch = epoch + 1, expires_at = @expiresAt
     WHERE run_id = @runId AND owner = @from AND epoch = @epoch RETURNING run_id, owner, epoch, expires_at`,
  );
  const release = db.prepare(`DELETE FROM run_leases WHERE run_id = ? AND owner = ?`);
  const get = db.prepare(`SELECT run_id, owner, epoch, expires_at FROM run_leases WHERE run_id = ?`);
  const expired = db.prepare(`SELECT run_leases.run_id FROM run_leases WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`);
  // Live runs nobody holds (never leased, or the lease expired): what a daemon may take. Runs already under way first (they may hold an instance: owned before any queued run
  // is admitted), then those asked to end, then the queued ones, oldest first.
  const claimable = db.prepare(
    `SELECT runs.id, runs.state, runs.cancel_requested_at FROM runs LEFT JOIN run_leases ON run_leases.run_id = runs.id
     WHERE runs.ended_at IS NULL AND runs.held_at IS NULL
       AND (run_leases.run_id IS NULL OR run_leases.expires_at <= @now)
     ORDER BY CASE WHEN runs.state <> 'queued' THEN 0 WHEN runs.cancel_requested_at IS NOT NULL THEN 1 ELSE 2 END, runs.created_at
     LIMIT @limit`,
  );
  const ownedBy = db.prepare(`SELECT run_id FROM run_leases WHERE owner = ? AND run_id NOT LIKE '~%' ORDER BY run_id`);
  const cancelled = db.prepare(
    `SELECT runs.id FROM runs JOIN run_leases ON run_leases.run_id = runs.id
     WHERE run_leases.owner = ? AND runs.cancel_requested_at IS NOT NULL AND runs.ended_at IS NULL`,
  );
  const daemonsSince = db.prepare(
    `SELECT owner, expires_at FROM run_leases WHERE run_id LIKE '~daemon:%' AND expires_at > ? ORDER BY owner`,
  );
  const liveOwners = db.prepare(`SELECT count(*) AS n FROM run_leases WHERE run_id LIKE '~daemon:%' AND expires_at > ?`);
  const serverNow = db.prepare(
    db.dialect.name === 'postgres'
      ? `SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT) AS now`
      : `SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) AS now`,
  );

  return {
    /**
     * Takes the run's lease for `owner` until now + ttlMs: when nobody holds it, when it expired,
     * or when `owner` holds it already (then it is extended, same epoch). Undefined while another
     * daemon holds it.
     */
    acquire(runId: string, owner: string, now: number, ttlMs: number): Lease | undefined {
      // Whole ms: Postgres's BIGINT takes no fraction (cluster.lease_s may have one).
      return acquire.get({ runId, owner, now, expiresAt: Math.ceil(now + ttlMs) }) as Lease | undefined;
    },
    /** Extends every lease `owner` still holds to now + ttlMs; returns them (an expired one is not renewed). */
    renew(owner: string, now: number, ttlMs: number): Lease[] {
      return renew.all({ owner, now, expiresAt: Math.ceil(now + ttlMs) }) as Lease[];
    },
    /**
     * The fence: true when `lease` (owner and epoch) still holds its run at `now`. Call inside the
     * transaction that writes a side effect's intent; the row stays locked until it commits.
     */
    holds(lease: Pick<Lease, 'run_id' | 'owner' | 'epoch'>, now: number): boolean {
      return fence.get({ runId: lease.run_id, owner: lease.owner, epoch: lease.epoch, now }) !== undefined;
    },
    /**
     * Takes a live lease from its holder for `owner` until now + ttlMs, only while `from` (owner
     * and epoch) still holds it: of two daemons taking it from one holder, one gets it (the leader's
     * lease, from a leader whose sweeps are overdue). The holder's next renewal finds it gone.
     */
    takeFrom(runId: string, from: Pick<Lease, 'owner' | 'epoch'>, owner: string, now: number, ttlMs: number): Lease | undefined {
      return takeFrom.get({ runId, from: from.owner, epoch: from.epoch, owner, expiresAt: Math.ceil(now + ttlMs) }) as Lease | undefined;
    },
    /** Gives the run up (it ended): only `owner`'s lease goes. */
    release(runId: string, owner: string): void {
      release.run(runId, owner);
    },
    get(runId: string): Lease | undefined {
      return get.get(runId) as Lease | undefined;
    },
    /**
     * Up to `limit` live runs any daemon may take at `now`: nobody's, or their lease expired (see
     * the query for the order). Each is then taken with `acquire`, which settles a race.
     */
    claimable(now: number, limit: number): Array<{ id: string; state: string; cancel_requested_at: number | null }> {
      return claimable.all({ now, limit }) as Array<{ id: string; state: string; cancel_requested_at: number | null }>;
    },
    /** The runs `owner` holds a lease on, live or expired (a restarted daemon takes its own back first). */
    ownedBy(owner: string): string[] {
      return (ownedBy.all(owner) as { run_id: string }[]).map((r) => r.run_id);
    },
    /** Live runs `owner` holds that were asked to end (a cancel sent to another daemon). */
    cancelRequested(owner: string): string[] {
      return (cancelled.all(owner) as { id: string }[]).map((r) => r.id);
    },
    /** Daemons whose heartbeat lease (`~daemon:ID`) is live at `now`. */
    liveDaemons(now: number): number {
      return Number((liveOwners.get(now) as { n: number | string }).n);
    },
    /**
     * The daemons whose heartbeat lease was live at some time after `since`: live now, or ended
     * since without a clean stop (which deletes the row), and when it ends or ended.
     */
    daemonsSeenSince(since: number): Array<{ owner: string; expires_at: number }> {
      return (daemonsSince.all(since) as Array<{ owner: string; expires_at: number | string }>).map((r) => ({
        owner: r.owner,
        expires_at: Number(r.expires_at),
      }));
    },
    /** The database's clock, ms since epoch: every daemon measures leases with it, not with its own. */
    serverNow(): number {
      return Number((serverNow.get() as { now: number | string }).now);
    },
    /** Runs whose lease expired by `now`, longest expired first: to be taken over. */
    expired(now: number, limit = 100): string[] {
      return (expired.all(now, limit) as { run_id: string }[]).map((r) => r.run_id);
    },
  };
}
