// Under a time scale the simulator's charges are counted in wall time, as a client that times its
// instances by the wall clock (berth's records, `berth costs`) counts them: at --time-scale 30 the
// report used to say 30 times what berth recorded, and berth's "its figure is the higher" was false.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim } from './helpers.js';

const DAY = 86_400;
/** 2026-01-10 00:00 UTC. */
const JAN10 = 1767225600 + 9 * DAY;
const JANUARY = { day: { gte: 1767225600, lte: 1769903999 } };

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

describe('charges under a time scale', () => {
  test('two wall hours at time scale 30 are charged as two hours, not sixty', async () => {
    const clock = { now: (JAN10 + 6 * 3600) * 1000 };
    const sim = await startTestSim({
      timeScale: 30,
      now: () => clock.now,
      config: { lifecycle: { provision_s: 0, boot_s: { min: 0, max: 0 } } },
    });
    sims.push(sim);
    const offer = sim.offers()[0]!;
    const created = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', disk: 20, label: 'job' });
    expect(created.status).toBe(200);
    clock.now += 2 * 3600_000;
    const r = await call(sim, 'GET', `/api/v0/charges/?select_filters=${encodeURIComponent(JSON.stringify(JANUARY))}`);
    expect(r.status).toBe(200);
    const ledger = sim.ledger().instances[0]!;
    const [contract] = r.body.results;
    // The ledger runs in sim time: 60 sim hours. The report divides by the scale.
    expect(contract.amount).toBe(Math.round((ledger.total_usd / 30) * 1000) / 1000);
    expect(contract.amount).toBeCloseTo(2 * (ledger.compute_dph + ledger.disk_dph), 2);
    expect(contract.items[0].description).toBe(`2.000 hours at $${ledger.compute_dph.toFixed(3)}/hour`);
  });
});
