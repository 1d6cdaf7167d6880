// The blobs table: content-addressed files a run needs (a task's packed workdir, issue #40), kept
// in the store so that they survive a restart and reach every daemon of a shared store. A blob is
// its parts in order, each at most PART_BYTES, so that no single statement (and, on Postgres, no
// single message to the store's worker) carries more; all parts of a blob go in one transaction,
// so a blob is there whole or not at all. The caller checks the hash before it puts one.
import type { SqlDb } from './sql-db.js';

/** The most bytes one row holds. */
const PART_BYTES = 4 * 1024 * 1024;
/** An unreferenced blob (uploaded, its submission never made) is kept this long, ms. */
const UNREFERENCED_KEEP_MS = 24 * 3600_000;

/** A part as a driver returns it: a Buffer (better-sqlite3) or a Uint8Array (Postgres, structured-cloned). */
function bytesOf(v: unknown): Buffer {
  if (Buffer.isBuffer(v)) return v;
  const u = v as Uint8Array;
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

export function createBlobsRepo(db: SqlDb) {
  const insert = db.prepare(
    `INSERT INTO blobs (sha256, part, data, size, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (sha256, part) DO NOTHING`,
  );
  const sizeOf = db.prepare(`SELECT size FROM blobs WHERE sha256 = ? AND part = 0`);
  const partOf = db.prepare(`SELECT data FROM blobs WHERE sha256 = ? AND part = ?`);
  // A blob no run's spec names (a task's workdir_sha256 is in its spec_json): its submission never came, or its runs were purged.
  const purge = db.prepare(
    `DELETE FROM blobs WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.spec_json LIKE '%' || blobs.sha256 || '%')`,
  );
  return {
    /** Keeps `data` under its sha256 (already checked by the caller); a blob already there is left as it is. Call in a transaction. */
    put(sha256: string, data: Buffer, now: number): void {
      const parts = Math.max(1, Math.ceil(data.length / PART_BYTES));
      for (let i = 0; i < parts; i++) insert.run(sha256, i, data.subarray(i * PART_BYTES, (i + 1) * PART_BYTES), data.length, now);
    },
    /** The blob's size in bytes, or null when the store has none under this hash. */
    size(sha256: string): number | null {
      return (sizeOf.get(sha256) as { size: number } | undefined)?.size ?? null;
    },
    /** The whole blob, or null when the store has none under this hash. */
    get(sha256: string): Buffer | null {
      const parts: Buffer[] = [];
      for (let i = 0; ; i++) {
        const row = partOf.get(sha256, i) as { data: unknown } | undefined;
        if (!row) break;
        parts.push(bytesOf(row.data));
      }
      return parts.length === 0 ? null : Buffer.concat(parts);
    },
    /** Deletes the blobs no run names that are older than a day; returns how many rows went. */
    purgeUnreferenced(now: number): number {
      return purge.run(now - UNREFERENCED_KEEP_MS).changes;
    },
  };
}
