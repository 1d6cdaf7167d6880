// Issue #20: 30 runs of one spec submitted at once to a real `berth daemon` process against the
// simulator at the service's documented limits (search 10 a minute, create 4.5/s, v1 list 1/s with
// 25 a page: the simulator's defaults, not raised) and berth's default client limits all reach
// `running` within a deadline a user would set, on a handful of shared searches, with no offer
// tried by two runs.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { Run as RunView } from '../../src/wire/control-api.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, isRunning, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();

const RUNS = 30;

describe('shared searches (#20)', () => {
  it('30 runs of one spec reach running at the documented limits on <= 5 searches, never two runs on one offer', async () => {
    const defaults = loadConfig({}, {}).config;
    // The documented limits: the simulator's own defaults, with 20% of the machines faulty.
    const sim = await world.sim({ seed: 20, config: { ...FAST_SIM, rate_limits: {}, profile_rates: { exited: 0.1, stuck_loading: 0.1 } } });
    const home = world.home();
    const d = await world.spawn({
      home,
      simUrl: sim.url,
      apiKey: sim.apiKey,
      config: { ...FAST_CONFIG, rate_limits: defaults.rate_limits, polling: { interval_s: 1 } },
    });
    const spec = jobSpec({ deadline_s: 120, boot_timeout_s: 5, search: { ...(jobSpec().search as object), limit: 64 } });
    const runs = await Promise.all(
      Array.from({ length: RUNS }, async () => {
        const res = await d.api<RunView>('POST', '/v1/runs', spec);
        expect(res.status).toBe(201);
        return res.body;
      }),
    );
    const started = Date.now();
    const done: RunView[] = [];
    for (const run of runs) done.push(await d.waitFor(run.id, (r) => isRunning(r) || r.state === 'failed', 120_000));
    const seconds = (Date.now() - started) / 1000;

    expect(done.map((r) => r.state)).toEqual(Array(RUNS).fill('running'));
    const stats = sim.stats();
    const searches = stats.requests['POST /api/v0/bundles/'] ?? 0;
    expect(searches).toBeLessThanOrEqual(5);
    expect(stats.rate_limited).toEqual({});
    // No offer tried by two runs: every create of every run on its own offer.
    const tried = done.flatMap((r) => r.attempts.map((a) => a.offer_id));
    expect(new Set(tried).size).toBe(tried.length);
    // The ledger: every billing instance is a running run's, and no run holds two.
    const billing = sim.billingNow();
    const byRun = new Map<string, number>();
    for (const h of billing) {
      const owner = done.find((r) => h.label?.includes(r.id));
      expect(owner, `instance ${h.id} (${h.label}) belongs to no run`).toBeDefined();
      byRun.set(owner!.id, (byRun.get(owner!.id) ?? 0) + 1);
    }
    expect([...byRun.values()].every((n) => n === 1)).toBe(true);
    expect(byRun.size).toBe(RUNS);
    console.log(`30 runs running in ${seconds.toFixed(1)} s on ${searches} searches, ${tried.length} attempts`);
  }, 180_000);
});
