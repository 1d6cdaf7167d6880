// Any daemon answers for any run (issue #21): the instance a run holds and the counts of /healthz,
// from the store for a run another daemon drives (its driver is not here), on SQLite and on a real
// Postgres (test/helpers/pg-server.ts); and `berth logs` reading a live log through that answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RunLogs } from '../../../../src/daemon/runs/run-logs.js';
import { sharedRuns } from '../../../../src/daemon/runs/shared-runs.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { createPgDatabase, queryPg, type PgDatabase } from '../../../helpers/pg-database.js';

describe.each(['sqlite', 'postgres'] as const)('runs another daemon drives, on %s', (backend) => {
  let store: Store;
  let other: Store;
  let home: string;
  let pgDatabase: PgDatabase | undefined;
  const nothingHere = { instanceOf: () => null };

  beforeEach(async () => {
    home = mkdtempSync(join(tmpdir(), 'berth-shared-'));
    if (backend === 'postgres') {
      const { url } = (pgDatabase = await createPgDatabase());
      store = openStore({ home, pg: { url } });
      // The daemon that drives the runs: a connection of its own.
      other = openStore({ home, pg: { url } });
    } else {
      store = openStore({ home });
      other = store;
    }
  });
  afterEach(async () => {
    if (other !== store) other.close();
    store.close();
    rmSync(home, { recursive: true, force: true });
    await pgDatabase?.drop();
    pgDatabase = undefined;
  });

  /** A run held after a restore (the store's open marks them; here a program of its own). */
  async function hold(runId: string): Promise<void> {
    if (pgDatabase) {
      await queryPg(pgDatabase.url, 'UPDATE runs SET held_at = 1 WHERE id = $1', [runId]);
      return;
    }
    const db = new Database(join(home, 'berth.db'));
    db.prepare('UPDATE runs SET held_at = 1 WHERE id = ?').run(runId);
    db.close();
  }

  /** The other daemon submits a run and makes attempt `n`'s instance. */
  function rented(runId: string, n: number, instanceId: number): void {
    other.transaction(() => {
      if (!other.runs.get(runId)) other.runs.insert({ id: runId, name: runId, specJson: '{}', createdAt: 1 });
      other.attempts.beginCreate({ runId, n, offerId: 100 + n, machineId: 1, dphTotal: 0.5, label: `l-${runId}-${n}`, at: 2 });
      other.attempts.adopt(runId, n, instanceId, 3);
    });
  }

  it("names the instance of the run's latest attempt, made and not ended", () => {
    const runs = sharedRuns({ store, local: nothingHere });
    rented('r1', 1, 501);
    expect(runs.instanceOf('r1')).toBe(501);
    other.attempts.setOutcome('r1', 1, 'running', null, null);
    expect(runs.instanceOf('r1')).toBe(501);
    // The attempt failed and a new one is being made: no instance until it is.
    other.attempts.setOutcome('r1', 1, 'exited', 'the task exited', 10);
    expect(runs.instanceOf('r1')).toBeNull();
    other.attempts.beginCreate({ runId: 'r1', n: 2, offerId: 102, machineId: 1, dphTotal: 0.5, label: 'l-r1-2', at: 11 });
    expect(runs.instanceOf('r1')).toBeNull();
    other.attempts.adopt('r1', 2, 502, 12);
    expect(runs.instanceOf('r1')).toBe(502);
    other.attempts.destroyConfirmed('r1', 2, 502, 20);
    expect(runs.instanceOf('r1')).toBeNull();
    expect(runs.instanceOf('unknown')).toBeNull();
  });

  it('names no instance once the run has ended, and asks the local drivers first', () => {
    rented('r1', 1, 501);
    rented('r2', 1, 601);
    other.runs.setState('r2', 'cancelled', null, 5);
    expect(sharedRuns({ store, local: nothingHere }).instanceOf('r2')).toBeNull();
    const runs = sharedRuns({ store, local: { instanceOf: (id) => (id === 'r1' ? 999 : null) } });
    expect(runs.instanceOf('r1')).toBe(999);
  });

  it('counts every live run of the store, held ones apart, queued ones not active', async () => {
    const runs = sharedRuns({ store, local: nothingHere });
    expect([runs.liveCount, runs.activeCount]).toEqual([0, 0]);
    rented('a', 1, 1);
    other.runs.setState('a', 'running', null, 3);
    other.runs.insert({ id: 'q', name: 'q', specJson: '{}', createdAt: 1 }); // queued
    other.runs.insert({ id: 'h', name: 'h', specJson: '{}', createdAt: 1 });
    await hold('h');
    other.runs.insert({ id: 'done', name: 'd', specJson: '{}', createdAt: 1 });
    other.runs.setState('done', 'failed', null, 4);
    expect([runs.liveCount, runs.activeCount]).toEqual([2, 1]);
  });

  it("reads a run's live log from the instance another daemon's run holds", async () => {
    rented('r1', 1, 501);
    const asked: unknown[] = [];
    const logs = new RunLogs({
      store,
      taskLogs: {
        readLog: async (at) => {
          asked.push(at);
          return { text: 'hello from 501', cut: false };
        },
      },
      instanceOf: (id) => sharedRuns({ store, local: nothingHere }).instanceOf(id),
    });
    expect(await logs.logsOf('r1', 10, AbortSignal.timeout(5000))).toEqual({
      instance_id: 501,
      source: 'live',
      text: 'hello from 501',
      cut: false,
      // Not followed over SSH: no stream to carry on from (the live-output fields, issue #39).
      stream: null,
    });
    expect(asked).toEqual([{ runId: 'r1', n: 1, instanceId: 501 }]);
  });
});
