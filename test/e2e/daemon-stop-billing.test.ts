// Stopping the daemon destroys nothing (its runs resume at the next start), so a stop says what goes
// on billing meanwhile (issue #41): a spawned daemon with a running instance, stopped with SIGTERM,
// names that instance, its run and its price in its log, and exits 0; the instance still bills.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator } from '../../src/sim/index.js';
import type { Run } from '../../src/wire/control-api.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { FAST_CONFIG, FAST_SIM } from '../helpers/world.js';

const home = mkdtempSync(join(tmpdir(), 'berth-stop-billing-'));
let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

afterAll(async () => {
  if (daemon?.proc.exitCode === null) await daemon.kill9();
  await sim?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('a daemon stopped while an instance bills', () => {
  it('names what still bills, with its run and price, and exits 0 without destroying it', async () => {
    sim = await startSimulator({ seed: 11, config: FAST_SIM });
    daemon = await spawnDaemon({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
    const spec = {
      name: 'keeps-billing',
      image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
      search: { filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
      max_price_per_hour: 5,
      ready_when: 'status',
      relax: [],
    };
    const { body: run } = await daemon.api<Run>('POST', '/v1/runs', spec);
    const running = await daemon.waitFor(run.id, (r) => r.state === 'running', 60_000);
    expect(await daemon.stop()).toBe(0);
    const log = readFileSync(join(home, 'daemon.log'), 'utf8');
    expect(log).toContain(`1 instance still bills`);
    expect(log).toContain(`instance ${running.instance!.id} of run ${run.id}`);
    expect(log).toContain('They are not destroyed');
    expect(sim.billingNow().map((b) => b.id)).toContain(running.instance!.id);
  }, 120_000);
});
