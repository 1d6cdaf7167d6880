// What only the Postgres store does: its own migration history, the synchronous bridge's bounds
// (a statement or a server that never answers is an error, never a hung daemon), transactions that
// stay whole when the connection is lost, and a URL's password that no error repeats. On a real
// Postgres server (test/helpers/pg-server.ts), one database per test.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError, StoreWriteError } from '../../../src/errors.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { SyncBridge } from '../../../src/store/pg/bridge.js';
import { PG_MIGRATIONS } from '../../../src/store/pg/migrations.js';
import { openPgDatabase } from '../../../src/store/pg/open.js';
import { createPgDatabase, queryPg, terminateConnections, type PgDatabase } from '../../helpers/pg-database.js';

let database: PgDatabase;
const closers: Array<() => void> = [];
const dirs: string[] = [];
beforeEach(async () => {
  database = await createPgDatabase();
});
afterEach(async () => {
  closers.splice(0).forEach((close) => close());
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
  await database.drop();
});

function open(url = database.url): Store {
  const home = mkdtempSync(join(tmpdir(), 'berth-pg-'));
  dirs.push(home);
  const s = openStore({ home, pg: { url } });
  closers.push(() => s.close());
  return s;
}

/** The test database's URL with another password, or another port. */
function withUrl(change: (u: URL) => void): string {
  const u = new URL(database.url);
  change(u);
  return u.href;
}

describe('postgres store', () => {
  it('migrates a new database once, in its own history, and keeps its store id across reopen', async () => {
    const first = open();
    expect(first.storeId).toMatch(/^[0-9a-f]{8}$/);
    expect(first.backend).toBe('postgres');
    first.close();
    expect(open().storeId).toBe(first.storeId);
    const versions = await queryPg<{ version: number }>(database.url, 'SELECT version FROM schema_migrations ORDER BY version');
    expect(versions.map((v) => v.version)).toEqual(PG_MIGRATIONS.map((_, i) => i + 1));
  });

  it('commits synchronously on a database whose default is synchronous_commit off (operating notes, issue #31)', async () => {
    await queryPg(database.url, `ALTER DATABASE ${database.name} SET synchronous_commit = off`);
    expect(await queryPg(database.url, `SELECT current_setting('synchronous_commit') AS v`)).toEqual([{ v: 'off' }]);
    const opened = openPgDatabase({ url: database.url });
    closers.push(() => opened.close());
    expect(opened.db.prepare(`SELECT current_setting('synchronous_commit') AS v`).get()).toEqual({ v: 'on' });
  });

  it("holds the live runs of a database put back from a backup older than what a daemon's home saw (issue #31, operating notes)", async () => {
    const home = mkdtempSync(join(tmpdir(), 'berth-pg-home-'));
    dirs.push(home);
    const daemonOpen = () => openStore({ home, lock: true, pg: { url: database.url } });
    const first = daemonOpen();
    first.transaction(() => first.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }));
    first.transaction(() => first.progress()); // a lease renewal
    // The backup: the database as it is now.
    const [backup] = await queryPg<{ value: string }>(database.url, `SELECT value FROM meta WHERE key = 'generation'`);
    // The daemon goes on: renewals, a new run, a run that ends.
    for (let i = 0; i < 3; i++) first.transaction(() => first.progress());
    first.transaction(() => first.runs.insert({ id: 'r2', name: 'b', specJson: '{}', createdAt: 2 }));
    first.close();
    const restarted = daemonOpen();
    expect(restarted.restore).toBeNull(); // a restart alone holds nothing
    restarted.close();
    // The backup is put back (its meta says how far it had got).
    await queryPg(database.url, `UPDATE meta SET value = $1 WHERE key = 'generation'`, [backup!.value]);
    const again = daemonOpen();
    expect(again.restore).toMatchObject({ dbGeneration: Number(backup!.value), heldRunIds: expect.arrayContaining(['r1', 'r2']) });
    expect(again.runs.get('r1')!.held_at).not.toBeNull();
    again.close();
    // Seen once: the next start holds nothing more.
    const third = daemonOpen();
    expect(third.restore).toBeNull();
    third.close();
  });

  it('refuses a database that a newer berth migrated further, changing nothing', async () => {
    open().close();
    await queryPg(database.url, 'INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)', [PG_MIGRATIONS.length + 1]);
    expect(() => open()).toThrow(StoreError);
    expect(() => open()).toThrow(/has schema version \d+, newer than this berth/);
    expect(await queryPg(database.url, 'SELECT count(*)::int AS n FROM schema_migrations')).toEqual([{ n: PG_MIGRATIONS.length + 1 }]);
  });

  it("bounds its sessions on the server: a dead client's connection and an idle transaction end within minutes", () => {
    const opened = openPgDatabase({ url: database.url });
    closers.push(() => opened.close());
    const show = (name: string) => Object.values(opened.db.prepare(`SHOW ${name}`).get() as Record<string, string>)[0];
    expect(show('tcp_keepalives_idle')).toBe('30');
    expect(show('tcp_keepalives_count')).toBe('3');
    expect(show('idle_in_transaction_session_timeout')).toBe('1min');
  });

  it("spaces two connections' calls through rate_slots: a slot is taken once its moment has come, and a hold pushes it for both", () => {
    const a = open();
    const b = open();
    expect(a.rateSlots.take('create', 1_000, 250)).toBeNull();
    expect(b.rateSlots.take('create', 1_100, 250)).toBe(1_250);
    expect(b.rateSlots.take('create', 1_300, 250)).toBeNull();
    a.rateSlots.hold('create', 20_000);
    a.rateSlots.hold('create', 5_000); // an earlier end never shortens a hold
    expect(a.rateSlots.take('create', 10_000, 250)).toBe(20_000);
    expect(b.rateSlots.take('create', 20_000, 250)).toBeNull();
    // A rate's interval need not be whole ms (list: 1000 / 0.9): rounded up, never refused.
    expect(a.rateSlots.take('list', 30_000.5, 1000 / 0.9)).toBeNull();
    expect(b.rateSlots.take('list', 30_001, 1000 / 0.9)).toBe(31_112);
    a.rateSlots.hold('list', 40_000.25);
    expect(b.rateSlots.take('list', 40_000, 1000 / 0.9)).toBe(40_001);
  });

  it('takes and renews a lease whose length has a fraction of a ms (cluster.lease_s 3.3333)', () => {
    const s = open();
    expect(s.leases.acquire('r1', 'daemon-a', 1_000, 3_333.3)).toMatchObject({ owner: 'daemon-a', expires_at: 4_334 });
    expect(s.leases.renew('daemon-a', 2_000, 3_333.3)).toEqual([expect.objectContaining({ run_id: 'r1', expires_at: 5_334 })]);
  });

  it('returns numbers for BIGINT and DOUBLE PRECISION columns and counts, as SQLite does', () => {
    const s = open();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1_700_000_000_123 });
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 9_000_000_001, machineId: 70, dphTotal: 0.4125, label: 'l', at: 5 });
    expect(s.runs.get('r1')).toMatchObject({ created_at: 1_700_000_000_123, relax_level: 0, ended_at: null });
    expect(s.attempts.get('r1', 1)).toMatchObject({ offer_id: 9_000_000_001, dph_total: 0.4125, usd_before: 0, n: 1 });
    expect(s.runsByState()).toEqual([{ state: 'queued', n: 1 }]);
    expect(s.events.latestId()).toBe(0);
  });

  it('keeps a transaction whole when its connection is lost: nothing of it is stored, and the next one goes through', async () => {
    const s = open();
    const opened = openPgDatabase({ url: database.url });
    closers.push(() => opened.close());
    const { db } = opened;
    const insert = db.prepare(`INSERT INTO webhook_events (event_id, received_at, notif_type) VALUES (?, 1, 't')`);
    // The server ends the connection between two statements of one transaction (a restart, as the
    // client sees it): the second statement must fail, not run alone on a new connection.
    expect(() =>
      db.transaction(() => {
        insert.run('a');
        try {
          db.prepare('SELECT pg_terminate_backend(pg_backend_pid())').get();
        } catch {
          // the connection is gone; the transaction goes on as a caller that ignores it would
        }
        // Time for the worker to see the connection end, so that a new one would be at hand.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
        insert.run('b');
      }),
    ).toThrow(StoreWriteError);
    expect(await queryPg(database.url, 'SELECT event_id FROM webhook_events')).toEqual([]);
    db.transaction(() => insert.run('c'));
    expect(await queryPg(database.url, 'SELECT event_id FROM webhook_events')).toEqual([{ event_id: 'c' }]);
    // The store's own connection, ended from outside, is made again at its next write.
    expect(await terminateConnections(database.name)).toBeGreaterThan(0);
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }));
    expect(s.runs.get('r1')).toBeDefined();
  });

  it("makes a take-over wait for a fenced intent in progress, then sees it: the old owner's intent is never lost", () => {
    const s = open();
    const home = mkdtempSync(join(tmpdir(), 'berth-pg-'));
    dirs.push(home);
    // Another daemon's store: its own connection, a short statement timeout to see it wait.
    const other = openStore({ home, pg: { url: database.url, timeouts: { statementMs: 300, connectMs: 2_000 } } });
    closers.push(() => other.close());
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 }));
    const lease = s.leases.acquire('r1', 'daemon-a', 0, 100)!;
    let during: unknown;
    s.fenced(lease, 50, () => {
      s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 1, label: 'berth:x:r1:1', at: 50 });
      // The lease has expired by the other daemon's clock, but the fenced transaction holds its row.
      try {
        other.leases.acquire('r1', 'daemon-b', 200, 100);
      } catch (err) {
        during = err;
      }
    });
    expect(during).toBeInstanceOf(StoreWriteError);
    expect((during as StoreWriteError).sqliteCode).toBe('57014');
    // Once it committed, the take-over goes through and finds the intent to reconcile.
    expect(other.leases.acquire('r1', 'daemon-b', 200, 100)).toMatchObject({ owner: 'daemon-b', epoch: 2 });
    expect(other.attempts.get('r1', 1)).toMatchObject({ create_state: 'intent', label: 'berth:x:r1:1' });
  });

  it('ends a statement that outlasts the statement timeout with a StoreWriteError, and goes on', () => {
    const opened = openPgDatabase({ url: database.url, timeouts: { statementMs: 200, connectMs: 2_000 } });
    closers.push(() => opened.close());
    let thrown: unknown;
    try {
      // Without the timeout it would answer, after 5 s: the 57014 below is the timeout's end of it.
      opened.db.prepare('SELECT pg_sleep(5)').get();
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(StoreWriteError);
    expect((thrown as StoreWriteError).sqliteCode).toBe('57014');
    expect((thrown as StoreWriteError).message).toBe(
      'The store cannot be written now (57014): the Postgres server may be down, restarting or out of reach; try again soon.',
    );
    expect(opened.db.prepare('SELECT 1 AS one').get()).toEqual({ one: 1 });
  });

  it('blocks its caller no longer than its bound: a call past it ends the worker, and the next call gets a new one', () => {
    // The bound also covers a new worker's start and connection (the second call), so it is not tiny.
    const bridge = new SyncBridge({ url: database.url, statementTimeoutMs: 60_000, connectTimeoutMs: 2_000, waitMs: 2_000 });
    closers.push(() => bridge.close());
    // The statement sleeps 30 s and its own timeout is 60 s: only the bridge's bound (2 s) ends the
    // call, and says so (how long it blocked is no test's to assert: it is the bound's own figure).
    expect(() => bridge.call({ kind: 'query', sql: 'SELECT pg_sleep(30)', params: [] })).toThrow(
      expect.objectContaining({ code: 'PG_BRIDGE_TIMEOUT', message: 'no answer from Postgres within 2000 ms' }),
    );
    expect(bridge.call({ kind: 'query', sql: 'SELECT 2 AS two', params: [] }).rows).toEqual([{ two: 2 }]);
  });
});

describe('postgres store: a bad store.url', () => {
  const silent: Socket[] = [];
  let server: Server | undefined;
  afterEach(async () => {
    silent.splice(0).forEach((s) => s.destroy());
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  it('names the server and database, never the password, for a wrong password', () => {
    const url = withUrl((u) => (u.password = 'Sekr3t-pw-never-shown'));
    let thrown: unknown;
    try {
      open(url);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(StoreError);
    const err = thrown as StoreError;
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(new RegExp(`127\\.0\\.0\\.1:\\d+/${database.name}`));
    expect(err.message).toMatch(/28P01.*check the user, password and database in store\.url/);
    expect(JSON.stringify({ message: err.message, cause: err.cause, stack: err.stack })).not.toContain('Sekr3t');
  });

  it('names the server and database, never the password, for a server that is not there', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const url = withUrl((u) => {
      u.password = 'Sekr3t-pw-never-shown';
      u.port = String(port);
    });
    expect(() => open(url)).toThrow(new RegExp(`Cannot open the postgres 127\\.0\\.0\\.1:${port}/${database.name} .*ECONNREFUSED`));
    try {
      open(url);
    } catch (err) {
      expect(JSON.stringify({ m: (err as Error).message, c: (err as Error).cause })).not.toContain('Sekr3t');
    }
  });

  it('fails at once for a while after the server could not be reached, instead of blocking every call for the connect timeout', async () => {
    server = createServer((socket) => silent.push(socket));
    const port = await new Promise<number>((resolve) =>
      server!.listen(0, '127.0.0.1', () => resolve((server!.address() as { port: number }).port)),
    );
    const bridge = new SyncBridge({
      url: withUrl((u) => (u.port = String(port))),
      statementTimeoutMs: 1_000,
      connectTimeoutMs: 400,
      waitMs: 5_000,
    });
    closers.push(() => bridge.close());
    // What the bridge did is read from the server, not from the wall clock: each connect it tries
    // is a socket the server accepts; the wait before the next try is in the error's words.
    const call = () => {
      try {
        bridge.call({ kind: 'query', sql: 'SELECT 1', params: [] });
        return { code: 'answered', message: '' };
      } catch (err) {
        return { code: (err as { code: string }).code, message: (err as Error).message };
      }
    };
    const waitOf = (message: string) => Number(/tried again in (\d+) ms/.exec(message)?.[1]);
    const accepted = async (n: number) => expect.poll(() => silent.length).toBe(n);
    expect(call()).toMatchObject({ code: 'PG_CONNECTION' });
    await accepted(1);
    // Right after: the same failure at once, no connect tried, the next try within the first wait (250 ms).
    const second = call();
    expect(second.code).toBe('PG_CONNECTION');
    expect(waitOf(second.message)).toBeLessThanOrEqual(250);
    expect(silent.length).toBe(1);
    // Past the first wait, one call tries again, and the wait after it is twice as long.
    await new Promise((r) => setTimeout(r, 300));
    expect(call().code).toBe('PG_CONNECTION');
    await accepted(2);
    const fourth = call();
    expect(waitOf(fourth.message)).toBeGreaterThan(250);
    expect(waitOf(fourth.message)).toBeLessThanOrEqual(500);
    expect(silent.length).toBe(2);
  });

  it('gives up on a server that accepts and never answers within the connect timeout', async () => {
    server = createServer((socket) => silent.push(socket));
    const port = await new Promise<number>((resolve) =>
      server!.listen(0, '127.0.0.1', () => resolve((server!.address() as { port: number }).port)),
    );
    const home = mkdtempSync(join(tmpdir(), 'berth-pg-'));
    dirs.push(home);
    // The server never answers: only the connect timeout ends the open (else the test's own timeout would).
    expect(() =>
      openStore({ home, pg: { url: withUrl((u) => (u.port = String(port))), timeouts: { statementMs: 500, connectMs: 500 } } }),
    ).toThrow(StoreError);
  });
});
