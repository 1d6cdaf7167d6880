// store.json against berth.db: a restored backup holds its live runs, and a missing, emptied or
// replaced database is refused unless the user says to replace the store (issue #14 items 3 and 4).
import { copyFileSync, mkdtempSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/store/index.js';

const dirs: string[] = [];
const stores: Store[] = [];
function home(): string {
  const d = mkdtempSync(join(tmpdir(), 'berth-identity-'));
  dirs.push(d);
  return d;
}
function open(dir: string, replaceStore = false): Store {
  const s = openStore({ home: dir, lock: true, replaceStore });
  stores.push(s);
  return s;
}
afterEach(() => {
  stores.splice(0).forEach((s) => s.close());
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

const progress = { relaxLevel: 0, attempt: 1, error: null, snapshotJson: '{}', machineVersion: 1, at: 9 };

function submit(s: Store, id: string): void {
  s.transaction(() => s.runs.insert({ id, name: id, specJson: '{}', createdAt: 1 }));
}

/** A backup of a stopped store: its database copied (the e2e test takes one while the daemon runs). */
function backup(s: Store, dir: string): string {
  const file = join(home(), 'backup.db');
  s.close();
  copyFileSync(join(dir, 'berth.db'), file);
  return file;
}

function restore(file: string, dir: string): void {
  copyFileSync(file, join(dir, 'berth.db'));
  for (const f of ['berth.db-wal', 'berth.db-shm']) rmSync(join(dir, f), { force: true });
}

describe('store identity', () => {
  it('holds every live run of a restored backup, and nothing when the database is simply current', () => {
    const dir = home();
    let s = open(dir);
    submit(s, 'a');
    submit(s, 'b');
    const file = backup(s, dir);
    s = open(dir);
    expect(s.restore).toBeNull();
    // After the backup: run a is cancelled, run c submitted.
    s.transaction(() => s.runs.saveProgress('a', { ...progress, state: 'cancelled' }));
    submit(s, 'c');
    s.close();

    restore(file, dir);
    s = open(dir);
    expect(s.restore?.heldRunIds.sort()).toEqual(['a', 'b']);
    expect(s.runs.get('a')?.held_at).not.toBeNull();
    expect(s.runs.heldCount()).toBe(2);
    s.close();
    // The hold is in the database: a restart keeps it, and finds no new restore.
    s = open(dir);
    expect(s.restore).toBeNull();
    expect(s.runs.heldCount()).toBe(2);
  });

  it('is not fooled by a kill between a commit and the store.json write', () => {
    const dir = home();
    let s = open(dir);
    submit(s, 'a');
    s.close();
    // store.json one generation behind the database, as after SIGKILL between the two writes.
    const file = join(dir, 'store.json');
    const mark = JSON.parse(readFileSync(file, 'utf8')) as { store_id: string; generation: number };
    writeFileSync(file, JSON.stringify({ ...mark, generation: mark.generation - 1 }));
    s = open(dir);
    expect(s.restore).toBeNull();
    expect(s.runs.get('a')?.held_at).toBeNull();
  });

  it.each(['missing', 'empty'])('refuses a %s berth.db in a home that shows a previous store, then replaces it when told', (how) => {
    const dir = home();
    const first = open(dir);
    const oldId = first.storeId;
    first.close();
    if (how === 'missing') unlinkSync(join(dir, 'berth.db'));
    else truncateSync(join(dir, 'berth.db'), 0);
    expect(() => open(dir)).toThrow(new RegExp(`berth.db is ${how}, but store.json shows that store ${oldId} ran here.*--replace-store`));
    const s = open(dir, true);
    expect(s.storeId).not.toBe(oldId);
    expect(s.formerStoreIds).toEqual([oldId]);
    expect(s.replaced).toBe(oldId);
    s.close();
    // Remembered: the next start (without the flag) still sweeps the old store's labels.
    expect(open(dir).formerStoreIds).toEqual([oldId]);
  });

  it("refuses another store's database in this home unless told to replace the store", () => {
    const a = home();
    const b = home();
    const sa = open(a);
    const idA = sa.storeId;
    sa.close();
    const sb = open(b);
    const idB = sb.storeId;
    sb.close();
    restore(join(b, 'berth.db'), a);
    expect(() => open(a)).toThrow(new RegExp(`belongs to store ${idB}, but this home last ran store ${idA}`));
    expect(open(a, true).formerStoreIds).toEqual([idA]);
  });

  it('refuses --replace-store when there is nothing to replace', () => {
    const dir = home();
    open(dir).close();
    expect(() => open(dir, true)).toThrow(/nothing to replace/);
  });
});
