// GET /api/v1/instances/ as show_instances.yaml documents it.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim, type Reply } from './helpers.js';

let sim: RunningSimulator;
let ids: number[];

const q = (params: Record<string, unknown>) =>
  '/api/v1/instances/?' +
  new URLSearchParams(
    Object.fromEntries(Object.entries(params).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])),
  ).toString();

beforeAll(async () => {
  sim = await startTestSim({ config: { catalog: { size: 200 } } });
  const populated = await call(sim, 'POST', '/_sim/instances/bulk', { count: 40, label_prefix: 'other-' });
  expect(populated.status).toBe(200);
  ids = populated.body.instance_ids;
  // Two berth-like labels and one unlabelled instance.
  const offers = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 3 })).body.offers;
  await call(sim, 'PUT', `/api/v0/asks/${offers[0].id}/`, { image: 'x', label: 'berth:s:r:1' });
  await call(sim, 'PUT', `/api/v0/asks/${offers[1].id}/`, { image: 'x', label: 'berth:s:r:1' });
  await call(sim, 'PUT', `/api/v0/asks/${offers[2].id}/`, { image: 'x' });
});
afterAll(async () => sim.close());

describe('paging', () => {
  test('25 per page by default and at most, next_token until null, ids ascending', async () => {
    const sizes: number[] = [];
    const seen: number[] = [];
    let token: string | null = null;
    do {
      const r: Reply = await call(sim, 'GET', q({ limit: '100', ...(token ? { after_token: token } : {}) }));
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ success: true, total_instances: 43 });
      expect(r.body.instances_found).toBe(r.body.instances.length);
      sizes.push(r.body.instances.length);
      seen.push(...r.body.instances.map((i: { id: number }) => i.id));
      token = r.body.next_token;
    } while (token !== null);
    expect(sizes).toEqual([25, 18]);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(new Set(seen).size).toBe(43);
  });

  test('a limit of 0 or less means 5; a limit that is not an integer is 400', async () => {
    expect((await call(sim, 'GET', q({ limit: '0' }))).body.instances).toHaveLength(5);
    expect((await call(sim, 'GET', q({ limit: '-3' }))).body.instances).toHaveLength(5);
    expect((await call(sim, 'GET', q({ limit: 'ten' }))).status).toBe(400);
  });

  test('a token it did not issue is 400 invalid_token', async () => {
    const r = await call(sim, 'GET', q({ after_token: 'garbage' }));
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('invalid_token');
  });
});

describe('order_by, select_cols, select_filters', () => {
  test('order_by sorts, with id appended as the tiebreaker; an unknown column is 400', async () => {
    const r = await call(sim, 'GET', q({ order_by: [{ col: 'label', dir: 'desc' }], limit: '25' }));
    expect(r.status).toBe(200);
    const labels = r.body.instances.map((i: { label: string | null }) => i.label);
    // desc: nulls first, then 'other-9' ... 'berth:s:r:1' (twice, by ascending id).
    expect(labels[0]).toBeNull();
    expect(labels[1]).toBe('other-9');
    const all: Array<{ id: number; label: string | null }> = [];
    let token: string | null = null;
    do {
      const page: Reply = await call(
        sim,
        'GET',
        q({ order_by: [{ col: 'label', dir: 'desc' }], ...(token ? { after_token: token } : {}) }),
      );
      all.push(...page.body.instances);
      token = page.body.next_token;
    } while (token !== null);
    expect(all).toHaveLength(43);
    const berth = all.filter((i) => i.label === 'berth:s:r:1');
    expect(all.slice(-2)).toEqual(berth);
    expect(berth[0]!.id).toBeLessThan(berth[1]!.id);
    const bad = await call(sim, 'GET', q({ order_by: [{ col: 'dph_total', dir: 'asc' }] }));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_request');
  });

  test('select_cols returns only those columns; unknown names come back null', async () => {
    const r = await call(sim, 'GET', q({ select_cols: ['id', 'actual_status', 'no_such_col'], limit: '2' }));
    expect(r.status).toBe(200);
    for (const inst of r.body.instances) {
      expect(Object.keys(inst).sort()).toEqual(['actual_status', 'id', 'no_such_col']);
      expect(inst.no_such_col).toBeNull();
    }
    const full = await call(sim, 'GET', q({ limit: '1' }));
    expect(full.body.instances[0]).toHaveProperty('extra_env');
  });

  test('select_filters with each operator on stored columns; totals and label_counts follow the filter', async () => {
    const some = ids.slice(0, 3);
    const byIds = await call(sim, 'GET', q({ select_filters: { id: { in: [...some, 1] } } }));
    expect(byIds.body.instances.map((i: { id: number }) => i.id)).toEqual(some);
    expect(byIds.body).toMatchObject({ total_instances: 3, instances_found: 3, next_token: null });
    const range = await call(sim, 'GET', q({ select_filters: { id: { gte: ids[10], lt: ids[13] } } }));
    expect(range.body.instances.map((i: { id: number }) => i.id)).toEqual(ids.slice(10, 13));
    const notin = await call(sim, 'GET', q({ select_filters: { id: { notin: ids } } }));
    expect(notin.body.total_instances).toBe(3);
    const label = await call(sim, 'GET', q({ select_filters: { label: { eq: 'berth:s:r:1' } } }));
    expect(label.body.total_instances).toBe(2);
    expect(label.body.label_counts).toEqual({ 'berth:s:r:1': 2 });
    const neq = await call(sim, 'GET', q({ select_filters: { label: { neq: 'other-1' } }, limit: '1' }));
    expect(neq.body.total_instances).toBe(42);
    const gt = await call(sim, 'GET', q({ select_filters: { id: { gt: ids[38], lte: ids[39] } } }));
    expect(gt.body.instances.map((i: { id: number }) => i.id)).toEqual([ids[39]]);
    const status = await call(sim, 'GET', q({ select_filters: { actual_status: { in: ['loading', 'running', null] } }, limit: '1' }));
    expect(status.body.total_instances).toBe(43);
    const all = await call(sim, 'GET', q({}));
    expect(all.body.label_counts).toMatchObject({ '': 1, 'berth:s:r:1': 2, 'other-1': 1 });
  });

  test('a filter on a computed column, an unknown operator or bad JSON is 400 invalid_request', async () => {
    for (const filters of [{ dph_total: { lte: 1 } }, { num_gpus: { eq: 1 } }, { id: { like: 3 } }, { id: { in: 3 } }]) {
      const r = await call(sim, 'GET', q({ select_filters: filters }));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ error: 'invalid_request', msg: expect.any(String) });
    }
    expect((await call(sim, 'GET', '/api/v1/instances/?select_filters=%7Bnot-json')).status).toBe(400);
  });
});

test('the list is rate-limited at 1.0 per identity', async () => {
  const own = await startTestSim({ config: { rate_limits: { enabled: true } } });
  try {
    const [a, b] = await Promise.all([call(own, 'GET', q({})), call(own, 'GET', q({}))]);
    expect([a.status, b.status].sort()).toEqual([200, 429]);
  } finally {
    await own.close();
  }
});
