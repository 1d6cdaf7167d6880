// The instance_sightings table (issue #21 item 4): daemons sharing a store share one view of the
// account's instances, so that only the leader reads the whole account (the v1 list is 25 a page at
// 1 call/s for the whole key: three daemons each sweeping would take three times as long to see a
// lost instance). The leader writes what each of its lists showed; every daemon reads what was
// written since it last looked, and the start of the leader's last complete sweep, from which an
// instance of its runs that no row shows as swept since is absent.
//
// Times are on the database's clock (the leases' measure), whole ms. `written_at` orders the rows
// for readers; a reader looks a little before its last mark, so a row whose transaction committed
// late is not skipped (./events.ts's frontier does the same for events).
import type { SqlDb } from './sql-db.js';

/** One instance as a list showed it: only the fields berth reads (never env values nor tokens). */
export interface Sighting {
  instance: Record<string, unknown> & { id: number };
  /** When the list that showed it was asked for (database clock, ms). */
  listedAt: number;
  /** The start of the latest complete-or-running sweep that showed it; null if only targeted lists did. */
  sweptAt: number | null;
}

interface SightingRow {
  instance_json: string;
  listed_at: number | string;
  swept_at: number | string | null;
  written_at: number | string;
}

const toSighting = (r: SightingRow): Sighting & { writtenAt: number } => ({
  instance: JSON.parse(r.instance_json) as Sighting['instance'],
  listedAt: Number(r.listed_at),
  sweptAt: r.swept_at === null ? null : Number(r.swept_at),
  writtenAt: Number(r.written_at),
});

export function createSightingsRepo(db: SqlDb) {
  const greatest = db.dialect.greatest('instance_sightings.swept_at', 'excluded.swept_at');
  // A newer listing replaces an older one; a sweep's mark only ever moves forward.
  const upsert = db.prepare(
    `INSERT INTO instance_sightings (instance_id, instance_json, listed_at, swept_at, written_at)
     VALUES (@id, @json, @listed, @swept, @written)
     ON CONFLICT (instance_id) DO UPDATE SET
       instance_json = CASE WHEN excluded.listed_at >= instance_sightings.listed_at THEN excluded.instance_json ELSE instance_sightings.instance_json END,
       listed_at = CASE WHEN excluded.listed_at >= instance_sightings.listed_at THEN excluded.listed_at ELSE instance_sightings.listed_at END,
       swept_at = COALESCE(${greatest}, instance_sightings.swept_at, excluded.swept_at),
       written_at = excluded.written_at`,
  );
  const since = db.prepare(
    `SELECT instance_json, listed_at, swept_at, written_at FROM instance_sightings WHERE written_at > ? ORDER BY written_at`,
  );
  const sweptSince = db.prepare(`SELECT instance_json, listed_at, swept_at, written_at FROM instance_sightings WHERE swept_at >= ?`);
  const keepSweep = db.prepare(
    `INSERT INTO meta (key, value) VALUES ('sweep_done', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  );
  const readSweep = db.prepare(`SELECT value FROM meta WHERE key = 'sweep_done'`);
  const prune = db.prepare(`DELETE FROM instance_sightings WHERE listed_at < @before AND (swept_at IS NULL OR swept_at < @sweep)`);
  return {
    /** Writes what one list showed (`sweptAt`: the start of the sweep it was a page of, if it was). */
    record(instances: ReadonlyArray<Sighting['instance']>, listedAt: number, sweptAt: number | null, writtenAt: number): void {
      for (const inst of instances) {
        upsert.run({
          id: inst.id,
          json: JSON.stringify(inst),
          listed: Math.floor(listedAt),
          swept: sweptAt === null ? null : Math.floor(sweptAt),
          written: Math.ceil(writtenAt),
        });
      }
    },
    /** Rows written after `after`, oldest write first. */
    writtenSince(after: number): Array<Sighting & { writtenAt: number }> {
      return (since.all(Math.floor(after)) as SightingRow[]).map(toSighting);
    },
    /** Every instance a sweep started at or after `startedAt` showed. */
    sweptSince(startedAt: number): Array<Sighting & { writtenAt: number }> {
      return (sweptSince.all(Math.floor(startedAt)) as SightingRow[]).map(toSighting);
    },
    /**
     * The leader's sweep that started at `startedAt` went through every page: an instance no row
     * shows as swept since then is absent as of then. Rows of instances long gone are dropped.
     */
    sweepDone(startedAt: number, keepMs: number): void {
      keepSweep.run(String(Math.floor(startedAt)));
      prune.run({ before: Math.floor(startedAt - keepMs), sweep: Math.floor(startedAt) });
    },
    /** The start of the last complete sweep, or null before the first. */
    lastSweep(): number | null {
      const row = readSweep.get() as { value: string } | undefined;
      return row === undefined ? null : Number(row.value);
    },
  };
}
