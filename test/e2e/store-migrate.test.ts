// `berth store migrate --to URL` as a user runs it, on spawned processes: a daemon's SQLite store is
// copied whole into an empty Postgres database, a daemon started on Postgres resumes its run on the
// same instance (the store id came along, so the instance's label is still this store's), and no
// daemon starts on the SQLite file any more. Refused, with exit 2 and nothing changed: a database
// that is not empty, a store a daemon holds, a wrong password (which no output repeats).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import { openStore } from '../../src/store/index.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { createPgDatabase, queryPg, type PgDatabase } from '../helpers/pg-database.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let database: PgDatabase;
beforeEach(async () => {
  database = await createPgDatabase();
});
afterEach(async () => {
  sim = undefined;
  await database.drop();
});
// Registered after the hook above, so run before it (vitest runs after-hooks as a stack): the daemons end before their database.
const world = useSpawnedWorld();
const tempDir = () => world.home('berth-migrate-');

async function start(home: string, env: Record<string, string> = {}): Promise<DaemonProcess> {
  return world.spawn({ home, simUrl: sim!.url, apiKey: sim!.apiKey, config: FAST_CONFIG, env });
}

const tables = async () =>
  (await queryPg<{ n: number }>(database.url, `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`))[0]!.n;

describe('berth store migrate', () => {
  it('copies a stopped daemon’s store into Postgres, where a new daemon resumes its run on the same instance', async () => {
    sim = await world.sim({ seed: 31, config: FAST_SIM });
    const home = tempDir();
    let d = await start(home);
    const submitted = await d.api<RunView>('POST', '/v1/runs', jobSpec());
    expect(submitted.status).toBe(201);
    const runId = submitted.body.id;
    const running = await d.waitFor(runId, (r) => r.state === 'running');
    const before = await d.api<Array<{ id: number; type: string }>>('GET', `/v1/runs/${runId}/events`);
    expect(await d.stop()).toBe(0);

    // The SQLite store as it was, to compare with.
    const sqlite = openStore({ home });
    const expected = {
      storeId: sqlite.storeId,
      runs: sqlite.runs.list(),
      attempts: sqlite.attempts.forRun(runId),
      events: sqlite.events.list(runId),
      outbox: sqlite.outbox.list(100),
      key: sqlite.instanceKeys.get(running.instance!.id),
      spend: sqlite.spendUsd(Date.now()),
    };
    sqlite.close();

    const env = userEnv(home, { BERTH_STORE_URL: database.url });
    const migrated = await berth(['store', 'migrate'], env);
    expect(migrated.stderr).toBe('');
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toContain(`Copied store ${expected.storeId} into the postgres 127.0.0.1:`);
    expect(migrated.stdout).toMatch(/: 1 runs, 1 attempts, \d+ events/);
    expect(migrated.stdout).not.toContain(database.password);

    const pg = openStore({ home: tempDir(), pg: { url: database.url } });
    try {
      expect(pg.storeId).toBe(expected.storeId);
      expect(pg.runs.list()).toEqual(expected.runs);
      expect(pg.attempts.forRun(runId)).toEqual(expected.attempts);
      expect(pg.events.list(runId)).toEqual(expected.events);
      expect(pg.outbox.list(100)).toEqual(expected.outbox);
      expect(pg.instanceKeys.get(running.instance!.id)).toBe(expected.key);
      expect(pg.spendUsd(Date.now())).toBeGreaterThanOrEqual(expected.spend);
      // The next event is numbered after the copied ones.
      const last = expected.events.at(-1)!.id;
      expect(pg.events.append({ runId: 'other', at: 1, type: 'x', message: 'x' })).toBeGreaterThan(last);
    } finally {
      pg.close();
    }

    // The SQLite store has moved: no daemon starts on it (it would act on the same instances).
    const refused = await berth(['daemon'], userEnv(home, { BERTH_API_URL: sim.url, BERTH_API_KEY: sim.apiKey }));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /berth\.db was copied to the postgres .* store .*set store\.url \(or BERTH_STORE_URL\) to that database/,
    );

    // A daemon on Postgres resumes the run: the same instance, still running, nothing rented again.
    d = await start(home, { BERTH_STORE_URL: database.url });
    const resumed = await d.waitFor(runId, (r) => r.state === 'running' && r.instance?.id === running.instance!.id);
    expect(resumed.attempts).toHaveLength(1);
    // The event log goes on from the copied one: every event the SQLite daemon wrote is still there.
    const after = await d.api<Array<{ id: number; type: string }>>('GET', `/v1/runs/${runId}/events`);
    expect(after.body.slice(0, before.body.length)).toEqual(before.body);
    expect(sim.history().filter((h) => h.label?.split(':')[2] === runId)).toHaveLength(1);
    await d.api('POST', `/v1/runs/${runId}/cancel`);
    await d.waitFor(runId, (r) => r.state === 'cancelled');
    expect(sim.billingNow()).toEqual([]);
  });

  it('refuses a database that is not empty, a store a daemon holds, and a wrong password: exit 2, nothing changed', async () => {
    const home = tempDir();
    const s = openStore({ home });
    s.transaction(() => s.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 }));
    s.close();

    // A wrong password: one sentence naming the server and database, never the password.
    const wrong = new URL(database.url);
    wrong.password = 'Sekr3t-never-shown';
    const denied = await berth(['store', 'migrate', '--to', wrong.href], userEnv(home));
    expect(denied.code).toBe(2);
    expect(denied.stderr).toMatch(
      new RegExp(`Cannot open the postgres 127\\.0\\.0\\.1:\\d+/${database.name} as ${database.name} store \\(28P01`),
    );
    expect(denied.stderr + denied.stdout).not.toContain('Sekr3t');
    expect(await tables()).toBe(0);

    // A daemon holds the SQLite store (its lock): refused, the database left empty.
    const held = openStore({ home, lock: true });
    try {
      const busy = await berth(['store', 'migrate', '--to', database.url], userEnv(home));
      expect(busy.code).toBe(2);
      expect(busy.stderr).toMatch(/Another berth daemon.* is already using this store/);
      expect(await tables()).toBe(0);
    } finally {
      held.close();
    }

    // A database that is not empty.
    await queryPg(database.url, 'CREATE TABLE something_else (x int)');
    const full = await berth(['store', 'migrate', '--to', database.url], userEnv(home));
    expect(full.code).toBe(2);
    expect(full.stderr).toMatch(/database is not empty \(1 table\): migrate into a new, empty database; nothing was changed/);
    expect(await tables()).toBe(1);

    // The SQLite store was never marked as moved: a daemon may still open it.
    openStore({ home, lock: true }).close();
  });

  it('a daemon whose Postgres store cannot be reached or refuses the login exits 2 with one sentence, never the password', async () => {
    const home = tempDir();
    const wrong = new URL(database.url);
    wrong.password = 'Sekr3t-never-shown';
    const gone = new URL(wrong.href);
    gone.port = '1';
    for (const [url, why] of [
      [wrong.href, /\(28P01: password authentication failed .*\): check the user, password and database in store\.url\.\n$/],
      [gone.href, /\(ECONNREFUSED: .*\): check that the server is up and store\.url is right\.\n$/],
    ] as const) {
      const r = await berth(['daemon'], userEnv(home, { BERTH_STORE_URL: url, BERTH_API_KEY: 'k' }));
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^Cannot open the postgres 127\.0\.0\.1:\d+\/berth_test_\w+ as berth_test_\w+ store /);
      expect(r.stderr).toMatch(why);
      expect(r.stdout + r.stderr).not.toContain('Sekr3t');
    }
  });
});
