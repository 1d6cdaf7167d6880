// The rate_slots table (issue #21 item 4): daemons that share one API key share the service's
// limits, which the service enforces as a minimum interval between two calls of one group (and,
// after a refused create, a penalty for the whole key). Each daemon's own limiter spaces its own
// calls; this table spaces everyone's. A call takes its group's slot only when the group's next
// free moment has come, and sets the next one from that moment, in one statement (the row's lock
// orders concurrent takers): spacing is counted from when calls are sent, as one daemon's limiter
// counts it, so a call that went late never brings the next one closer. A 429's pause is written
// here too (`hold`), so that no daemon's call renews the key's penalty meanwhile.
import type { SqlDb } from './sql-db.js';

export function createRateSlotsRepo(db: SqlDb) {
  const take = db.prepare(
    `INSERT INTO rate_slots (grp, next_at) VALUES (@grp, @next)
     ON CONFLICT (grp) DO UPDATE SET next_at = excluded.next_at WHERE rate_slots.next_at <= @now
     RETURNING next_at`,
  );
  const nextAt = db.prepare(`SELECT next_at FROM rate_slots WHERE grp = ?`);
  const hold = db.prepare(
    `INSERT INTO rate_slots (grp, next_at) VALUES (@grp, @until)
     ON CONFLICT (grp) DO UPDATE SET next_at = excluded.next_at WHERE rate_slots.next_at < excluded.next_at`,
  );
  return {
    /**
     * Takes `group`'s slot at `now` if its next free moment has come (then the next one is
     * `now + spacingMs`) and returns null; else returns that moment, to wait for and try again.
     * Times are on the database's clock, as the leases'.
     */
    take(group: string, now: number, spacingMs: number): number | null {
      // next_at is a BIGINT of whole ms, and a spacing is seldom whole (1000 / 0.9 ms): Postgres
      // refuses a fraction there, which left every call unspaced. Rounded up: never closer.
      if (take.get({ grp: group, now: Math.floor(now), next: Math.ceil(now + spacingMs) }) !== undefined) return null;
      const row = nextAt.get(group) as { next_at: number | string } | undefined;
      return row === undefined ? now : Number(row.next_at);
    },
    /** No call of `group` may go before `until` (a 429's pause, for every daemon). */
    hold(group: string, until: number): void {
      hold.run({ grp: group, until: Math.ceil(until) });
    },
  };
}
