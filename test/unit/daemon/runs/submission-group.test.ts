// Submissions through the daemon's group commit (src/daemon/runs/submission.ts, #50), on a real
// store, SQLite and Postgres: the submissions of one turn share one commit, yet each keeps what a
// submission promises: a name no live run has (the live-name index and the per-name counter, in
// one transaction), an answer only once its run is committed, a refused spec or a reused key
// storing nothing and taking no other submission with it, and nothing stored once the daemon stops.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../../src/config/load.js';
import { IdempotencyConflictError, Submissions } from '../../../../src/daemon/runs/submission.js';
import { BerthError, SpecError, StoreWriteError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logger.js';
import { GroupCommit } from '../../../../src/store/group-commit.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { createPgDatabase, type PgDatabase } from '../../../helpers/pg-database.js';

const spec = (name: string) => ({ name, image: 'ubuntu:22.04', max_price_per_hour: 0.5 });

describe.each(['sqlite', 'postgres'] as const)('submissions in a group commit on %s', (backend) => {
  let dir: string;
  let store: Store;
  let pgDatabase: PgDatabase | undefined;
  let pgUrl: string | undefined;
  /** Outermost transactions committed. */
  let commits: number;
  let stopping: boolean;
  let started: string[];
  let submissions: Submissions;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-submit-group-'));
    if (backend === 'postgres') {
      ({ url: pgUrl } = pgDatabase = await createPgDatabase());
      store = openStore({ home: dir, pg: { url: pgUrl } });
    } else {
      store = openStore({ home: dir });
    }
    commits = 0;
    store.onCommit(() => commits++);
    stopping = false;
    started = [];
    const group = new GroupCommit({ transaction: (fn) => store.transaction(fn) });
    submissions = new Submissions({
      store,
      clock: { now: () => 1000 },
      config: loadConfig({}, {}).config,
      log: silentLogger(),
      intake: {
        assertAccepting: () => {
          if (stopping) throw new BerthError('daemon_stopping', 'stopping');
        },
        started: (row) => started.push(row.id),
      },
      commit: (write) => group.add(write),
    });
  });
  afterEach(async () => {
    store.close();
    await pgDatabase?.drop();
    pgDatabase = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** The live runs' names as another connection reads them: what has committed. */
  function committedNames(): string[] {
    if (backend === 'sqlite') {
      const other = new Database(join(dir, 'berth.db'), { readonly: true });
      try {
        return (other.prepare(`SELECT name FROM runs WHERE ended_at IS NULL ORDER BY name`).all() as Array<{ name: string }>).map(
          (r) => r.name,
        );
      } finally {
        other.close();
      }
    }
    const other = openStore({ home: mkdtempSync(join(dir, 'other-')), pg: { url: pgUrl! } });
    try {
      return other.runs
        .live()
        .map((r) => r.name)
        .sort();
    } finally {
      other.close();
    }
  }

  it('five submissions of one name in one turn: one commit, five names no two alike, each answered once committed', async () => {
    const answered: string[][] = [];
    const all = Array.from({ length: 5 }, () =>
      submissions.submit(spec('train')).then((r) => {
        // What another connection sees when this submission is answered: its run is there.
        answered.push(committedNames());
        return r;
      }),
    );
    // Handed over, not yet written: nothing is answered or visible in the turn they came in.
    expect(committedNames()).toEqual([]);
    const results = await Promise.all(all);
    expect(commits).toBe(1);
    const names = results.map((r) => r.row.name);
    expect(names).toEqual(['train', 'train-2', 'train-3', 'train-4', 'train-5']);
    for (const [i, seen] of answered.entries()) expect(seen).toContain(names[i]);
    expect(started).toEqual(results.map((r) => r.row.id));
    expect(results.every((r) => r.created)).toBe(true);
    // Each run's first event names the name it took.
    expect(store.events.list(results[1]!.row.id).map((e) => e.message)).toEqual([
      'submitted "train-2" (image ubuntu:22.04, max $0.5/h); named "train-2" because a live run is already named "train"',
    ]);
  });

  it('a refused spec and a reused key in the same turn store nothing and take no other submission with it', async () => {
    await submissions.submit(spec('first'), 'key-1');
    const startedBefore = started.length;
    const [bad, conflict, repeat, good] = await Promise.allSettled([
      submissions.submit({ name: 'bad', image: 'ubuntu:22.04' }),
      submissions.submit(spec('other'), 'key-1'),
      submissions.submit(spec('first'), 'key-1'),
      submissions.submit(spec('good')),
    ]);
    expect(bad.status === 'rejected' && bad.reason).toBeInstanceOf(SpecError);
    expect(conflict.status === 'rejected' && conflict.reason).toBeInstanceOf(IdempotencyConflictError);
    expect(repeat.status === 'fulfilled' && repeat.value.created).toBe(false);
    expect(good.status === 'fulfilled' && good.value.row.name).toBe('good');
    expect(committedNames()).toEqual(['first', 'good']);
    expect(started.length).toBe(startedBefore + 1);
  });

  it('a submission whose write waits while the daemon begins to stop is refused, nothing stored', async () => {
    const late = submissions.submit(spec('late'));
    stopping = true;
    await expect(late).rejects.toMatchObject({ code: 'daemon_stopping' });
    expect(committedNames()).toEqual([]);
    expect(started).toEqual([]);
  });

  it.runIf(backend === 'sqlite')(
    'a group that cannot commit (another program holds berth.db) answers each with the store error, nothing stored or started',
    async () => {
      const other = new Database(join(dir, 'berth.db'));
      other.exec('BEGIN IMMEDIATE');
      try {
        const results = await Promise.allSettled([submissions.submit(spec('a')), submissions.submit(spec('b'))]);
        expect(results.map((r) => r.status === 'rejected' && r.reason instanceof StoreWriteError)).toEqual([true, true]);
      } finally {
        other.exec('ROLLBACK');
        other.close();
      }
      expect(committedNames()).toEqual([]);
      expect(started).toEqual([]);
      // Once it can write, the same name is free: nothing of the failed group was kept.
      expect((await submissions.submit(spec('a'))).row.name).toBe('a');
    },
  );
});
