import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/store/index.js';
import { LeaseLostError, StoreError, StoreWriteError } from '../../../src/errors.js';
import { MIGRATIONS } from '../../../src/store/migrations.js';
import { costView } from '../../../src/store/spend.js';
import { billingNow, spentUsd } from '../../../src/daemon/instances/holdings.js';
import { createPgDatabase, type PgDatabase } from '../../helpers/pg-database.js';

const dirs: string[] = [];
const stores: Store[] = [];
function home(): string {
  const d = mkdtempSync(join(tmpdir(), 'berth-store-'));
  dirs.push(d);
  return d;
}
function track(s: Store): Store {
  stores.push(s);
  return s;
}
function open(dir: string, lock = false): Store {
  return track(openStore({ home: dir, lock }));
}
afterEach(() => {
  stores.splice(0).forEach((s) => s.close());
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

describe('store', () => {
  it('creates the schema, WAL and FULL sync, and keeps its store id across reopen', () => {
    const dir = home();
    const a = open(dir);
    const id = a.storeId;
    expect(id).toMatch(/^[0-9a-f]{8}$/);
    a.close();
    const db = new Database(join(dir, 'berth.db'));
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    db.close();
    expect(open(dir).storeId).toBe(id);
  });

  it('migrates a version 2 database: destroy_state dropped, cost columns filled from the event log', () => {
    const dir = home();
    const old = new Database(join(dir, 'berth.db'));
    old.exec(MIGRATIONS[0]!);
    old.exec(MIGRATIONS[1]!);
    old.pragma('user_version = 2');
    old.exec(`INSERT INTO meta (key, value) VALUES ('store_id', 'abcd0123')`);
    old.exec(`INSERT INTO runs (id, name, spec_json, state, created_at, updated_at) VALUES ('r1', 'a', '{}', 'running', 1, 1)`);
    const attempt = old.prepare(
      `INSERT INTO attempts (run_id, n, offer_id, machine_id, dph_total, label, create_state, instance_id, outcome, destroy_state, started_at, ended_at)
       VALUES ('r1', ?, 7, 70, 0.5, ?, ?, ?, ?, ?, ?, ?)`,
    );
    attempt.run(1, 'berth:abcd0123:r1:1', 'created', 501, 'exited', 'confirmed', 100, 190);
    attempt.run(2, 'berth:abcd0123:r1:2', 'offer_gone', null, 'offer_unavailable', 'none', 200, 201);
    attempt.run(3, 'berth:abcd0123:r1:3', 'created', 503, 'running', 'none', 300, null);
    const event = old.prepare(`INSERT INTO events (run_id, at, type, message, data_json) VALUES ('r1', ?, ?, 'x', ?)`);
    event.run(150, 'attempt.running', JSON.stringify({ n: 1 }));
    event.run(185, 'destroy.confirmed', JSON.stringify({ n: 1, instanceId: 501 }));
    event.run(350, 'attempt.running', JSON.stringify({ n: 3 }));
    old.close();

    const s = open(dir);
    expect(s.storeId).toBe('abcd0123');
    const rows = s.attempts.forRun('r1');
    expect(rows.map((r) => 'destroy_state' in r)).toEqual([false, false, false]);
    expect(
      rows.map(({ instance_created_at, first_running_at, destroy_confirmed_at }) => [
        instance_created_at,
        first_running_at,
        destroy_confirmed_at,
      ]),
    ).toEqual([
      [100, 150, 185],
      [null, null, null],
      [300, 350, null],
    ]);
  });

  it('migrates a version 8 database: the attempts journaled before have no GPU', () => {
    const dir = home();
    const old = new Database(join(dir, 'berth.db'));
    MIGRATIONS.slice(0, 8).forEach((m) => old.exec(m));
    old.pragma('user_version = 8');
    old.exec(`INSERT INTO meta (key, value) VALUES ('store_id', 'abcd0123')`);
    old.exec(`INSERT INTO runs (id, name, spec_json, state, created_at, updated_at) VALUES ('r1', 'a', '{}', 'running', 1, 1)`);
    old.exec(
      `INSERT INTO attempts (run_id, n, offer_id, machine_id, dph_total, label, create_state, started_at)
       VALUES ('r1', 1, 7, 70, 0.5, 'berth:abcd0123:r1:1', 'intent', 100)`,
    );
    old.close();

    const s = open(dir);
    expect(s.attempts.get('r1', 1)).toMatchObject({ offer_id: 7, gpu_name: null, num_gpus: null });
  });

  it('refuses a second daemon on the same store while the first holds the lock, whatever the lock file holds', () => {
    const dir = home();
    const first = open(dir, true);
    expect(() => open(dir, true)).toThrow(StoreError);
    expect(() => open(dir, true)).toThrow(/Another berth daemon.* is already using this store/);
    first.close();
    // Released on close (and by the kernel when the holder dies): the next daemon gets it.
    expect(open(dir, true).storeId).toBe(first.storeId);
  });

  it('is not blocked by a pid file an older berth left, even when that pid is alive', async () => {
    const dir = home();
    const holder = spawn('sleep', ['30']);
    try {
      writeFileSync(join(dir, 'daemon.lock'), String(holder.pid));
      expect(open(dir, true).storeId).toMatch(/^[0-9a-f]{8}$/);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((r) => holder.once('exit', r));
    }
  });

  it('turns a write the store refuses into a StoreWriteError, without waiting 5 s, and writes again once it can', async () => {
    const dir = home();
    const s = open(dir);
    // Another process holds the write lock, and lets go of it 3 s after it is told to: a store that
    // waited for a busy lock as long as 5 s would then write; this one refuses at once. Told by the
    // outcome, not by a clock.
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `const Database = require(require.resolve('better-sqlite3', { paths: [process.cwd()] }));
         const db = new Database(process.argv[1]);
         db.exec('BEGIN IMMEDIATE');
         console.log('held');
         process.stdin.once('data', () => {
           console.log('going');
           setTimeout(() => { db.exec('COMMIT'); db.close(); console.log('released'); process.exit(0); }, 3000);
         });`,
        join(dir, 'berth.db'),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    let out = '';
    holder.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const said = (word: string) => expect.poll(() => out.includes(word), { timeout: 20_000 }).toBe(true);
    try {
      await said('held');
      holder.stdin!.write('go\n');
      await said('going');
      expect(() => s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }))).toThrow(StoreWriteError);
      expect(s.canWrite()).toBe(false);
      expect(s.runs.get('r1')).toBeUndefined();
      await said('released');
    } finally {
      holder.kill('SIGKILL');
    }
    expect(s.canWrite()).toBe(true);
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }));
    expect(s.runs.get('r1')).toBeDefined();
  });

  it('creates BERTH_HOME 0700 and the database 0600, and repairs a home and files that others could read', () => {
    const parent = home();
    const dir = join(parent, 'new-home');
    const s = open(dir, true);
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{"env":{"A":"secret"}}', createdAt: 1 }));
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of ['berth.db', 'berth.db-wal', 'berth.db-shm', 'daemon.lock', 'store.json']) {
      expect(statSync(join(dir, f)).mode & 0o777, f).toBe(0o600);
    }
    s.close();
    chmodSync(dir, 0o755);
    chmodSync(join(dir, 'berth.db'), 0o644);
    open(dir, true).close();
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'berth.db')).mode & 0o777).toBe(0o600);
  });

  it('keeps the database where store.url names a path, and the lock and store.json in BERTH_HOME', () => {
    const dir = home();
    const file = join(home(), 'elsewhere.db');
    const s = track(openStore({ home: dir, lock: true, file }));
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }));
    expect(statSync(file).size).toBeGreaterThan(0);
    expect(readdirSync(dir)).toEqual(expect.arrayContaining(['daemon.lock', 'store.json']));
    expect(readdirSync(dir).filter((f) => f.startsWith('berth.db'))).toEqual([]);
  });

  it('takes one daemon per SQLite file: a second home whose store.url names the same file is refused, by any path to it (issue #31 item 3)', () => {
    const a = home();
    track(openStore({ home: a, lock: true }));
    const shared = join(a, 'berth.db');
    expect(() => track(openStore({ home: home(), lock: true, file: shared }))).toThrow(
      /Another berth daemon, from another BERTH_HOME, is already using the store .*berth\.db \(store\.url names the same SQLite file\)/,
    );
    const link = join(home(), 'link.db');
    symlinkSync(shared, link);
    expect(() => track(openStore({ home: home(), lock: true, file: link }))).toThrow(/already using the store/);
    // Two homes on a file elsewhere: the first holds it, the second is refused; once it stops, the file is free.
    const elsewhere = join(home(), 'elsewhere.db');
    const first = track(openStore({ home: home(), lock: true, file: elsewhere }));
    const second = home();
    expect(() => track(openStore({ home: second, lock: true, file: elsewhere }))).toThrow(/already using the store/);
    first.close();
    track(openStore({ home: second, lock: true, file: elsewhere }));
  });

  it('refuses a BERTH_HOME that other users can write, and changes nothing in it', () => {
    const dir = home();
    chmodSync(dir, 0o777);
    expect(() => open(dir, true)).toThrow(/can be written by other users \(mode 0777\).*chmod 700/);
    expect(readdirSync(dir)).toEqual([]);
  });
});

// The same behaviour from both backends: every repository, on SQLite and on a real Postgres
// (test/helpers/pg-server.ts), one empty database per test.
describe.each(['sqlite', 'postgres'] as const)('store on %s', (backend) => {
  const H = 3_600_000;
  let pgDatabase: PgDatabase | undefined;
  let fresh: () => Store;
  beforeEach(async () => {
    if (backend === 'postgres') {
      const { url } = (pgDatabase = await createPgDatabase());
      fresh = () => track(openStore({ home: home(), pg: { url } }));
    } else {
      fresh = () => open(home());
    }
  });
  afterEach(async () => {
    stores.splice(0).forEach((s) => s.close());
    await pgDatabase?.drop();
    pgDatabase = undefined;
  });

  it('keeps a blob whole, in parts, under its hash; a second put changes nothing; the purge keeps it while a run names it (issue #40)', () => {
    const s = fresh();
    // Larger than one part (4 MiB), bytes of every value.
    const data = Buffer.alloc(9 * 1024 * 1024 + 7);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31 + (i >> 13)) & 0xff;
    const sha = 'ab'.repeat(32);
    s.transaction(() => s.blobs.put(sha, data, 1_000));
    s.transaction(() => s.blobs.put(sha, Buffer.from('other'), 2_000));
    expect(s.blobs.size(sha)).toBe(data.length);
    expect(s.blobs.get(sha)!.equals(data)).toBe(true);
    expect(s.blobs.get('cd'.repeat(32))).toBeNull();
    expect(s.blobs.size('cd'.repeat(32))).toBeNull();
    s.transaction(() => s.blobs.put('ef'.repeat(32), Buffer.alloc(0), 1_000));
    expect(s.blobs.get('ef'.repeat(32))).toEqual(Buffer.alloc(0));
    s.runs.insert({ id: 'r1', name: 'a', specJson: JSON.stringify({ workdir_sha256: sha }), createdAt: 1 });
    // A day later: the blob a run names stays, the other goes.
    s.purge(0, 1_000 + 25 * H);
    expect(s.blobs.size(sha)).toBe(data.length);
    expect(s.blobs.size('ef'.repeat(32))).toBeNull();
  });

  it('gives a new run a name no live run has: the name, else the next suffix; the counter starts again once the name is free (issue #50)', () => {
    const s = fresh();
    const submit = (id: string, name: string) =>
      s.transaction(() => {
        const taken = s.runs.claimName(name);
        s.runs.insert({ id, name: taken, specJson: '{}', createdAt: 1 });
        return taken;
      });
    expect(submit('r1', 'train')).toBe('train');
    expect(submit('r2', 'train')).toBe('train-2');
    // A run named train-3 as written is stepped over.
    expect(submit('r3', 'train-3')).toBe('train-3');
    expect(submit('r4', 'train')).toBe('train-4');
    // An ended run's name is free again, and a free name starts its counter again.
    s.runs.setState('r2', 'cancelled', null, 2);
    expect(submit('r5', 'train')).toBe('train-5');
    s.runs.setState('r1', 'cancelled', null, 3);
    expect(submit('r6', 'train')).toBe('train');
    expect(submit('r7', 'train')).toBe('train-2');
    expect(submit('r8', 'eval')).toBe('eval');
    expect(s.runs.live().map((r) => r.name)).toEqual(['train-3', 'train-4', 'train-5', 'train', 'train-2', 'eval']);
  });

  it('returns the earlier run for a reused idempotency key', () => {
    const s = fresh();
    const first = s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1, idempotencyKey: 'k' });
    const again = s.runs.insert({ id: 'r2', name: 'a', specJson: '{}', createdAt: 2, idempotencyKey: 'k' });
    expect(first.created).toBe(true);
    expect(again).toMatchObject({ created: false, row: { id: 'r1' } });
    expect(s.runs.list()).toHaveLength(1);
  });

  it("lists runs by state and by a part of the name (the dashboard's filters), newest first, a page at a time, and counts them", () => {
    const s = fresh();
    const runs = [
      ['r1', 'Train-A', 'failed'],
      ['r2', 'train-b', 'running'],
      ['r3', 'eval_1', 'failed'],
      ['r4', 'evalx1', 'cancelled'],
      ['r5', '100%-done', 'failed'],
    ] as const;
    s.transaction(() =>
      runs.forEach(([id, name, state], i) => {
        s.runs.insert({ id, name, specJson: '{}', createdAt: 10 + i });
        if (state !== 'running') s.runs.setState(id, state, null, 20 + i);
      }),
    );
    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);
    expect(ids(s.runs.listFiltered({}, 10))).toEqual(['r5', 'r4', 'r3', 'r2', 'r1']);
    expect(ids(s.runs.listFiltered({ name: 'TRAIN' }, 10))).toEqual(['r2', 'r1']);
    expect(ids(s.runs.listFiltered({ states: ['failed'] }, 10))).toEqual(['r5', 'r3', 'r1']);
    expect(ids(s.runs.listFiltered({ states: ['failed', 'cancelled'], name: 'eval' }, 10))).toEqual(['r4', 'r3']);
    // LIKE's wildcards in the name are only themselves.
    expect(ids(s.runs.listFiltered({ name: 'eval_' }, 10))).toEqual(['r3']);
    expect(ids(s.runs.listFiltered({ name: '%' }, 10))).toEqual(['r5']);
    // Pages: after the last run of the previous page.
    const first = s.runs.listFiltered({ states: ['failed'] }, 2);
    expect(ids(first)).toEqual(['r5', 'r3']);
    expect(ids(s.runs.listFiltered({ states: ['failed'] }, 2, first.at(-1)))).toEqual(['r1']);
    expect(s.runs.count()).toBe(5);
    expect(s.runs.count({ states: ['failed'] })).toBe(3);
    expect(s.runs.count({ states: ['failed'], name: 'train' })).toBe(1);
  });

  it('journals a create intent once and reports what an earlier process recorded', () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    const start = { runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 0.4, label: 'berth:x:r1:1', at: 5 };
    expect(s.attempts.beginCreate(start)).toMatchObject({ fresh: true, row: { create_state: 'intent', machine_id: 70, dph_total: 0.4 } });
    expect(s.attempts.adopt('r1', 1, 555, 6)).toBe(true);
    expect(s.attempts.beginCreate(start)).toMatchObject({
      fresh: false,
      row: { create_state: 'created', instance_id: 555, instance_created_at: 6 },
    });
    // Adopting the same instance again (the create's answer and a sweep both found it) changes nothing;
    // a second instance for the attempt is refused (it is an orphan).
    expect(s.attempts.adopt('r1', 1, 555, 9)).toBe(true);
    expect(s.attempts.adopt('r1', 1, 556, 9)).toBe(false);
    expect(s.attempts.get('r1', 1)).toMatchObject({ create_state: 'created', instance_id: 555, instance_created_at: 6 });
  });

  it("keeps the GPU the attempt's offer rents with its intent, null when unknown, in SQLite's column order", () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    const start = { runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 0.4, at: 5 };
    s.attempts.beginCreate({ ...start, label: 'berth:x:r1:1', gpu: { name: 'RTX 4090', count: 2 } });
    s.attempts.beginCreate({ ...start, n: 2, label: 'berth:x:r1:2', gpu: null });
    s.attempts.beginCreate({ ...start, n: 3, label: 'berth:x:r1:3' });
    expect(s.attempts.forRun('r1').map((a) => [a.gpu_name, a.num_gpus])).toEqual([
      ['RTX 4090', 2],
      [null, null],
      [null, null],
    ]);
    // `berth store migrate` copies rows column by column and the repositories read `SELECT *`: the
    // new columns come last on both backends.
    expect(Object.keys(s.attempts.get('r1', 1)!).slice(-9)).toEqual([
      'log_tail',
      'gpu_name',
      'num_gpus',
      'follow_offset',
      'ssh_host_key',
      'handed_at',
      'warm_hold_id',
      'recycle_state',
      'recycle_sha',
    ]);
  });

  it("keeps a followed task's offset with the tail kept so far, in one write", () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    const start = { runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 0.4, at: 5 };
    s.attempts.beginCreate({ ...start, label: 'berth:x:r1:1' });
    expect(s.attempts.get('r1', 1)!.follow_offset).toBeNull();
    s.attempts.setFollowed('r1', 1, 12, 'one\ntwo');
    expect(s.attempts.get('r1', 1)).toMatchObject({ follow_offset: 12, log_tail: 'one\ntwo' });
    // The host key pinned at the first login stands.
    s.attempts.pinHostKey('r1', 1, 'SHA256:first');
    s.attempts.pinHostKey('r1', 1, 'SHA256:second');
    expect(s.attempts.get('r1', 1)!.ssh_host_key).toBe('SHA256:first');
  });

  it('records what an instance costs: billed price as listed, first running, destroy confirmed', () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 0.4, label: 'berth:x:r1:1', at: 5 });
    s.attempts.adopt('r1', 1, 555, 6);
    s.attempts.setStatus('r1', 1, { actual_status: 'loading', dph_total: 0.41 }, 10);
    expect(s.attempts.get('r1', 1)).toMatchObject({ dph_total: 0.41, first_running_at: null });
    s.attempts.setStatus('r1', 1, { actual_status: 'running' }, 20);
    s.attempts.setStatus('r1', 1, { actual_status: 'running' }, 30);
    expect(s.attempts.get('r1', 1)).toMatchObject({ dph_total: 0.41, first_running_at: 20, destroy_confirmed_at: null });
    s.attempts.destroyConfirmed('r1', 1, 999, 40); // not this attempt's instance
    expect(s.attempts.get('r1', 1)!.destroy_confirmed_at).toBeNull();
    s.attempts.destroyConfirmed('r1', 1, 555, 50);
    expect(s.attempts.get('r1', 1)!.destroy_confirmed_at).toBe(50);
  });

  it('pages runs newest first after a given run, and reads the attempts of many runs in one query', () => {
    const s = fresh();
    // Two runs share a millisecond: ordered by id among themselves.
    for (const [id, at] of [
      ['a', 1],
      ['c', 2],
      ['b', 2],
      ['d', 3],
    ] as const)
      s.runs.insert({ id, name: id, specJson: '{}', createdAt: at });
    expect(s.runs.list().map((r) => r.id)).toEqual(['d', 'b', 'c', 'a']);
    const pages: string[][] = [];
    for (let after: string | undefined; ;) {
      const page = s.runs.list(2, after ? s.runs.get(after) : undefined);
      if (page.length === 0) break;
      pages.push(page.map((r) => r.id));
      after = page.at(-1)!.id;
    }
    expect(pages).toEqual([
      ['d', 'b'],
      ['c', 'a'],
    ]);
    for (const [runId, n] of [
      ['a', 1],
      ['a', 2],
      ['c', 1],
    ] as const) {
      s.attempts.beginCreate({ runId, n, offerId: n, machineId: 1, dphTotal: 1, label: `berth:x:${runId}:${n}`, at: 1 });
    }
    expect(s.attempts.forRuns(['a', 'b', 'c']).map((a) => `${a.run_id}${a.n}`)).toEqual(['a1', 'a2', 'c1']);
    expect(s.attempts.forRuns([])).toEqual([]);
  });

  it('lists and counts runs by state and by a part of their name (any case, % and _ taken literally), paged newest first', () => {
    const s = fresh();
    for (const [id, name, at] of [
      ['a', 'Train-LLM', 1],
      ['b', 'eval 50%_done', 2],
      ['c', 'train-vision', 3],
      ['d', 'other', 4],
    ] as const)
      s.runs.insert({ id, name, specJson: '{}', createdAt: at });
    s.transaction(() =>
      s.runs.saveProgress('c', { state: 'running', relaxLevel: 0, attempt: 1, error: null, snapshotJson: '{}', machineVersion: 1, at: 5 }),
    );
    const ids = (rows: Array<{ id: string }>) => rows.map((r) => r.id);
    expect(ids(s.runs.listFiltered({}, 10))).toEqual(['d', 'c', 'b', 'a']);
    expect(ids(s.runs.listFiltered({ name: 'TRAIN' }, 10))).toEqual(['c', 'a']);
    expect(ids(s.runs.listFiltered({ states: ['running'] }, 10))).toEqual(['c']);
    expect(ids(s.runs.listFiltered({ states: ['queued', 'running'], name: 'train' }, 10))).toEqual(['c', 'a']);
    expect(ids(s.runs.listFiltered({ name: '%' }, 10))).toEqual(['b']);
    expect(ids(s.runs.listFiltered({ name: '0%_' }, 10))).toEqual(['b']);
    expect(ids(s.runs.listFiltered({ name: 'a_n' }, 10))).toEqual([]);
    expect(ids(s.runs.listFiltered({}, 2, s.runs.get('c')))).toEqual(['b', 'a']);
    expect(s.runs.count({})).toBe(4);
    expect(s.runs.count({ name: 'train' })).toBe(2);
    expect(s.runs.count({ states: ['failed'] })).toBe(0);
  });

  it('marks live and ended runs from saved progress', () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    s.runs.insert({ id: 'r2', name: 'b', specJson: '{}', createdAt: 2 });
    const p = { relaxLevel: 0, attempt: 0, error: null, snapshotJson: '{}', machineVersion: 1, at: 9 };
    s.runs.saveProgress('r1', { ...p, state: 'failed', error: { kind: 'deadline', message: 'late' } });
    s.runs.saveProgress('r2', { ...p, state: 'booting' });
    expect(s.runs.live().map((r) => r.id)).toEqual(['r2']);
    expect(s.runs.get('r1')).toMatchObject({ state: 'failed', ended_at: 9, error_json: '{"kind":"deadline","message":"late"}' });
  });

  it('appends events oldest first and pages after an id', () => {
    const s = fresh();
    const a = s.events.append({ runId: 'r1', at: 1, type: 'x', message: 'one' });
    s.events.append({ runId: 'r1', at: 2, type: 'y', message: 'two', data: { n: 1 } });
    expect(s.events.list('r1').map((e) => e.message)).toEqual(['one', 'two']);
    expect(s.events.list('r1', a).map((e) => e.data_json)).toEqual(['{"n":1}']);
  });

  it('folds a repeat of one of the last two events into one row with a count, and keeps others apart', () => {
    const s = fresh();
    for (let i = 0; i < 50; i++) {
      s.events.append({ runId: 'r1', at: 10 + 2 * i, type: 'search.started', message: 'searching', foldKey: 'search.started:0' });
      s.events.append({ runId: 'r1', at: 11 + 2 * i, type: 'search.retry', message: `failed ${i}`, foldKey: 'search.retry:network' });
    }
    s.events.append({ runId: 'r1', at: 200, type: 'search.retry', message: 'other', foldKey: 'search.retry:server_error' });
    const rows = s.events.list('r1');
    expect(rows.map((e) => [e.type, e.count, e.first_at, e.at])).toEqual([
      ['search.started', 50, 10, 108],
      ['search.retry', 50, 11, 109],
      ['search.retry', 1, null, 200],
    ]);
    expect(rows[1]!.message).toBe('failed 49');
  });

  it('deletes ended runs and events older than the retention, and keeps live runs', () => {
    const s = fresh();
    s.runs.insert({ id: 'old', name: 'a', specJson: '{}', createdAt: 1, idempotencyKey: 'k' });
    s.runs.insert({ id: 'live', name: 'b', specJson: '{}', createdAt: 1 });
    s.runs.setState('old', 'cancelled', null, 5);
    s.events.append({ runId: 'old', at: 5, type: 'x', message: 'x' });
    s.events.append({ runId: 'live', at: 5, type: 'x', message: 'old event' });
    s.events.append({ runId: 'live', at: 50, type: 'x', message: 'new event' });
    expect(s.purge(10, 100)).toEqual({ runs: 1, events: 1, notifications: 0 });
    expect(s.runs.get('old')).toBeUndefined();
    expect(s.runs.get('live')).toBeDefined();
    expect(s.events.list('live').map((e) => e.message)).toEqual(['new event']);
    // The key went with its run.
    expect(s.runs.insert({ id: 'again', name: 'a', specJson: '{}', createdAt: 60, idempotencyKey: 'k' }).created).toBe(true);
  });

  it('keeps what an instance accrued at each price: a bid raised and a list showing another price move it into usd_before', () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 });
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 1, label: 'berth:x:r1:1', at: 0 });
    s.attempts.adopt('r1', 1, 501, 0);
    // The list shows the quoted price: nothing changes.
    s.attempts.setStatus('r1', 1, { actual_status: 'loading', dph_total: 1 }, H);
    expect(s.attempts.get('r1', 1)).toMatchObject({ usd_before: 0, dph_since: null, dph_total: 1 });
    // A bid raised to $3/h at 2 h: 2 h at $1 kept.
    s.attempts.setPrice('r1', 1, 3, 2 * H);
    expect(s.attempts.get('r1', 1)).toMatchObject({ usd_before: 2, dph_since: 2 * H, dph_total: 3 });
    // The list then shows $2/h at 3 h: 1 h at $3 added.
    s.attempts.setStatus('r1', 1, { actual_status: 'running', dph_total: 2 }, 3 * H);
    expect(s.attempts.get('r1', 1)).toMatchObject({ usd_before: 5, dph_since: 3 * H, dph_total: 2, first_running_at: 3 * H });
  });

  it("counts a stopped instance at its disk's price (storage_total_cost) from the list that shows it stopped, and at dph_total once it runs again (issue #37)", () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 });
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 2, label: 'berth:x:r1:1', at: 0 });
    s.attempts.adopt('r1', 1, 501, 0);
    s.attempts.setStatus('r1', 1, { actual_status: 'running', dph_total: 2, storage_total_cost: 0.01 }, 0);
    // The task stopped its instance at 1 h; its log is read for 2 h (disk only).
    s.attempts.setStatus('r1', 1, { actual_status: 'stopped', dph_total: 2, storage_total_cost: 0.01 }, H);
    expect(s.attempts.get('r1', 1)).toMatchObject({ usd_before: 2, dph_total: 0.01 });
    const spent = (at: number) => costView(s.attempts.forRun('r1'), null, at).usd;
    expect(spent(3 * H)).toBeCloseTo(2.02, 6);
    // Started again: the full price from then on.
    s.attempts.setStatus('r1', 1, { actual_status: 'running', dph_total: 2, storage_total_cost: 0.01 }, 3 * H);
    expect(spent(4 * H)).toBeCloseTo(4.02, 6);
    // A record that does not state its disk's price: the stop is counted at dph_total (never below).
    s.attempts.setStatus('r1', 1, { actual_status: 'stopped', dph_total: 2 }, 4 * H);
    expect(s.attempts.get('r1', 1)).toMatchObject({ dph_total: 2 });
  });

  it('lists the attempts that may bill (creates in flight included) and those confirmed destroyed since a time', () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 });
    const begin = (n: number, at: number) =>
      s.attempts.beginCreate({ runId: 'r1', n, offerId: n, machineId: n, dphTotal: 1, label: `berth:x:r1:${n}`, at });
    begin(1, 0);
    s.attempts.adopt('r1', 1, 501, 0);
    s.attempts.destroyConfirmed('r1', 1, 501, 10);
    begin(2, 20);
    s.attempts.notCreated('r1', 2, 'offer_gone', 'gone');
    begin(3, 30);
    s.attempts.adopt('r1', 3, 503, 30);
    begin(4, 40); // in flight
    expect(
      s.attempts
        .billingSince(5)
        .map((a) => a.n)
        .sort(),
    ).toEqual([1, 3, 4]);
    expect(
      s.attempts
        .billingSince(10)
        .map((a) => a.n)
        .sort(),
    ).toEqual([3, 4]);
    expect(s.attempts.billingSince(0)[0]).toHaveProperty('run_ended_at', null);
  });

  it('keeps notifications in the outbox: due by target and time, claimed once, settled, listed newest first, counted and purged', () => {
    const s = fresh();
    const add = (id: string, url: string, at: number) =>
      s.transaction(() => s.outbox.add({ id, type: 'run.running', runId: 'r1', logId: 1, target: 0, targetUrl: url, body: '{}', at }));
    add('n1', 'http://a', 10);
    add('n2', 'http://a', 20);
    add('n3', 'http://b', 30);
    expect(s.outbox.due('http://a', 15, 10).map((r) => r.id)).toEqual(['n1']);
    expect(s.outbox.nextDueAt(['http://b'])).toBe(30);
    expect(s.outbox.nextDueAt(['http://c'])).toBeNull();
    const [first, second] = s.outbox.due('http://a', 100, 10);
    expect(s.outbox.claim([first!.seq, second!.seq], 500)).toEqual([first!.seq, second!.seq]);
    expect(s.outbox.due('http://a', 100, 10)).toEqual([]);
    s.outbox.settle([
      { seq: first!.seq, kind: 'delivered', at: 110 },
      { seq: second!.seq, kind: 'failed', nextAt: 600, error: 'HTTP 500' },
    ]);
    expect(s.outbox.orphaned(['http://a'], 120)).toBe(1); // http://b left the config
    expect(s.outbox.counts()).toEqual({ pending: 1, delivered: 1, dead: 1 });
    expect(s.outbox.list(10).map((r) => [r.id, r.state, r.attempts])).toEqual([
      ['n3', 'dead', 0],
      ['n2', 'pending', 1],
      ['n1', 'delivered', 1],
    ]);
    expect(s.outbox.list(10, second!.seq).map((r) => r.id)).toEqual(['n1']);
    expect(s.outbox.list(10, undefined, 'pending')).toMatchObject([{ id: 'n2', next_at: 600, last_error: 'HTTP 500' }]);
    expect(s.outbox.purgeFinished(200)).toBe(2);
  });

  it('keeps instance keys, a secret key, holds and cancels, and sums what the attempts cost', () => {
    const s = fresh();
    s.instanceKeys.put(501, 'k1');
    s.instanceKeys.put(501, 'k2');
    expect(s.instanceKeys.get(501)).toBe('k2');
    s.instanceKeys.forget(501);
    expect(s.instanceKeys.get(501)).toBeUndefined();
    const key = s.secretKey('ready');
    expect(key).toHaveLength(32);
    expect(s.secretKey('ready').equals(key)).toBe(true);
    expect(s.canWrite()).toBe(true);

    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 }));
    s.runs.requestCancel('r1', 5);
    s.runs.requestCancel('r1', 9);
    expect(s.runs.get('r1')).toMatchObject({ cancel_requested_at: 5, held_at: null });
    expect(s.runs.heldCount()).toBe(0);
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 2, label: 'berth:x:r1:1', at: 0 });
    s.attempts.adopt('r1', 1, 501, 0);
    // What bills now, as the daemon's one place that sums it reads this store (either kind).
    expect(billingNow(s, H / 2)).toMatchObject({ n: 1, usdPerHour: 2, each: [{ runId: 'r1', n: 1, instanceId: 501, usdPerHour: 2 }] });
    expect(s.spendUsd(H / 2)).toBeCloseTo(1, 9);
    expect(s.runsByState()).toEqual([{ state: 'queued', n: 1 }]);
    s.runs.setState('r1', 'cancelled', null, H);
    s.attempts.destroyConfirmed('r1', 1, 501, H);
    expect(billingNow(s, H)).toEqual({ n: 0, usdPerHour: 0, each: [] });
    // Retention keeps what the deleted run spent.
    expect(s.purge(2 * H, 3 * H).runs).toBe(1);
    expect(s.spendUsd(3 * H)).toBeCloseTo(2, 9);
  });

  it('keeps warm holds (issue #51): a hand-over, a take by one run only, spend over every hold ever', () => {
    const s = fresh();
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 }));
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 2, label: 'berth:x:r1:1', at: 0 });
    s.attempts.adopt('r1', 1, 501, 0);
    const hand = {
      instanceId: 501,
      runId: 'r1',
      n: 1,
      reuseKey: 'k',
      relaxLevel: 0,
      offerId: 7,
      machineId: 70,
      gpu: { name: 'A', count: 1 },
      dphTotal: 2,
      diskDph: 0.1,
      at: H,
      idleUntil: 2 * H,
    };
    const h = s.warm.hand(hand)!;
    expect(s.warm.hand(hand)!.id).toBe(h.id);
    expect(s.attempts.get('r1', 1)).toMatchObject({ handed_at: H, destroy_confirmed_at: H });
    expect(s.warm.liveFor(501)).toMatchObject({ id: h.id, state: 'warm', gpu_name: 'A', num_gpus: 1 });
    expect(s.warm.take(h.id, 'r2', 1, 2 * H)).toBe(true);
    expect(s.warm.take(h.id, 'r3', 1, 2 * H)).toBe(false);
    expect(s.warm.release(h.id, 'x', 2 * H)).toBe(false);
    expect(s.warm.billingSince(-Infinity).map((x) => x.id)).toEqual([h.id]);
    expect(s.warm.billingSince(3 * H)).toEqual([]);
    expect(s.attempts.billingSince(-Infinity).map((a) => a.run_id)).toEqual(['r1']);
    // Every hold ever, on either backend: spent what the donor and the hold billed.
    expect(spentUsd(s, 3 * H)).toBeCloseTo(2 + 2, 9);
    s.attempts.setRecycle('r1', 1, { holdId: h.id, state: 'intent', sha: 'abc' });
    expect(s.attempts.get('r1', 1)).toMatchObject({ warm_hold_id: h.id, recycle_state: 'intent', recycle_sha: 'abc' });
    s.attempts.setRecycle('r1', 1, { state: 'sent' });
    expect(s.attempts.get('r1', 1)).toMatchObject({ warm_hold_id: h.id, recycle_state: 'sent', recycle_sha: 'abc' });
  });

  it('stores text with a NUL character from outside (a container log, a status message): as is on SQLite, as U+FFFD on Postgres', () => {
    const s = fresh();
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    s.attempts.beginCreate({ runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 1, label: 'berth:x:r1:1', at: 1 });
    s.transaction(() => s.attempts.setLogTail('r1', 1, 'before\u0000after'));
    expect(s.attempts.get('r1', 1)!.log_tail).toBe(backend === 'sqlite' ? 'before\u0000after' : 'before\ufffdafter');
  });

  it('leases a run to one daemon at a time: renewed while held, taken over with a new epoch once expired, released', () => {
    const s = fresh();
    const ttl = 15_000;
    const a = s.leases.acquire('r1', 'daemon-a', 1_000, ttl)!;
    expect(a).toEqual({ run_id: 'r1', owner: 'daemon-a', epoch: 1, expires_at: 16_000 });
    // Held: another daemon cannot take it; its owner extends it, same epoch.
    expect(s.leases.acquire('r1', 'daemon-b', 10_000, ttl)).toBeUndefined();
    expect(s.leases.acquire('r1', 'daemon-a', 10_000, ttl)).toEqual({ ...a, expires_at: 25_000 });
    expect(s.leases.renew('daemon-a', 20_000, ttl)).toEqual([{ ...a, expires_at: 35_000 }]);
    expect(s.leases.holds(a, 34_999)).toBe(true);
    // Not renewed in time: expired, and any daemon may take it, with the next epoch.
    expect(s.leases.holds(a, 35_000)).toBe(false);
    expect(s.leases.expired(35_000)).toEqual(['r1']);
    const b = s.leases.acquire('r1', 'daemon-b', 36_000, ttl)!;
    expect(b).toEqual({ run_id: 'r1', owner: 'daemon-b', epoch: 2, expires_at: 51_000 });
    // The old owner's lease is gone for good: no renewal, no fence, even before b's expiry.
    expect(s.leases.renew('daemon-a', 37_000, ttl)).toEqual([]);
    expect(s.leases.holds(a, 37_000)).toBe(false);
    expect(s.leases.holds(b, 37_000)).toBe(true);
    // Releasing is the owner's alone.
    s.leases.release('r1', 'daemon-a');
    expect(s.leases.get('r1')).toEqual(b);
    s.leases.release('r1', 'daemon-b');
    expect(s.leases.get('r1')).toBeUndefined();
  });

  it("writes a side effect's intent only while the run's lease holds: a daemon that lost it writes nothing", () => {
    const s = fresh();
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 0 }));
    const intent = { runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 1, label: 'berth:x:r1:1', at: 5 };
    const a = s.leases.acquire('r1', 'daemon-a', 0, 100)!;
    expect(s.fenced(a, 50, () => s.attempts.beginCreate(intent).fresh)).toBe(true);
    // Daemon a paused past its expiry; daemon b took the run over.
    s.leases.acquire('r1', 'daemon-b', 200, 100);
    expect(() => s.fenced(a, 210, () => s.attempts.beginCreate({ ...intent, n: 2, label: 'berth:x:r1:2' }))).toThrow(LeaseLostError);
    expect(s.attempts.forRun('r1').map((r) => r.n)).toEqual([1]);
    // Retention takes an ended run's lease with it.
    s.runs.setState('r1', 'cancelled', null, 300);
    s.purge(400, 400);
    expect(s.leases.get('r1')).toBeUndefined();
  });

  it('reads events of every run after an id, and tells whether a run had an event of a type', () => {
    const s = fresh();
    expect(s.events.latestId()).toBe(0);
    const a = s.events.append({ runId: 'r1', at: 1, type: 'x', message: 'one' });
    const b = s.events.append({ runId: 'r2', at: 2, type: 'y', message: 'two' });
    expect(b).toBeGreaterThan(a);
    expect(s.events.latestId()).toBe(b);
    expect(s.events.since(a, 10).map((e) => e.id)).toEqual([b]);
    expect(s.events.has('r2', 'y')).toBe(true);
    expect(s.events.has('r1', 'y')).toBe(false);
  });

  it('records a webhook event once: a second delivery of the same id is told apart, until it is purged', () => {
    const s = fresh();
    expect(s.webhookEvents.firstTime('ev1', 100, 'low_credit')).toBe(true);
    expect(s.webhookEvents.firstTime('ev1', 200, 'low_credit')).toBe(false);
    expect(s.webhookEvents.purgeBefore(150)).toBe(1);
    expect(s.webhookEvents.firstTime('ev1', 300, 'low_credit')).toBe(true);
  });
});
