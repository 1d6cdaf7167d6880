// The daemon on a Postgres store (store.url postgres://...): a run submitted through the control
// API gets to running against the simulator, everything it did is in the database (its instance
// labelled with the store id the database holds), a restarted daemon resumes it from there, a second
// daemon on the same home is refused while one with its own home joins the store, and the URL's
// password is in no log line.
import { rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { controlApi } from '../../helpers/control-api.js';
import { createLogger } from '../../../src/logger.js';
import { startDaemon } from '../../../src/daemon/daemon.js';
import { createPgDatabase, queryPg, terminateConnections, type PgDatabase } from '../../helpers/pg-database.js';
import { cancelAndCheckNothingBills, isRunning, jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let database: PgDatabase;
let world: World | undefined;
beforeEach(async () => {
  database = await createPgDatabase();
});
afterEach(async () => {
  await world?.close();
  world = undefined;
  await database.drop();
});

function capturedLogger() {
  const lines: string[] = [];
  const logger = createLogger({ destination: new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString('utf8')), cb()) }) });
  return { logger, text: () => lines.join('') };
}

describe('daemon on a Postgres store', () => {
  it('gets a run to running, keeps it in the database, resumes it after a restart, and lets a second daemon join', async () => {
    const log = capturedLogger();
    world = await startWorld({ config: { store: { url: database.url } }, logger: log.logger });
    const run = await submit(world, jobSpec());
    const running = await world.waitFor(run.id, isRunning, 30_000);

    const [meta] = await queryPg<{ value: string }>(database.url, `SELECT value FROM meta WHERE key = 'store_id'`);
    expect(world.daemon.storeId).toBe(meta!.value);
    const rows = await queryPg<{ state: string; instance_id: number; label: string }>(
      database.url,
      `SELECT r.state, a.instance_id, a.label FROM runs r JOIN attempts a ON a.run_id = r.id WHERE r.id = $1 AND a.instance_id IS NOT NULL`,
      [run.id],
    );
    expect(rows).toEqual([{ state: 'running', instance_id: String(running.instance!.id), label: `berth:${meta!.value}:${run.id}:1` }]);
    const events = await queryPg<{ type: string }>(database.url, `SELECT type FROM events WHERE run_id = $1 ORDER BY id`, [run.id]);
    expect(events.map((e) => e.type)).toContain('attempt.running');

    // One daemon per home: a second one on this home is told so, and changes nothing.
    await expect(
      startDaemon({
        env: { BERTH_HOME: world.home, BERTH_API_URL: world.sim.url, BERTH_API_KEY: world.sim.apiKey },
        overrides: { store: { url: database.url }, daemon: { listen: '127.0.0.1:0' } },
        logger: log.logger,
      }),
    ).rejects.toThrow(/Another berth daemon .*is already using this store/);
    // A second daemon with a home of its own joins the store: it shows the run, driven by the first.
    const second = `${world.home}-second`;
    try {
      const joined = await startDaemon({
        env: { BERTH_HOME: second, BERTH_API_URL: world.sim.url, BERTH_API_KEY: world.sim.apiKey },
        overrides: { store: { url: database.url }, daemon: { listen: '127.0.0.1:0' } },
        logger: log.logger,
      });
      try {
        await joined.ready;
        const seen = await controlApi(() => joined).api<RunView>('GET', `/v1/runs/${run.id}`);
        expect(seen.body.state).toBe('running');
        expect(seen.body.instance?.id).toBe(running.instance!.id);
        expect(joined.supervisor.liveCount).toBe(0);
      } finally {
        await joined.stop();
      }
    } finally {
      rmSync(second, { recursive: true, force: true });
    }

    // A new daemon process finds the run in the database and resumes it: the same instance, still running.
    await world.restartDaemon({ store: { url: database.url } });
    const resumed = await world.waitFor(run.id, (r) => isRunning(r) && r.instance?.id === running.instance!.id, 30_000);
    expect(resumed.attempts).toHaveLength(1);
    await cancelAndCheckNothingBills(world, run.id);

    expect(log.text()).toContain('berth daemon starting');
    expect(log.text()).toContain(`/${database.name}`);
    expect(log.text()).not.toContain(database.password);
  });

  it('goes on when Postgres ends its connections mid-run: the run still gets to running on one instance, the daemon never stops', async () => {
    world = await startWorld({ config: { store: { url: database.url } } });
    const run = await submit(world, jobSpec());
    // A Postgres restart, as its clients see it, several times while the run searches, creates and boots.
    let cuts = 0;
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 150));
      cuts += await terminateConnections(database.name);
    }
    expect(cuts).toBeGreaterThan(0);
    const running = await world.waitFor(run.id, isRunning, 30_000);
    expect(world.sim.history().filter((h) => h.label?.split(':')[2] === run.id)).toHaveLength(running.attempts.length);
    expect(world.sim.billingNow().map((h) => h.id)).toEqual([running.instance!.id]);
    expect((await world.api('GET', '/healthz')).status).toBe(200);
    await cancelAndCheckNothingBills(world, run.id);
  });
});
