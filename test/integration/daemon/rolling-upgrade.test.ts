// A rolling upgrade on one Postgres store (issue #38 item 3): a run stored by a newer berth (its spec
// or its machine snapshot at a later version) whose daemon dies is left, nobody's, for a daemon that
// can read it. A daemon of this build used to take it over, fail it `upgrade` and destroy its running
// instance; now its take-over rounds and sweeps leave it and its instance alone, and its status says
// which version the run needs. In-process daemons against a real Postgres and the simulator.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../../src/daemon/daemon.js';
import { silentLogger } from '../../../src/logger.js';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import type { Run, RunEvent } from '../../../src/wire/control-api.js';
import { controlApi, type ControlApi } from '../../helpers/control-api.js';
import { createPgDatabase, queryPg, type PgDatabase } from '../../helpers/pg-database.js';
import { FAST_CONFIG, FAST_SIM, isRunning, jobSpec } from '../../helpers/world.js';

let database: PgDatabase;
let sim: RunningSimulator;
const homes: string[] = [];
const daemons: RunningDaemon[] = [];

beforeEach(async () => {
  database = await createPgDatabase();
  sim = await startSimulator({ seed: 11, config: FAST_SIM });
});
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
  await sim.close();
  await database.drop();
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

async function daemonOn(): Promise<RunningDaemon & { control: ControlApi }> {
  const home = mkdtempSync(join(tmpdir(), 'berth-upgrade-'));
  homes.push(home);
  const daemon = await startDaemon({
    env: { BERTH_HOME: home, BERTH_API_URL: sim.url, BERTH_API_KEY: sim.apiKey },
    overrides: {
      ...FAST_CONFIG,
      store: { url: database.url },
      cluster: { lease_s: 3 },
      daemon: { listen: '127.0.0.1:0', max_active_runs: 10 },
    },
    logger: silentLogger(),
  });
  daemons.push(daemon);
  await daemon.ready;
  return Object.assign(daemon, { control: controlApi(() => daemon) });
}

/** Complete sweeps of the account this daemon made since it started (its /metrics). */
async function sweepsDone(d: RunningDaemon): Promise<number> {
  const text = await (await request(`${d.url}/metrics`)).body.text();
  return Number(/^berth_list_sweep_duration_seconds_count(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? 0);
}

describe('a rolling upgrade', () => {
  it("a newer daemon's runs survive an older daemon's take-over rounds and sweeps, and its status names the version they need", async () => {
    const newer = await daemonOn();
    const bySpec = (await newer.control.api<Run>('POST', '/v1/runs', jobSpec({ name: 'newer-spec' }))).body;
    const bySnapshot = (await newer.control.api<Run>('POST', '/v1/runs', jobSpec({ name: 'newer-snapshot' }))).body;
    const instances: number[] = [];
    const billing = () =>
      sim
        .billingNow()
        .map((h) => h.id)
        .sort();
    for (const r of [bySpec, bySnapshot]) instances.push((await newer.control.waitFor(r.id, isRunning, 30_000)).instance!.id);

    // The "newer" daemon dies with its runs as a later berth would have stored them.
    await newer.stop();
    daemons.splice(daemons.indexOf(newer), 1);
    await queryPg(
      database.url,
      `UPDATE runs SET spec_json = jsonb_set(spec_json::jsonb, '{berth_spec_version}', '99')::text WHERE id = $1`,
      [bySpec.id],
    );
    await queryPg(database.url, `UPDATE runs SET machine_version = 99 WHERE id = $1`, [bySnapshot.id]);
    await queryPg(database.url, `DELETE FROM run_leases WHERE run_id NOT LIKE '~%'`); // nobody holds them

    // A daemon of this build joins: every tick is a take-over round; it leads, so it sweeps.
    const older = await daemonOn();
    await expect.poll(() => sweepsDone(older), { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    // Nothing failed, nothing destroyed: both instances still bill, for the runs that own them.
    expect(billing()).toEqual([...instances].sort());
    expect(older.supervisor.liveCount).toBe(0);
    const leases = await queryPg<{ run_id: string }>(database.url, `SELECT run_id FROM run_leases WHERE run_id NOT LIKE '~%'`);
    expect(leases).toEqual([]);

    for (const r of [bySpec, bySnapshot]) {
      const events = (await older.control.api<RunEvent[]>('GET', `/v1/runs/${r.id}/events`)).body;
      expect(events.map((e) => e.type)).toContain('run.unreadable');
      expect(events.map((e) => e.type)).not.toContain('run.failed');
      expect(events.map((e) => e.type)).not.toContain('run.taken');
    }
    const specView = (await older.control.api<Run>('GET', `/v1/runs/${bySpec.id}`)).body;
    expect(specView.state).toBe('running');
    expect(specView.unreadable).toMatchObject({ needs_spec_version: 99, needs_machine_version: null });
    const snapshotView = (await older.control.api<Run>('GET', `/v1/runs/${bySnapshot.id}`)).body;
    expect(snapshotView.state).toBe('running');
    expect(snapshotView.unreadable).toMatchObject({ needs_spec_version: null, needs_machine_version: 99 });
  }, 90_000);
});
