// What `berth demo` runs against: a fast, fault-free simulator and a daemon tuned to match it, in
// a throwaway BERTH_HOME. Only the offer the daemon will try first is made to fail, so that the
// demo always shows one fail-over and then a healthy instance; the offers after it answer SSH a
// moment after they report running, so that the demo shows berth waiting for SSH.
import { readFileSync } from 'node:fs';
import { createMarketClient } from '../../client/marketplace-client.js';
import type { Offer } from '../../client/types.js';
import { loadConfig, type DeepPartial } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { BerthError } from '../../errors.js';
import { packagePath } from '../../package-path.js';
import type { SimConfigInput } from '../../sim/index.js';
import { buildSearchQuery, usableOffers } from '../../job-spec/search-query.js';
import { planRun } from '../../job-spec/run-plan.js';
import { parseJobSpecText } from '../../job-spec/validate.js';

export const DEMO_JOB_FILE = packagePath('examples', 'demo-job.json');
/** `berth demo --task`: a job whose task prints three epochs and exits 0. */
export const DEMO_TASK_FILE = packagePath('examples', 'demo-task.json');

/** 40 simulated seconds per wall second: a 20-40 s boot takes about a second. */
export const DEMO_TIME_SCALE = 40;
export const DEMO_SEED = 7;

/** Simulated seconds; no random faults, so the only failure is the one the demo forces. */
export const DEMO_SIM_CONFIG: SimConfigInput = {
  lifecycle: { provision_s: 2, boot_s: { min: 20, max: 40 }, fail_after_s: 20 },
  // The daemon polls twice a second; the service's own limits would only slow the demo down.
  rate_limits: { groups: { search: { per_s: 2, burst: 10 }, list_v0: { per_s: 10 }, list_v1: { per_s: 10 }, show: { per_s: 10 } } },
  // Real SSH banners on loopback; an `ssh_late` instance answers 40 sim s (1 s) after it runs.
  ssh_listeners: { enabled: true, late_s: 40 },
};

/** `--task`: the simulator also runs each instance's onstart (berth's task wrapper) as a local `sh`, and serves its log at once. */
export const DEMO_TASK_SIM_CONFIG: SimConfigInput = {
  ...DEMO_SIM_CONFIG,
  onstart_exec: { enabled: true, timeout_s: 60 },
  logs: { upload_delay_s: 0 },
};

/** How many of the daemon's next choices after the doomed one answer SSH late (it tries them in order). */
export const DEMO_LATE_SSH_OFFERS = 5;

/** The daemon's side: fast polling and limits that stay under the simulator's. */
export const DEMO_DAEMON_OVERRIDES: DeepPartial<Config> = {
  polling: { interval_s: 0.5 },
  rate_limits: {
    search: { per_s: 1, burst: 5 },
    create: { per_s: 4, burst: 4 },
    list: { per_s: 4, burst: 4 },
    show: { per_s: 4, burst: 4 },
    destroy: { per_s: 3, burst: 3 },
  },
  runs: { boot_timeout_s: 20, outage_backoff_s: 1 },
};

export interface DemoJob {
  /** The file's JSON, submitted as a user would. */
  body: unknown;
  name: string;
  maxPrice: number;
}

export function readDemoJob(file: string): DemoJob {
  const text = readFileSync(file, 'utf8');
  const spec = parseJobSpecText(text);
  return { body: JSON.parse(text) as unknown, name: spec.name, maxPrice: spec.max_price_per_hour };
}

/** The environment the demo's daemon reads: its own home, the simulator's address and key. */
export function demoEnv(home: string, sim: { url: string; apiKey: string }): NodeJS.ProcessEnv {
  return { BERTH_HOME: home, BERTH_API_URL: sim.url, BERTH_API_KEY: sim.apiKey };
}

/**
 * The offers the daemon will try first, in order: the same search, with the same config, that its
 * first attempt makes (relax level 0, nothing blocked), and its usable results.
 */
export async function firstChoices(env: NodeJS.ProcessEnv, file: string): Promise<Offer[]> {
  const { config, env: resolved } = loadConfig({ overrides: DEMO_DAEMON_OVERRIDES }, env);
  const spec = planRun(parseJobSpecText(readFileSync(file, 'utf8')), config.runs);
  const nothing = { offerIds: [], machineIds: [] };
  const client = createMarketClient({ baseUrl: config.service.base_url, apiKey: resolved.apiKey!, config });
  try {
    const offers = usableOffers(await client.searchOffers(buildSearchQuery(spec, 0, nothing)), spec, nothing);
    if (offers.length === 0) throw new BerthError('not_found', 'The simulated catalog has no offer that matches the demo job.');
    return offers;
  } finally {
    await client.close();
  }
}
