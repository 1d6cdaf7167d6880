// The supervisor on fake time: a real store in a temp directory, a service that never answers a
// search, and berth.db locked by another program while a run's transition must be stored.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MarketClient } from '../../../../src/client/types.js';
import { loadConfig } from '../../../../src/config/load.js';
import { composeRuns } from '../../../../src/daemon/runs/compose-runs.js';
import { SoleOwner } from '../../../../src/daemon/cluster/run-ownership.js';
import type { Supervisor } from '../../../../src/daemon/runs/supervisor.js';
import type { Submissions } from '../../../../src/daemon/runs/submission.js';
import { Releasers } from '../../../../src/releasers.js';
import { BerthError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

let dir: string;
let store: Store;
let clock: FakeClock;
let supervisor: Supervisor;
let submissions: Submissions;
let releasers: Releasers;
/** Fails the searches in flight (as after the client's retries). */
let failSearches: () => void;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-supervisor-'));
  store = openStore({ home: dir });
  clock = new FakeClock(Date.now());
  // A search answers only when the test fails it: a run waits in `searching` and holds nothing.
  const pending: Array<(err: Error) => void> = [];
  failSearches = () =>
    pending.splice(0).forEach((reject) => reject(new BerthError('network', 'connect ECONNREFUSED', { retryable: true })));
  const search = (_q: unknown, options?: { signal?: AbortSignal }) =>
    new Promise<never>((_, reject) => {
      pending.push(reject);
      options?.signal?.addEventListener('abort', () => reject(new BerthError('aborted', 'stopped')), { once: true });
    });
  const client = { searchOffers: search } as unknown as MarketClient;
  const lists = { findLabel: async () => null, lookAt: async () => null };
  releasers = new Releasers();
  ({ supervisor, submissions } = composeRuns(
    {
      store,
      client,
      clock,
      lists,
      config: loadConfig({}, {}).config,
      log: silentLogger(),
      apiKey: 'test-key',
      ownership: new SoleOwner(store),
    },
    releasers,
  ));
});
afterEach(async () => {
  await releasers.release();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const spec = { name: 's', image: 'img', max_price_per_hour: 1 };

describe('supervisor', () => {
  it('retries a store that refuses writes from a timer: 1 s, then doubling up to 30 s, and resumes the paused run once it writes', async () => {
    supervisor.resumeAll();
    const { row } = submissions.submit(spec);
    await clock.settle();
    expect(store.runs.get(row.id)!.state).toBe('searching');

    const probes: number[] = [];
    const canWrite = store.canWrite.bind(store);
    store.canWrite = () => {
      probes.push(clock.now());
      return canWrite();
    };
    const other = new Database(join(dir, 'berth.db'));
    other.exec('BEGIN IMMEDIATE');
    const t0 = clock.now();
    failSearches(); // its transition to the search backoff cannot be stored: the run pauses
    await clock.settle();
    await clock.advance(100_000);
    expect(probes.map((t) => (t - t0) / 1000)).toEqual([1, 3, 7, 15, 31, 61, 91]);
    expect(store.events.list(row.id).map((e) => e.type)).not.toContain('search.retry');

    other.exec('COMMIT');
    other.close();
    await clock.advance(30_000);
    expect(probes).toHaveLength(8);
    // Resumed from its last stored snapshot: it searches again, and this time its failure is stored.
    failSearches();
    await clock.settle();
    expect(store.events.list(row.id).map((e) => e.type)).toContain('search.retry');
  });
});

describe('supervisor: runs it cannot resume', () => {
  it('fails a run saved by a newer berth with a run.failed event and its notification, in one go', () => {
    const stored = {
      ...spec,
      disk_gb: 20,
      search: { filters: {}, order: [], type: 'on-demand', limit: 64 },
      relax: [],
      max_attempts: 1,
      boot_timeout_s: 60,
      deadline_s: 60,
    };
    store.runs.insert({ id: 'newer1', name: 'from-the-future', specJson: JSON.stringify(stored), createdAt: clock.now() });
    store.runs.saveProgress('newer1', {
      state: 'booting',
      relaxLevel: 0,
      attempt: 1,
      error: null,
      snapshotJson: '{"context":{}}',
      machineVersion: 99,
      at: clock.now(),
    });
    const told: Array<{ runId: string; type: string; message: string }> = [];
    const hookedReleasers = new Releasers();
    const { supervisor: hooked } = composeRuns(
      {
        store,
        client: {} as MarketClient,
        clock,
        lists: { findLabel: async () => null, lookAt: async () => null },
        config: loadConfig({}, {}).config,
        log: silentLogger(),
        apiKey: 'test-key',
        ownership: new SoleOwner(store),
        hooks: {
          stored: () => undefined,
          committed: () => undefined,
          noticed: (run, type, logged) => told.push({ runId: run.id, type, message: logged.message }),
        },
      },
      hookedReleasers,
    );
    try {
      hooked.resumeAll();
      const row = store.runs.get('newer1')!;
      expect(row.state).toBe('failed');
      expect(JSON.parse(row.error_json!)).toMatchObject({ kind: 'upgrade' });
      expect(store.events.list('newer1').map((e) => e.type)).toEqual(['run.failed']);
      expect(told).toEqual([
        {
          runId: 'newer1',
          type: 'run.failed',
          message: expect.stringMatching(/^run failed \(upgrade\): This run was saved by another version of berth \(machine v99\)/),
        },
      ]);
    } finally {
      void hookedReleasers.release(); // every releaser of composeRuns is synchronous
    }
  });

  it('fails a run whose stored spec this build cannot read, saying why, instead of driving it or crashing', () => {
    const stored = { ...spec, disk_gb: 20, relax: [], max_attempts: 1, boot_timeout_s: 60, deadline_s: 60, berth_spec_version: 99 };
    store.runs.insert({ id: 'specv99', name: 'from-the-future', specJson: JSON.stringify(stored), createdAt: clock.now() });
    supervisor.resumeAll();
    const row = store.runs.get('specv99')!;
    expect(row.state).toBe('failed');
    expect(JSON.parse(row.error_json!)).toMatchObject({
      kind: 'upgrade',
      message: expect.stringMatching(
        /^This run cannot be resumed: its stored spec has version 99; this build of berth reads versions 1 to 3/,
      ),
    });
    expect(supervisor.liveRunIds()).toEqual([]);
  });
});
