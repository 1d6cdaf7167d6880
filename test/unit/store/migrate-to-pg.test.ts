// The copy under `berth store migrate` (its CLI is tested end to end in test/e2e/store-migrate.test.ts):
// every table and the identity arrive as they were, across the copy's batches, and a copy that
// fails part way leaves the Postgres database empty and the SQLite store unmarked.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError } from '../../../src/errors.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { migrateToPg } from '../../../src/store/migrate-to-pg.js';
import { createPgDatabase, queryPg, type PgDatabase } from '../../helpers/pg-database.js';

let database: PgDatabase;
let home: string;
const stores: Store[] = [];
beforeEach(async () => {
  database = await createPgDatabase();
  home = mkdtempSync(join(tmpdir(), 'berth-migrate-'));
});
afterEach(async () => {
  stores.splice(0).forEach((s) => s.close());
  rmSync(home, { recursive: true, force: true });
  await database.drop();
});

const tables = async () =>
  (await queryPg<{ n: number }>(database.url, `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`))[0]!.n;

/** A SQLite store with a little of everything, and more events than one batch of the copy. */
function sqliteStore(): void {
  const s = openStore({ home, lock: true });
  s.transaction(() => {
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{"image":"x"}', createdAt: 1, idempotencyKey: 'k1', requestHash: 'h' });
    s.runs.insert({ id: 'r2', name: 'b', specJson: '{}', createdAt: 2 });
  });
  s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 0.5, label: `berth:${s.storeId}:r1:1`, at: 3 });
  s.attempts.adopt('r1', 1, 501, 3);
  s.attempts.setReady('r1', 1, 'ssh', [{ kind: 'direct', host: 'h', port: 22 }], 4);
  s.runs.setState('r2', 'cancelled', { kind: 'deadline', message: 'late' }, 5);
  s.transaction(() => {
    for (let i = 0; i < 2_500; i++)
      s.events.append({ runId: i % 2 ? 'r1' : 'r2', at: 10 + i, type: 't', message: `event ${i}`, data: { i } });
  });
  s.transaction(() =>
    s.outbox.add({ id: 'n1', type: 'run.running', runId: 'r1', logId: 1, target: 0, targetUrl: 'http://x', body: '{}', at: 9 }),
  );
  s.instanceKeys.put(501, 'instance-key');
  s.webhookEvents.firstTime('ev1', 100, 'low_credit');
  s.secretKey('ready');
  // A packed workdir of two parts (4 MiB each at most) and a kept outputs' manifest.
  s.transaction(() => s.blobs.put('ab'.repeat(32), Buffer.alloc(5 * 1024 * 1024, 7), 11));
  s.outputs.begin({ runId: 'r1', attempt: 1, state: 'collecting', host: 'here', dir: '/o/r1/attempt-1', detail: null, at: 12 });
  s.outputs.finish({
    runId: 'r1',
    attempt: 1,
    state: 'kept',
    files: [{ path: '/root/out/m.bin', name: 'root/out/m.bin', size: 3, sha256: 'cd'.repeat(32) }],
    detail: null,
    at: 13,
  });
  s.close();
}

function snapshot(s: Store) {
  return {
    storeId: s.storeId,
    runs: s.runs.list(),
    attempts: s.attempts.forRuns(['r1', 'r2']),
    events: s.events.since(0, 10_000),
    outbox: s.outbox.list(10),
    key: s.instanceKeys.get(501),
    secret: s.secretKey('ready').toString('hex'),
    spend: s.spendUsd(1_000_000),
    states: s.runsByState(),
    blob: s.blobs.get('ab'.repeat(32))?.toString('base64'),
    outputs: s.outputs.forRun('r1'),
  };
}

describe('migrateToPg', () => {
  it('copies every table, the store id and the secret keys, across batches, and marks the SQLite store as moved', () => {
    sqliteStore();
    const sqlite = openStore({ home });
    stores.push(sqlite);
    const expected = snapshot(sqlite);
    sqlite.close();
    stores.pop();

    const result = migrateToPg({ home, url: database.url });
    expect(result).toMatchObject({
      storeId: expected.storeId,
      rows: { runs: 2, attempts: 1, events: 2_500, outbox: 1, instance_keys: 1, webhook_events: 1, run_outputs: 1, blobs: 2 },
    });

    const pg = openStore({ home: join(home, 'pg'), pg: { url: database.url } });
    stores.push(pg);
    expect(snapshot(pg)).toEqual(expected);
    expect(pg.webhookEvents.firstTime('ev1', 200, 'low_credit')).toBe(false);
    // The idempotency key came along: the same submission is the same run.
    expect(pg.runs.insert({ id: 'r9', name: 'a', specJson: '{}', createdAt: 9, idempotencyKey: 'k1' }).row.id).toBe('r1');

    expect(() => openStore({ home, lock: true })).toThrow(/was copied to the postgres .* store on .*\(berth store migrate\)/);
    expect(() => migrateToPg({ home, url: database.url })).toThrow(StoreError);
  });

  it('leaves the database empty and the SQLite store unmarked when the copy fails part way', async () => {
    sqliteStore();
    // A value Postgres refuses, as a hand-edited berth.db might hold: text in an integer column.
    const raw = new Database(join(home, 'berth.db'));
    raw.prepare(`UPDATE attempts SET ssh_port = 'twenty-two'`).run();
    raw.close();
    expect(() => migrateToPg({ home, url: database.url })).toThrow(
      /^The copy into the postgres .* database failed \(22P02: invalid input syntax for type integer.*\): nothing was changed\.$/,
    );
    expect(await tables()).toBe(0);
    // Not marked: the daemon still starts on it.
    const again = openStore({ home, lock: true });
    stores.push(again);
    expect(again.runs.list()).toHaveLength(2);
  });
});
