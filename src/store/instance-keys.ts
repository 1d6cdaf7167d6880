// The instance_keys table: the restricted per-instance key (`instance_api_key`, the container's
// CONTAINER_API_KEY) each create answered with. A secret: only the failure logs' scrubber reads it,
// and nothing renders it. Kept so that a restarted daemon still knows which values to remove from a
// container's log; deleted when the instance's destroy is confirmed.
import type { SqlDb } from './sql-db.js';

export function createInstanceKeysRepo(db: SqlDb) {
  const put = db.prepare(
    `INSERT INTO instance_keys (instance_id, key) VALUES (?, ?) ON CONFLICT (instance_id) DO UPDATE SET key = excluded.key`,
  );
  const get = db.prepare(`SELECT key FROM instance_keys WHERE instance_id = ?`);
  const forget = db.prepare(`DELETE FROM instance_keys WHERE instance_id = ?`);
  return {
    put(instanceId: number, key: string): void {
      put.run(instanceId, key);
    },
    get(instanceId: number): string | undefined {
      return (get.get(instanceId) as { key: string } | undefined)?.key;
    },
    forget(instanceId: number): void {
      forget.run(instanceId);
    },
  };
}
