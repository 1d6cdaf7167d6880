// The group commit (src/store/group-commit.ts) on a real store, SQLite and Postgres: writes handed
// over in one turn commit as one transaction; a write that throws is rolled back alone; a group
// that fails takes every write with it and tells what they set going (`ifRolledBack`).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { createPgDatabase, type PgDatabase } from '../../helpers/pg-database.js';

describe.each(['sqlite', 'postgres'] as const)('group commit on %s', (backend) => {
  let dir: string;
  let store: Store;
  let pgDatabase: PgDatabase | undefined;
  /** Transactions that committed (the store's commit listeners run once per outermost commit). */
  let commits: number;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-group-'));
    if (backend === 'postgres') {
      const { url } = (pgDatabase = await createPgDatabase());
      store = openStore({ home: dir, pg: { url } });
    } else {
      store = openStore({ home: dir });
    }
    commits = 0;
    store.onCommit(() => commits++);
  });
  afterEach(async () => {
    store.close();
    await pgDatabase?.drop();
    pgDatabase = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const insert = (id: string) => () => void store.runs.insert({ id, name: id, specJson: '{}', createdAt: 1 });

  it('writes handed over in one turn commit as one transaction, each told once it has', async () => {
    const group = new GroupCommit({ transaction: (fn) => store.transaction(fn) });
    const told: string[] = [];
    const done = ['a', 'b', 'c'].map((id) => group.add(insert(id)).then(() => told.push(id)));
    // Nothing is written in the turn they were handed over in.
    expect(store.runs.get('a')).toBeUndefined();
    await Promise.all(done);
    expect(commits).toBe(1);
    expect(told).toEqual(['a', 'b', 'c']);
    expect(['a', 'b', 'c'].map((id) => store.runs.get(id)?.id)).toEqual(['a', 'b', 'c']);
    // The next turn's writes are the next group.
    await group.add(insert('d'));
    expect(commits).toBe(2);
  });

  it('a write that throws is rolled back alone; the others commit', async () => {
    const group = new GroupCommit({ transaction: (fn) => store.transaction(fn) });
    const undone: unknown[] = [];
    const a = group.add(insert('a'));
    const b = group.add(() => {
      insert('b')();
      store.ifRolledBack((err) => undone.push(err));
      throw new Error('b failed');
    });
    const c = group.add(insert('c'));
    await expect(b).rejects.toThrow('b failed');
    await Promise.all([a, c]);
    expect(store.runs.get('b')).toBeUndefined();
    expect(store.runs.get('a')?.id).toBe('a');
    expect(store.runs.get('c')?.id).toBe('c');
    // Its own rollback told what it had set going; the group's commit told nobody else.
    expect(undone).toHaveLength(1);
    expect(commits).toBe(1);
  });

  it('a group that does not commit takes every write with it, and tells each of them', async () => {
    let fail = true;
    // The group's transaction fails after its writes ran, as a COMMIT the disk refuses would.
    const group = new GroupCommit({
      transaction: <T>(fn: () => T): T =>
        store.transaction(() => {
          const value = fn();
          if (fail) throw new Error('the disk refused the commit');
          return value;
        }),
    });
    const undone: string[] = [];
    const write = (id: string) => () => {
      insert(id)();
      store.ifRolledBack((err) => undone.push(`${id}: ${(err as Error).message}`));
    };
    const results = await Promise.allSettled([group.add(write('a')), group.add(write('b'))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(undone).toEqual(['a: the disk refused the commit', 'b: the disk refused the commit']);
    expect(store.runs.get('a')).toBeUndefined();
    expect(store.runs.get('b')).toBeUndefined();
    expect(commits).toBe(0);
    // A group that commits tells nobody.
    fail = false;
    await group.add(write('c'));
    expect(undone).toHaveLength(2);
    expect(store.runs.get('c')?.id).toBe('c');
  });
});
