// POST /_sim/instances/bulk: an account with 1,000 instances berth does not own, made at once,
// listed, billed, settled in their status, and leaving the best offers alone.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

async function fresh() {
  const sim = await startTestSim({ config: { catalog: { size: 4000 } } });
  sims.push(sim);
  return sim;
}

async function listAll(sim: RunningSimulator) {
  const out: any[] = [];
  let token: string | null = '';
  while (token !== null) {
    const r: any = (await call(sim, 'GET', `/api/v1/instances/?limit=100${token ? `&after_token=${token}` : ''}`)).body;
    out.push(...r.instances);
    token = r.next_token;
  }
  return out;
}

describe('bulk foreign instances', () => {
  test('1,000 running instances with numbered labels, listed and billed; the best offers stay free', async () => {
    const sim = await fresh();
    const best = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 5 })).body.offers.map((o: any) => o.id);
    const r = await call(sim, 'POST', '/_sim/instances/bulk', { count: 1000, label_prefix: 'other-' });
    expect(r.status).toBe(200);
    expect(r.body.instance_ids).toHaveLength(1000);
    const listed = await listAll(sim);
    expect(listed).toHaveLength(1000);
    expect(new Set(listed.map((i) => i.label)).size).toBe(1000);
    expect(listed.every((i) => /^other-\d+$/.test(i.label) && i.actual_status === 'running' && i.intended_status === 'running')).toBe(true);
    expect((await call(sim, 'POST', '/api/v0/bundles/', { limit: 5 })).body.offers.map((o: any) => o.id)).toEqual(best);
    expect(sim.ledger().billing_now).toHaveLength(1000);
    expect(sim.webhookDeliveries()).toEqual([]);
  });

  test('a status other than running, the default prefix, and the handle', async () => {
    const sim = await fresh();
    const ids = (await call(sim, 'POST', '/_sim/instances/bulk', { count: 3, status: 'stopped' })).body.instance_ids;
    const rec = (await call(sim, 'GET', `/api/v0/instances/${ids[0]}/`)).body.instances;
    expect(rec).toMatchObject({ actual_status: 'stopped', intended_status: 'stopped', label: 'foreign-1' });
    expect(sim.addForeignInstances(2, { status: 'exited', labelPrefix: 'x' })).toHaveLength(2);
    expect(
      sim
        .instances()
        .filter((i) => i.actual_status === 'exited')
        .map((i) => i.label),
    ).toEqual(['x1', 'x2']);
    // Destroying one frees its offer, as for any instance.
    expect((await call(sim, 'DELETE', `/api/v0/instances/${ids[1]}/`)).status).toBe(200);
  });

  test('bad input is invalid_args and creates nothing', async () => {
    const sim = await fresh();
    for (const body of [{}, { count: 0 }, { count: 1.5 }, { count: 10_001 }, { count: 1, status: 'dancing' }, { count: 4001 }]) {
      const r = await call(sim, 'POST', '/_sim/instances/bulk', body);
      expect([r.status, r.body.error], JSON.stringify(body)).toEqual([400, 'invalid_args']);
    }
    expect(sim.history()).toEqual([]);
  });
});
