// A simulator and an in-process daemon on free ports with a temp BERTH_HOME: the world of the
// integration tests. Everything it starts is closed by `close()`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DeepPartial } from '../../src/config/load.js';
import { RATE_GROUPS, type Config } from '../../src/config/schema.js';
import { startDaemon, type DaemonOptions, type RunningDaemon } from '../../src/daemon/daemon.js';
import { silentLogger, type Logger } from '../../src/logger.js';
import { FAST_SIM, startSimulator, type RunningSimulator, type SimConfigInput } from '../../src/sim/index.js';
import { request } from 'undici';
import type { Offer } from '../../src/client/types.js';
import { loadConfig } from '../../src/config/load.js';
import { buildSearchQuery, usableOffers } from '../../src/job-spec/search-query.js';
import { parseJobSpec } from '../../src/job-spec/validate.js';
import { planRun } from '../../src/job-spec/run-plan.js';
import { controlApi, type ControlApi } from './control-api.js';
import { expect } from 'vitest';
import type { Run } from '../../src/wire/control-api.js';
import { isEndState } from '../../src/wire/run-states.js';

/** Berth settings that make the whole workflow take seconds against a fast simulator. */
/** The same limit for every endpoint group of berth's client. */
export function everyGroup(per_s: number, burst: number): Config['rate_limits'] {
  return Object.fromEntries(RATE_GROUPS.map((g) => [g, { per_s, burst }])) as Config['rate_limits'];
}

export const FAST_CONFIG: DeepPartial<Config> = {
  daemon: { listen: '127.0.0.1:0' },
  polling: { interval_s: 0.1 },
  rate_limits: everyGroup(50, 10),
  retry: { max_retry_time_s: 10, min_delay_s: 0.02, max_delay_s: 0.5, factor: 2 },
  runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1 },
};

/** Simulator settings: 100× time, short boots, no rate limits unless a test asks (src/sim/presets.ts). */
export { FAST_SIM };

export interface World extends ControlApi {
  sim: RunningSimulator;
  home: string;
  daemon: RunningDaemon;
  restartDaemon(overrides?: DeepPartial<Config>): Promise<void>;
  close(): Promise<void>;
}

export async function startWorld(
  opts: {
    sim?: SimConfigInput;
    config?: DeepPartial<Config>;
    apiKey?: string;
    logger?: Logger;
    seed?: number;
    daemon?: Pick<DaemonOptions, 'streamHeartbeatMs'>;
  } = {},
): Promise<World> {
  const sim = await startSimulator({ seed: opts.seed ?? 7, config: { ...FAST_SIM, ...opts.sim } });
  const home = mkdtempSync(join(tmpdir(), 'berth-it-'));
  const env = { BERTH_HOME: home, BERTH_API_URL: sim.url, BERTH_API_KEY: opts.apiKey ?? sim.apiKey };
  const boot = (overrides?: DeepPartial<Config>) =>
    startDaemon({
      ...opts.daemon,
      env,
      overrides: { ...FAST_CONFIG, ...opts.config, ...overrides },
      logger: opts.logger ?? silentLogger(),
    });
  let daemon = await boot();

  const control = controlApi(() => daemon);
  const world: World = {
    api: control.api,
    waitFor: control.waitFor,
    sim,
    home,
    get daemon() {
      return daemon;
    },
    async restartDaemon(overrides) {
      await daemon.stop();
      daemon = await boot(overrides);
    },
    async close() {
      await daemon.stop();
      await sim.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
  return world;
}

/** A valid job spec for the simulator's catalog, with the given changes. */
export function jobSpec(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'it-job',
    image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
    disk_gb: 20,
    search: {
      filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } },
      order: [['dph_total', 'asc']],
      limit: 16,
    },
    max_price_per_hour: 5,
    max_attempts: 8,
    boot_timeout_s: 5,
    deadline_s: 60,
    relax: [],
    ...changes,
  };
}

/** The offers the daemon will try for `spec`, in order: the search's usable offers, one per machine. */
export async function offersInTryOrder(w: Pick<World, 'sim'>, spec: Record<string, unknown>): Promise<Offer[]> {
  const resolved = planRun(parseJobSpec(spec), loadConfig({}, {}).config.runs);
  const res = await request(`${w.sim.url}/api/v0/bundles/`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.sim.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(buildSearchQuery(resolved, 0, { offerIds: [], machineIds: [] })),
  });
  const { offers } = (await res.body.json()) as { offers: Offer[] };
  const seen = new Set<number>();
  return usableOffers(offers, resolved, { offerIds: [], machineIds: [] }).filter((o) => {
    if (seen.has(o.machine_id)) return false;
    seen.add(o.machine_id);
    return true;
  });
}

/** Submits a job spec through the control API; fails the test unless a run was made. */
export async function submit(w: World, spec: Record<string, unknown>): Promise<Run> {
  const res = await w.api<Run>('POST', '/v1/runs', spec);
  expect(res.status).toBe(201);
  return res.body;
}

export const isRunning = (r: Run) => r.state === 'running';
export const isEnded = (r: Run) => isEndState(r.state);

/**
 * Cancels the run and checks, in the simulator's ledger, that nothing is left billing.
 * `othersMayRun`: another run may be admitted the moment this one frees its slot.
 */
export async function cancelAndCheckNothingBills(w: World, runId: string, othersMayRun = false): Promise<void> {
  await w.api('POST', `/v1/runs/${runId}/cancel`);
  const done = await w.waitFor(runId, isEnded);
  expect(done.state).toBe('cancelled');
  expect(done.instance).toBeNull();
  const billing = w.sim.billingNow();
  expect(othersMayRun ? billing.filter((h) => h.label?.includes(runId)) : billing).toEqual([]);
}
