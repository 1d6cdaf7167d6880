// Detection with many instances on the account: the time from an instance turning `running` in
// the simulator to the poller handing that status over, with 0, 100 and 1,000 other instances on
// the account. Two pollers, each against its own fresh simulator with the service's rate limits,
// through berth's real client and its default rate limits (list 0.9/s):
// - berth's poller (src/daemon/instances/poller.ts): an id-filtered list of the booting instances at the
//   start of every interval, the account swept page by page in the rest of the list budget;
// - the full-sweep poller it replaced: every page of the account every interval (below, kept here
//   only as the benchmark's baseline).
import { createMarketClient, type MarketplaceClient } from '../src/client/marketplace-client.js';
import type { Instance } from '../src/client/types.js';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config/load.js';
import { InstancePoller } from '../src/daemon/instances/poller.js';
import { silentLogger } from '../src/logger.js';
import { startSimulator, type RunningSimulator } from '../src/sim/index.js';

export type PollerKind = 'targeted' | 'full-sweep';

export interface PollerScenario {
  kind: PollerKind;
  /** Other instances on the account. */
  others: number;
  /** Instances created and watched until running. */
  watched: number;
  intervalS: number;
  seed: number;
}

export interface PollerResult extends PollerScenario {
  /** Per watched instance: ms from `running` in the simulator to the poller seeing it. */
  detectionMs: number[];
  /** Watched instances never seen running before the time limit. */
  missed: number;
  listCallsPerMin: number;
  rateLimited: number;
}

/** The poller berth had before: all pages of the account, every interval, for every status check. */
function startFullSweepPoller(client: MarketplaceClient, intervalMs: number, onList: (instances: Instance[]) => void): () => Promise<void> {
  const ac = new AbortController();
  const loop = (async () => {
    while (!ac.signal.aborted) {
      const started = Date.now();
      try {
        onList(await client.listInstances(undefined, { signal: ac.signal }));
      } catch {
        // skipped, as berth did
      }
      await systemClock.sleep(Math.max(0, started + intervalMs - Date.now()), ac.signal).catch(() => undefined);
    }
  })();
  return async () => {
    ac.abort();
    await loop;
  };
}

export async function measurePoller(s: PollerScenario, timeLimitMs: number): Promise<PollerResult> {
  const sim: RunningSimulator = await startSimulator({
    seed: s.seed,
    timeScale: 30,
    // The service's rate limits (list 1.0/s per identity); the catalog large enough for the others.
    config: {
      admin: true,
      catalog: { size: Math.max(600, s.others + s.watched + 200) },
      lifecycle: { provision_s: 5, boot_s: { min: 60, max: 240 } },
    },
  });
  const { config } = loadConfig({}, {});
  const client = createMarketClient({ baseUrl: sim.url, apiKey: sim.apiKey, config });
  const booting = new Set<number>();
  const seenAt = new Map<number, number>();
  const see = (instances: Instance[]) => {
    const now = Date.now();
    for (const i of instances) {
      if (booting.has(i.id) && i.actual_status === 'running' && !seenAt.has(i.id)) {
        seenAt.set(i.id, now);
        booting.delete(i.id);
      }
    }
  };
  try {
    if (s.others > 0) {
      const res = await fetch(`${sim.url}/_sim/instances/bulk`, { method: 'POST', body: JSON.stringify({ count: s.others }) });
      if (res.status !== 200) throw new Error(`bulk answered ${res.status}`);
    }
    const intervalMs = s.intervalS * 1000;
    const listsBefore = sim.stats().requests['GET /api/v1/instances/'] ?? 0;
    const t0 = Date.now();
    let stop: () => Promise<void>;
    if (s.kind === 'targeted') {
      const poller = new InstancePoller({
        client,
        clock: systemClock,
        intervalMs,
        listSpacingMs: 1000 / config.rate_limits.list.per_s,
        log: silentLogger(),
      });
      poller.subscribe({
        waited: () => ({ forStatus: [...booting], forAbsence: [] }),
        onSeen: (instances) => see(instances),
        onAbsent: () => undefined,
        onSweep: () => undefined,
      });
      poller.start();
      stop = () => poller.stop();
    } else {
      stop = startFullSweepPoller(client, intervalMs, see);
    }
    // The watched instances, created at the client's create rate while the poller runs.
    const offers = await client.searchOffers({
      rentable: { eq: true },
      direct_port_count: { gte: 1 },
      limit: s.watched,
      order: [['dph_total', 'asc']],
    });
    for (const [i, o] of offers.slice(0, s.watched).entries()) {
      const created = await client.createInstance(o.id, { image: 'bench/img', disk: 10, label: `bench:${s.kind}:${i}` });
      booting.add(created.instanceId);
    }
    while (booting.size > 0 && Date.now() - t0 < timeLimitMs) await systemClock.sleep(200);
    await stop();
    const elapsedMin = (Date.now() - t0) / 60_000;
    const runningAt = new Map<number, number>();
    for (const h of sim.history()) {
      const r = h.statuses.find((x) => x.status === 'running');
      if (r) runningAt.set(h.id, r.at.wall_ms);
    }
    const detectionMs = [...seenAt].flatMap(([id, at]) => (runningAt.has(id) ? [at - runningAt.get(id)!] : []));
    return {
      ...s,
      detectionMs,
      missed: booting.size,
      listCallsPerMin: ((sim.stats().requests['GET /api/v1/instances/'] ?? 0) - listsBefore) / elapsedMin,
      rateLimited: sim.stats().rate_limited['GET /api/v1/instances/'] ?? 0,
    };
  } finally {
    await client.close();
    await sim.close();
  }
}
