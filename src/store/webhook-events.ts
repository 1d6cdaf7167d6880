// The service's webhook deliveries berth has acted on, by event id: a replay is refused, also
// after a restart. Kept only as long as a replay could still pass the timestamp check.
import type { SqlDb } from './sql-db.js';

export function createWebhookEventsRepo(db: SqlDb) {
  const insert = db.prepare(
    `INSERT INTO webhook_events (event_id, received_at, notif_type) VALUES (?, ?, ?) ON CONFLICT (event_id) DO NOTHING`,
  );
  const olderThan = db.prepare(`DELETE FROM webhook_events WHERE received_at < ?`);
  return {
    /** Records the event; false when it was recorded before (a replay or a repeated delivery). */
    firstTime(eventId: string, at: number, notifType: string): boolean {
      return insert.run(eventId, at, notifType).changes === 1;
    },
    purgeBefore(before: number): number {
      return olderThan.run(before).changes;
    },
  };
}
