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
import { SoleOwner, type RunOwnership } from '../../../../src/daemon/cluster/run-ownership.js';
import type { Supervisor } from '../../../../src/daemon/runs/supervisor.js';
import type { Submissions } from '../../../../src/daemon/runs/submission.js';
import { Releasers } from '../../../../src/releasers.js';
import { BerthError, LeaseLostError } from '../../../../src/errors.js';
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
    const { row } = await submissions.submit(spec);
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
  const storedSpec = {
    ...spec,
    disk_gb: 20,
    search: { filters: {}, order: [], type: 'on-demand', limit: 64 },
    relax: [],
    max_attempts: 1,
    boot_timeout_s: 60,
    deadline_s: 60,
  };

  /** A run stored as `booting` with an attempt whose instance is live: what a kept run must not lose. */
  function storeBootingRun(id: string, specJson: string, machineVersion: number): void {
    store.runs.insert({ id, name: 'stored-elsewhere', specJson, createdAt: clock.now() });
    store.runs.saveProgress(id, {
      state: 'booting',
      relaxLevel: 0,
      attempt: 1,
      error: null,
      snapshotJson: '{"context":{}}',
      machineVersion,
      at: clock.now(),
    });
  }

  /** The supervisor with hooks that record the daemon's notices. */
  function hookedSupervisor(told: Array<{ runId: string; type: string; message: string }>) {
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
    return { hooked, release: () => void hookedReleasers.release() }; // every releaser of composeRuns is synchronous
  }

  it('fails a run saved by an older berth whose snapshot this build no longer migrates, with a run.failed event and its notification, in one go', () => {
    storeBootingRun('older1', JSON.stringify(storedSpec), 0);
    const told: Array<{ runId: string; type: string; message: string }> = [];
    const { hooked, release } = hookedSupervisor(told);
    try {
      hooked.resumeAll();
      const row = store.runs.get('older1')!;
      expect(row.state).toBe('failed');
      expect(JSON.parse(row.error_json!)).toMatchObject({ kind: 'upgrade' });
      expect(store.events.list('older1').map((e) => e.type)).toEqual(['run.failed']);
      expect(told).toEqual([
        {
          runId: 'older1',
          type: 'run.failed',
          message: expect.stringMatching(/^run failed \(upgrade\): This run was saved by an older version of berth \(machine v0\)/),
        },
      ]);
    } finally {
      release();
    }
  });

  // Issue #38 items 1 and 3: a downgrade, or a stricter parse, must not destroy a running instance.
  // (These runs were failed `upgrade` before, their instances destroyed by the orphan sweep.)
  it.each([
    ['its snapshot was saved by a later run machine', JSON.stringify(storedSpec), 99, /run machine version 99/, null, 99],
    ['its stored spec is of a later version', JSON.stringify({ ...storedSpec, berth_spec_version: 99 }), 7, /has version 99/, 99, null],
    [
      'its stored spec is refused by a stricter parse (a config ladder with a string number)',
      JSON.stringify({ ...storedSpec, relax: [{ set: { reliability: { gte: '0.9' } } }], berth_spec_version: 2 }),
      7,
      /no longer passes validation: \$\.relax\[0\]\.set\.reliability\.gte: expected a number, got string/,
      null,
      null,
    ],
  ])(
    'keeps a live run this build cannot read, never failing or driving it: %s',
    (_, specJson, machineVersion, reason, specVersion, needsMachine) => {
      storeBootingRun('kept1', specJson, machineVersion);
      supervisor.resumeAll();
      const row = store.runs.get('kept1')!;
      expect(row.state).toBe('booting');
      expect(row.ended_at).toBeNull();
      expect(supervisor.liveRunIds()).toEqual([]);
      const events = store.events.list('kept1');
      expect(events.map((e) => e.type)).toEqual(['run.unreadable']);
      expect(events[0]!.message).toMatch(reason);
      expect(events[0]!.message).toMatch(/It is kept as it is, not failed/);
      expect(JSON.parse(events[0]!.data_json!)).toMatchObject({ spec_version: specVersion, machine_version: needsMachine });
    },
  );

  it('ends a kept run `cancelled` when the user cancels it (its instance left to the orphan sweep), and only then', () => {
    storeBootingRun('kept2', JSON.stringify({ ...storedSpec, berth_spec_version: 99 }), 7);
    supervisor.resumeAll();
    expect(store.runs.get('kept2')!.state).toBe('booting');
    supervisor.cancel('kept2');
    const row = store.runs.get('kept2')!;
    expect(row.state).toBe('cancelled');
    expect(row.ended_at).not.toBeNull();
    expect(store.events.list('kept2').map((e) => e.type)).toEqual(['run.unreadable', 'run.cancelled']);
  });
});

// Issue #38 item 7: the fence on ending a run this build cannot read. On a shared store a daemon
// may end such a run only while it holds it: between its take and its write another daemon (one
// that reads the run) may hold it now and drive it, and must not find it ended under it.
describe('supervisor: the ownership fence on ending a kept run', () => {
  it('writes nothing for a cancelled kept run whose lease this daemon no longer holds when it ends it', () => {
    const storedSpec = {
      ...spec,
      disk_gb: 20,
      search: { filters: {}, order: [], type: 'on-demand', limit: 64 },
      relax: [],
      max_attempts: 1,
      boot_timeout_s: 60,
      deadline_s: 60,
      berth_spec_version: 99,
    };
    store.runs.insert({ id: 'fenced1', name: 'newer', specJson: JSON.stringify(storedSpec), createdAt: clock.now() });
    store.runs.saveProgress('fenced1', {
      state: 'running',
      relaxLevel: 0,
      attempt: 1,
      error: null,
      snapshotJson: '{"context":{}}',
      machineVersion: 7,
      at: clock.now(),
    });
    // A shared store's ownership whose take succeeds but whose lease is lost by the write.
    const ownership: RunOwnership = Object.assign(new SoleOwner(store), {
      shared: true,
      write: (runId: string) => {
        throw new LeaseLostError(runId);
      },
    });
    const fencedReleasers = new Releasers();
    const { supervisor: fenced } = composeRuns(
      {
        store,
        client: {} as MarketClient,
        clock,
        lists: { findLabel: async () => null, lookAt: async () => null },
        config: loadConfig({}, {}).config,
        log: silentLogger(),
        apiKey: 'test-key',
        ownership,
      },
      fencedReleasers,
    );
    try {
      fenced.resumeAll();
      fenced.cancel('fenced1');
      const row = store.runs.get('fenced1')!;
      expect(row.state).toBe('running');
      expect(row.ended_at).toBeNull();
      expect(store.events.list('fenced1').map((e) => e.type)).not.toContain('run.cancelled');
    } finally {
      void fencedReleasers.release();
    }
  });
});
