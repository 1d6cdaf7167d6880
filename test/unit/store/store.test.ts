import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/store/index.js';
import { StoreError } from '../../../src/errors.js';

const dirs: string[] = [];
const stores: Store[] = [];
function home(): string {
  const d = mkdtempSync(join(tmpdir(), 'berth-store-'));
  dirs.push(d);
  return d;
}
function open(dir: string, lock = false): Store {
  const s = openStore({ home: dir, lock });
  stores.push(s);
  return s;
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
    expect(db.pragma('user_version', { simple: true })).toBe(1);
    db.close();
    expect(open(dir).storeId).toBe(id);
  });

  it('returns the earlier run for a reused idempotency key', () => {
    const s = open(home());
    const first = s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1, idempotencyKey: 'k' });
    const again = s.runs.insert({ id: 'r2', name: 'a', specJson: '{}', createdAt: 2, idempotencyKey: 'k' });
    expect(first.created).toBe(true);
    expect(again).toMatchObject({ created: false, row: { id: 'r1' } });
    expect(s.runs.list()).toHaveLength(1);
  });

  it('journals a create intent once and reports what an earlier process recorded', () => {
    const s = open(home());
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    const start = { runId: 'r1', n: 1, offerId: 7, machineId: 70, dphTotal: 0.4, label: 'berth:x:r1:1', at: 5 };
    expect(s.attempts.beginCreate(start)).toMatchObject({ fresh: true, row: { create_state: 'intent' } });
    s.attempts.markCreated('r1', 1, 555);
    expect(s.attempts.beginCreate(start)).toMatchObject({ fresh: false, row: { create_state: 'created', instance_id: 555 } });
    // The subscriber's later note of the same attempt changes nothing the actor wrote.
    s.attempts.noteStarted(start);
    expect(s.attempts.get('r1', 1)).toMatchObject({ create_state: 'created', instance_id: 555, machine_id: 70 });
  });

  it('marks live and ended runs from saved progress', () => {
    const s = open(home());
    s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
    s.runs.insert({ id: 'r2', name: 'b', specJson: '{}', createdAt: 2 });
    const p = { relaxLevel: 0, attempt: 0, error: null, snapshotJson: '{}', machineVersion: 1, at: 9 };
    s.runs.saveProgress('r1', { ...p, state: 'failed', error: { kind: 'deadline', message: 'late' } });
    s.runs.saveProgress('r2', { ...p, state: 'booting' });
    expect(s.runs.live().map((r) => r.id)).toEqual(['r2']);
    expect(s.runs.get('r1')).toMatchObject({ state: 'failed', ended_at: 9, error_json: '{"kind":"deadline","message":"late"}' });
  });

  it('appends events oldest first and pages after an id', () => {
    const s = open(home());
    const a = s.events.append({ runId: 'r1', at: 1, type: 'x', message: 'one' });
    s.events.append({ runId: 'r1', at: 2, type: 'y', message: 'two', data: { n: 1 } });
    expect(s.events.list('r1').map((e) => e.message)).toEqual(['one', 'two']);
    expect(s.events.list('r1', a).map((e) => e.data_json)).toEqual(['{"n":1}']);
  });

  it('refuses a second daemon on the same store while the first lives, and takes a stale lock', async () => {
    const dir = home();
    const holder = spawn('sleep', ['30']);
    try {
      writeFileSync(join(dir, 'daemon.lock'), String(holder.pid));
      expect(() => open(dir, true)).toThrow(StoreError);
      expect(() => open(dir, true)).toThrow(/Another berth daemon \(pid \d+\)/);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((r) => holder.once('exit', r));
    }
    expect(open(dir, true).storeId).toMatch(/^[0-9a-f]{8}$/);
  });
});
