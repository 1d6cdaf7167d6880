// Offer search: the catalog, every operator, coercion of the official CLI's strings, order, limit,
// type, rented offers hidden, and speed.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator, SimOffer } from '../../../src/sim/index.js';
import { buildOffers, Catalog } from '../../../src/sim/catalog.js';
import { searchOffers } from '../../../src/sim/search.js';
import { call, startTestSim } from './helpers.js';

let sim: RunningSimulator;
let catalog: readonly SimOffer[];
beforeAll(async () => {
  sim = await startTestSim({ seed: 7 });
  catalog = sim.offers();
});
afterAll(() => sim.close());

const search = async (body: Record<string, unknown>) => {
  const r = await call(sim, 'POST', '/api/v0/bundles/', body);
  expect(r.status, r.text).toBe(200);
  return r.body.offers as SimOffer[];
};

describe('catalog', () => {
  test('is deterministic from the seed and realistic', () => {
    expect(buildOffers(7, 600)).toEqual(catalog);
    expect(buildOffers(8, 600)).not.toEqual(catalog);
    expect(catalog.length).toBe(600);
    const models = new Set(catalog.map((o) => o.gpu_name));
    expect(models.size).toBeGreaterThanOrEqual(10);
    const machines = new Map<number, number>();
    for (const o of catalog) machines.set(o.machine_id, (machines.get(o.machine_id) ?? 0) + 1);
    expect([...machines.values()].some((n) => n > 1)).toBe(true);
    expect(catalog.some((o) => !o.verified)).toBe(true);
    expect(catalog.some((o) => o.direct_port_count === 0)).toBe(true);
    const perGpu = (name: string) => catalog.filter((o) => o.gpu_name === name).map((o) => o.dph_base / o.num_gpus);
    expect(Math.min(...perGpu('RTX 4090'))).toBeGreaterThanOrEqual(0.3);
    expect(Math.max(...perGpu('RTX 4090'))).toBeLessThanOrEqual(0.75);
    expect(Math.min(...perGpu('H100 SXM'))).toBeGreaterThanOrEqual(2);
    for (const f of ['ask_contract_id', 'host_id', 'gpu_total_ram', 'cpu_cores', 'disk_space', 'min_bid', 'storage_cost', 'dlperf_per_dphtotal', 'reliability', 'geolocation', 'public_ipaddr', 'rented', 'external']) {
      expect(catalog[0]).toHaveProperty(f);
    }
  });
});

describe('operators', () => {
  test('eq neq gt gte lt lte in notin on numbers, strings and booleans', async () => {
    const all = { limit: 1000 };
    const cases: Array<[Record<string, unknown>, (o: SimOffer) => boolean]> = [
      [{ num_gpus: { eq: 2 } }, (o) => o.num_gpus === 2],
      [{ gpu_name: { neq: 'RTX 4090' } }, (o) => o.gpu_name !== 'RTX 4090'],
      [{ dph_total: { gt: 2 } }, (o) => o.dph_total > 2],
      [{ gpu_ram: { gte: 81920 } }, (o) => o.gpu_ram >= 81920],
      [{ dph_total: { lt: 0.3 } }, (o) => o.dph_total < 0.3],
      [{ reliability: { lte: 0.95 } }, (o) => o.reliability <= 0.95],
      [{ gpu_name: { in: ['H100 SXM', 'H200'] } }, (o) => ['H100 SXM', 'H200'].includes(o.gpu_name)],
      [{ num_gpus: { notin: [1, 2] } }, (o) => o.num_gpus > 2],
      [{ verified: { eq: false } }, (o) => !o.verified],
      [{ direct_port_count: { gte: 1 }, num_gpus: { gte: 2, lte: 4 } }, (o) => o.direct_port_count >= 1 && o.num_gpus >= 2 && o.num_gpus <= 4],
    ];
    for (const [filter, pred] of cases) {
      const got = await search({ ...all, ...filter });
      const want = catalog.filter(pred);
      expect(got.length, JSON.stringify(filter)).toBe(want.length);
      expect(got.every(pred)).toBe(true);
    }
  });

  test('id and machine_id can be filtered', async () => {
    const o = catalog[123]!;
    expect((await search({ id: { eq: o.id } })).map((x) => x.id)).toEqual([o.id]);
    const same = await search({ machine_id: { eq: o.machine_id }, limit: 100 });
    expect(same.length).toBe(catalog.filter((x) => x.machine_id === o.machine_id).length);
  });

  test('coerces the official CLI strings to numbers and booleans', async () => {
    const a = await search({ num_gpus: { eq: '1' }, verified: { eq: 'true' }, limit: 1000 });
    const b = await search({ num_gpus: { eq: 1 }, verified: { eq: true }, limit: 1000 });
    expect(a).toEqual(b);
    expect(a.length).toBeGreaterThan(0);
    const c = await search({ num_gpus: { in: ['4', '8'] }, limit: 1000 });
    expect(c.every((o) => o.num_gpus >= 4)).toBe(true);
  });

  test('accepts the CLI defaults (external, rented, allocated_storage) and ignores unknown fields', async () => {
    const got = await search({ verified: { eq: true }, external: { eq: false }, rentable: { eq: true }, rented: { eq: false }, allocated_storage: 5.0, no_such_field: { eq: 1 } });
    expect(got.length).toBe(64);
  });

  test('bad operators, values and shapes are 400 invalid_args', async () => {
    for (const body of [{ num_gpus: { approx: 1 } }, { num_gpus: { eq: 'many' } }, { num_gpus: 1 }, { num_gpus: { in: 1 } }, { limit: -1 }, { limit: 'ten' }, { order: 'score' }, { order: [['score', 'up']] }, { order: [['nope', 'asc']] }, { type: 'spot' }]) {
      const r = await call(sim, 'POST', '/api/v0/bundles/', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBe('invalid_args');
    }
  });
});

describe('order, limit, type', () => {
  test('default order is score desc and default limit 64', async () => {
    const got = await search({});
    expect(got.length).toBe(64);
    const scores = got.map((o) => o.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  test('multi-key order', async () => {
    const got = await search({ order: [['num_gpus', 'asc'], ['dph_total', 'desc']], limit: 1000 });
    for (let i = 1; i < got.length; i++) {
      const [a, b] = [got[i - 1]!, got[i]!];
      expect(a.num_gpus < b.num_gpus || (a.num_gpus === b.num_gpus && a.dph_total >= b.dph_total)).toBe(true);
    }
  });

  test('limit is clamped to max_limit', async () => {
    expect((await search({ limit: 5 })).length).toBe(5);
    expect((await search({ limit: 100_000 })).length).toBe(600);
  });

  test('type bid prices offers at their minimum bid; ondemand is an alias', async () => {
    const bid = await search({ type: 'bid', id: { eq: catalog[0]!.id } });
    expect(bid[0]!.is_bid).toBe(true);
    expect(bid[0]!.dph_total).toBeLessThan(catalog[0]!.dph_total);
    expect(await search({ type: 'ondemand', limit: 3 })).toEqual(await search({ type: 'on-demand', limit: 3 }));
  });

  test('rented offers disappear from search', async () => {
    const [top] = await search({ limit: 1 });
    await call(sim, 'PUT', `/api/v0/asks/${top!.id}/`, { image: 'x' });
    expect((await search({ id: { eq: top!.id } })).length).toBe(0);
    expect((await search({ limit: 1 }))[0]!.id).not.toBe(top!.id);
  });
});

test('search over the catalog takes well under 5 ms', () => {
  const cat = new Catalog(3, 1000);
  const limits = { default_limit: 64, max_limit: 1000 };
  const body = { verified: { eq: true }, rentable: { eq: true }, num_gpus: { gte: '1' }, direct_port_count: { gte: 1 }, order: [['dlperf_per_dphtotal', 'desc']], limit: 1000 };
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t = performance.now();
    searchOffers(cat, body, limits);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  expect(times[Math.floor(times.length * 0.5)]!).toBeLessThan(5);
});
