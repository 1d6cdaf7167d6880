// The rate_slots table (issue #21 item 4): daemons that share one API key share the service's
// limits, which the service enforces as a minimum interval between two calls of one group. Each
// daemon's own limiter spaces its own calls; this table spaces everyone's: a call claims the group's
// next free moment and moves it on by the group's spacing, in one statement (the row's lock orders
// concurrent claims), then waits for that moment before it is sent.
import type { SqlDb } from './sql-db.js';

export function createRateSlotsRepo(db: SqlDb) {
  const claim = db.prepare(
    `INSERT INTO rate_slots (grp, next_at) VALUES (@grp, @first)
     ON CONFLICT (grp) DO UPDATE SET
       next_at = (CASE WHEN rate_slots.next_at > @now THEN rate_slots.next_at ELSE @now END) + @spacing
     RETURNING next_at - @spacing AS at`,
  );
  return {
    /**
     * Claims the next moment a call of `group` may go, at least `now`, and moves the group's next
     * free moment `spacingMs` past it. Times are on the database's clock, as the leases'.
     */
    claim(group: string, now: number, spacingMs: number): number {
      return Number((claim.get({ grp: group, now, spacing: spacingMs, first: now + spacingMs }) as { at: number | string }).at);
    },
  };
}
