// A store belongs to one service and one account (issue #41 item 1): a home whose runs hold
// instances on one simulator, started against another (or against the same URL answering for
// another account), refuses to start with exit 2, and the other service sees no create. With no
// live run, it starts and rebinds, saying so.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { createPgDatabase, type PgDatabase } from '../helpers/pg-database.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../helpers/world.js';

let daemon: DaemonProcess | undefined;
let home: string | undefined;
let database: PgDatabase | undefined;
/** The daemons' config, on a Postgres store in the tests that make one. */
let config: typeof FAST_CONFIG = FAST_CONFIG;

afterEach(async () => {
  await database?.drop();
  daemon = home = database = undefined;
  config = FAST_CONFIG;
});
// Registered after the hook above, so run before it (vitest runs after-hooks as a stack): the daemon ends before its database.
const world = useSpawnedWorld();

async function sim(options: { userId?: number; port?: number; apiKey?: string } = {}): Promise<RunningSimulator> {
  return world.sim({
    seed: 11,
    config: { ...FAST_SIM, account: { user_id: options.userId ?? 424242 } },
    ...(options.port === undefined ? {} : { port: options.port }),
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
  });
}

/** A home whose one run holds a running instance on `on`; the daemon is killed (-9), the instance bills. */
async function homeWithLiveRun(on: RunningSimulator): Promise<string> {
  home = world.home('berth-bind-');
  daemon = await world.spawn({ home, simUrl: on.url, apiKey: on.apiKey, config });
  const res = await daemon.api<RunView>('POST', '/v1/runs', jobSpec());
  expect(res.status).toBe(201);
  await daemon.waitFor(res.body.id, isRunning, 30_000);
  await daemon.kill9();
  expect(on.billingNow()).toHaveLength(1);
  return res.body.id;
}

/** `berth daemon` against `target`, to its end. */
async function startAgainst(target: RunningSimulator) {
  const configFile = join(home!, 'config.json');
  writeFileSync(configFile, JSON.stringify(config));
  return berth(['daemon', '--config', configFile], userEnv(home!, { BERTH_API_URL: target.url, BERTH_API_KEY: target.apiKey }), 20_000);
}

describe('a store bound to its service and account', () => {
  it.each(['sqlite', 'postgres'] as const)(
    'refuses to start against another service while a run is live (exit 2, both named), and that service sees no create (%s store)',
    async (backend) => {
      if (backend === 'postgres') {
        database = await createPgDatabase();
        config = { ...FAST_CONFIG, store: { url: database.url } };
      }
      const first = await sim();
      await homeWithLiveRun(first);
      const second = await sim();
      const r = await startAgainst(second);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stderr).toContain(first.url);
      expect(r.stderr).toContain(second.url);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(/another BERTH_HOME/);
      expect(r.stderr).toMatch(/berth cancel RUN/);
      expect(second.stats().creates_received).toBe(0);
      // Nothing of the first one was touched: its instance still bills, for the run to find again.
      expect(first.billingNow()).toHaveLength(1);
    },
    90_000,
  );

  it('refuses to start when the same service answers for another account while a run is live, and rents nothing there', async () => {
    const first = await sim({ userId: 1001 });
    await homeWithLiveRun(first);
    const port = Number(new URL(first.url).port);
    await first.close();
    // The same address, now answering for another account (a key of a team account, say).
    const other = await sim({ userId: 2002, port });
    const r = await startAgainst(other);
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toMatch(/account #1001/);
    expect(r.stderr).toMatch(/account #2002/);
    expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
    expect(r.stderr).toMatch(/another BERTH_HOME/);
    expect(other.stats().creates_received).toBe(0);
  }, 90_000);

  it('starts against another service once no run is live, and says it rebinds', async () => {
    const first = await sim();
    const runId = await homeWithLiveRun(first);
    daemon = await world.spawn({ home: home!, simUrl: first.url, apiKey: first.apiKey, config });
    await daemon.api('POST', `/v1/runs/${runId}/cancel`);
    await daemon.waitFor(runId, isEnded, 30_000);
    await daemon.stop();
    const second = await sim();
    daemon = await world.spawn({ home: home!, simUrl: second.url, apiKey: second.apiKey, config });
    const res = await daemon.api<RunView>('POST', '/v1/runs', jobSpec());
    await daemon.waitFor(res.body.id, isRunning, 30_000);
    expect(second.stats().creates_received).toBe(1);
    await daemon.stop();
    expect(readFileSync(join(home!, 'daemon.log'), 'utf8')).toContain(`it has no live run, so it now rents on ${second.url}`);
  }, 90_000);
});
