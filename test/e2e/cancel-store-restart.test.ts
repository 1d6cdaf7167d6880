// `berth cancel RUN --wait` through a daemon whose Postgres store restarts meanwhile (issue #31
// item 9): the daemon answers 503 store_unavailable while the server is away; the CLI rides that
// out as the daemon does, and exits 0 once the run has ended cancelled. A Postgres server of the
// file's own (the suite's is shared by every file), SIGKILLed and restarted on its port and data.
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../src/wire/control-api.js';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { startPgInstance, type PgInstance } from '../helpers/pg-instance.js';
import { FAST_CONFIG, FAST_SIM, isRunning, jobSpec } from '../helpers/world.js';

let dir: string | undefined;
let server: PgInstance | undefined;
let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;
afterEach(async () => {
  if (daemon && daemon.proc.exitCode === null) await daemon.kill9();
  await sim?.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  daemon = undefined;
  sim = undefined;
  server = undefined;
  dir = undefined;
});

/** A database of its own on `adminUrl`'s server, owned by a user of its own. */
async function createDatabase(adminUrl: string): Promise<string> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(`CREATE ROLE berth_cancel LOGIN PASSWORD 'cancel-pw'`);
    await c.query(`CREATE DATABASE berth_cancel OWNER berth_cancel`);
  } finally {
    await c.end();
  }
  const u = new URL(adminUrl);
  u.username = 'berth_cancel';
  u.password = 'cancel-pw';
  u.pathname = '/berth_cancel';
  return u.href;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('berth cancel --wait across a Postgres restart', () => {
  it('rides out the store that is away and exits 0 once the run has ended cancelled', { timeout: 120_000 }, async () => {
    // The server runs as its own user (when the tests run as root): let it through this file's temp dir.
    chmodSync(tmpdir(), 0o711);
    dir = mkdtempSync(join(tmpdir(), 'berth-cancel-pg-'));
    chmodSync(dir, 0o711);
    mkdirSync(join(dir, 'pg'));
    server = await startPgInstance(join(dir, 'pg'), 'cancel-admin');
    const url = await createDatabase(server.adminUrl);
    sim = await startSimulator({ seed: 31, config: FAST_SIM });
    const home = join(dir, 'home');
    mkdirSync(home, { mode: 0o700 });
    daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: { ...FAST_CONFIG, store: { url } } }, 30_000);
    const run = (await daemon.api<Run>('POST', '/v1/runs', jobSpec({ name: 'cancel-across-restart' }))).body;
    await daemon.waitFor(run.id, isRunning, 30_000);

    await server.kill9();
    const cancel = berth(['cancel', run.id, '--wait'], userEnv(home), 90_000);
    // The CLI meets a daemon whose store is away for a while before it comes back.
    await sleep(2_000);
    await server.restart();
    const result = await cancel;
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stderr).toMatch(/The store cannot be written now.*Trying again for up to 2 minutes\./s);
    expect(result.stdout).toContain(`Run ${run.id} is cancelled`);
    expect((await daemon.api<Run>('GET', `/v1/runs/${run.id}`)).body.state).toBe('cancelled');
    expect(sim.billingNow()).toEqual([]);
    expect(await daemon.stop()).toBe(0);
  });
});
