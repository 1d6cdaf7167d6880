// The database stays bounded under a long outage (issue #14 item 24): every search fails, each run
// retries after its backoff, and the repeats fold into a few rows per run instead of one row per
// try. Real RunDrivers on a real SQLite file and on a real Postgres database; the service is a stub
// that always fails, and the backoff waits are skipped so that a day of retries takes seconds.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromPromise } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { runMachine, type SearchInput, type SearchOutput, type SleepInput, type SleepOutput } from '../../../machines/run-machine.js';
import { stubActor } from '../../helpers/stub-actor.js';
import { systemClock } from '../../../src/clock.js';
import { loadConfig } from '../../../src/config/load.js';
import { AttemptJournal } from '../../../src/daemon/runs/attempt-journal.js';
import { SoleOwner } from '../../../src/daemon/cluster/run-ownership.js';
import { MachineQuarantine } from '../../../src/daemon/runs/machine-quarantine.js';
import { OfferClaims } from '../../../src/daemon/runs/offer-claims.js';
import { RunDriver, type ProvidedRunMachine } from '../../../src/daemon/runs/run-driver.js';
import { BerthError } from '../../../src/errors.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';
import { planRun } from '../../../src/job-spec/run-plan.js';
import { silentLogger } from '../../../src/logger.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { createPgDatabase, type PgDatabase } from '../../helpers/pg-database.js';

let dir: string | undefined;
let store: Store | undefined;
let database: PgDatabase | undefined;
const drivers: RunDriver[] = [];
afterEach(async () => {
  drivers.splice(0).forEach((d) => d.stop());
  store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  store = dir = undefined;
  await database?.drop();
  database = undefined;
});

/** A new store on `backend`: a SQLite file, or an empty Postgres database. */
async function newStore(backend: 'sqlite' | 'postgres'): Promise<Store> {
  dir = mkdtempSync(join(tmpdir(), 'berth-bounded-'));
  if (backend === 'sqlite') return openStore({ home: dir });
  database = await createPgDatabase();
  return openStore({ home: dir, pg: { url: database.url } });
}

const DAY_S = 86_400;

/**
 * An outage: every search fails as it does after the client's retries. A run whose searches reach
 * `limit.value` waits in its next search until `release()` lets them fail again.
 */
function outage(limit: { value: number }) {
  const searches = new Map<string, number>();
  const parked: Array<() => void> = [];
  const fail = () => new BerthError('network', 'connect ECONNREFUSED 203.0.113.1:443', { retryable: true });
  const machine = runMachine.provide({
    actors: {
      searchOffers: stubActor<SearchOutput, SearchInput>(({ input }) => {
        const n = (searches.get(input.runId) ?? 0) + 1;
        searches.set(input.runId, n);
        if (n > limit.value) return new Promise<SearchOutput>((_, reject) => parked.push(() => reject(fail())));
        return Promise.reject(fail());
      }),
      // The backoff (30 s) passes at once; the run's deadline (days away) never does.
      sleepUntil: fromPromise<SleepOutput, SleepInput>(({ input }) =>
        input.until - Date.now() > DAY_S * 1000
          ? new Promise<SleepOutput>(() => undefined)
          : new Promise<SleepOutput>((r) => setImmediate(() => r({ at: Date.now() }))),
      ),
    },
  }) as unknown as ProvidedRunMachine;
  return { machine, searches, release: () => parked.splice(0).forEach((r) => r()) };
}

function startRuns(count: number, machine: ProvidedRunMachine): string[] {
  const { config } = loadConfig({}, {});
  const spec = planRun(parseJobSpec({ name: 'outage', image: 'x', max_price_per_hour: 1, deadline_s: 30 * DAY_S }), config.runs);
  const claims = new OfferClaims();
  const quarantine = new MachineQuarantine(1000, systemClock);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `run${String(i).padStart(4, '0')}`;
    const { row } = store!.runs.insert({ id, name: spec.name, specJson: JSON.stringify(spec), createdAt: Date.now() });
    const driver = new RunDriver(row, spec, {
      machine,
      store: store!,
      journal: new AttemptJournal(store!, new SoleOwner(store!)),
      clock: systemClock,
      claims,
      quarantine,
      config,
      log: silentLogger(),
      onEnded: () => undefined,
      onPaused: () => undefined,
      onProgress: () => undefined,
      onLost: () => undefined,
      ownership: new SoleOwner(store!),
    });
    drivers.push(driver);
    driver.start();
    driver.admit();
    ids.push(id);
  }
  return ids;
}

async function until(done: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(['sqlite', 'postgres'] as const)('the store (%s) under an outage', (backend) => {
  it('keeps a run that retries its search for 24 h (2,880 tries at 30 s) to a handful of event rows', async () => {
    store = await newStore(backend);
    const cycles = 2880;
    const { machine, searches } = outage({ value: cycles });
    const [id] = startRuns(1, machine);
    await until(() => (searches.get(id!) ?? 0) > cycles, 110_000); // 14-35 s on 2 cores; 62 s once under load
    const rows = store.events.list(id!);
    expect(rows.length).toBeLessThanOrEqual(4);
    const total = (type: string) => rows.filter((e) => e.type === type).reduce((n, e) => n + e.count, 0);
    expect(total('search.retry')).toBe(cycles);
    expect(total('search.started')).toBe(cycles + 1);
    expect(drivers[0]!.state).toBe('searching');
  }, 120_000);

  it('with 200 runs, the event rows stop growing however long the outage lasts', async () => {
    store = await newStore(backend);
    const limit = { value: 10 };
    const { machine, searches, release } = outage(limit);
    const ids = startRuns(200, machine);
    const allPast = (n: number) => () => ids.every((id) => (searches.get(id) ?? 0) > n);
    const rows = () => ids.reduce((n, id) => n + store!.events.list(id).length, 0);
    await until(allPast(limit.value), 120_000);
    const first = rows();
    limit.value = 30;
    release();
    await until(allPast(limit.value), 120_000);
    expect(first).toBeLessThanOrEqual(200 * 4);
    expect(rows()).toBe(first);
    // Without folding, 20 more tries per run would have added 200 × 20 × 2 = 8,000 rows.
  }, 240_000);
});
