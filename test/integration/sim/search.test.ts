// Offer search (search_offers.yaml): the catalog, every operator, the documented defaults,
// allocated_storage pricing, country codes, GPU names with underscores, coercion of the official
// CLI's strings, order, limit, type, rented offers, and speed.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator, SimOffer } from '../../../src/sim/index.js';
import { buildOffers } from '../../../src/sim/catalog.js';
import { DEFAULT_ALLOCATED_GB, HOURS_PER_MONTH } from '../../../src/sim/pricing.js';
import { call, startTestSim } from './helpers.js';

let sim: RunningSimulator;
let catalog: readonly SimOffer[];
beforeAll(async () => {
  sim = await startTestSim({ seed: 7 });
  catalog = sim.offers();
});
afterAll(() => sim.close());

/** Every offer, whatever its verification (the documented default is verified only). */
const ANY_VERIFIED = { verified: { in: [true, false] } };

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
    for (const f of [
      'ask_contract_id',
      'host_id',
      'gpu_total_ram',
      'cpu_cores',
      'disk_space',
      'min_bid',
      'storage_cost',
      'dlperf_per_dphtotal',
      'reliability',
      'geolocation',
      'public_ipaddr',
      'rented',
      'external',
    ]) {
      expect(catalog[0]).toHaveProperty(f);
    }
  });
});

describe('operators', () => {
  test('eq neq gt gte lt lte in notin on numbers, strings and booleans', async () => {
    const all = { limit: 1000, ...ANY_VERIFIED };
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
      [{ verified: { eq: true } }, (o) => o.verified],
      [
        { direct_port_count: { gte: 1 }, num_gpus: { gte: 2, lte: 4 } },
        (o) => o.direct_port_count >= 1 && o.num_gpus >= 2 && o.num_gpus <= 4,
      ],
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
    expect((await search({ id: { eq: o.id }, ...ANY_VERIFIED })).map((x) => x.id)).toEqual([o.id]);
    const same = await search({ machine_id: { eq: o.machine_id }, limit: 100, ...ANY_VERIFIED });
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

  test('accepts the CLI defaults (external, rented, allocated_storage) and refuses unknown keys', async () => {
    const got = await search({
      verified: { eq: true },
      external: { eq: false },
      rentable: { eq: true },
      rented: { eq: false },
      allocated_storage: 5.0,
    });
    expect(got.length).toBe(64);
    const r = await call(sim, 'POST', '/api/v0/bundles/', { no_such_field: { eq: 1 } });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({
      success: false,
      error: 'invalid_request',
      msg: expect.stringContaining('no_such_field is not a valid search key'),
    });
    // The documented filter fields exist on every offer.
    for (const f of [
      'cpu_arch',
      'gpu_arch',
      'has_avx',
      'datacenter',
      'gpu_frac',
      'vms_enabled',
      'os_version',
      'ubuntu_version',
      'gpu_mem_bw',
      'pcie_bw',
      'bw_nvlink',
      'cpu_ghz',
      'mobo_name',
      'gpu_max_power',
      'gpu_max_temp',
      'gpu_display_active',
      'storage_total_cost',
    ]) {
      expect((await search({ [f]: { neq: null }, limit: 1 })).length, f).toBe(1);
    }
  });

  test('bad operators, values and shapes are 400 invalid_request', async () => {
    for (const body of [
      { num_gpus: { approx: 1 } },
      { num_gpus: { eq: 'many' } },
      { num_gpus: 1 },
      { num_gpus: { in: 1 } },
      { limit: -1 },
      { limit: 'ten' },
      { order: 'score' },
      { order: [['score', 'up']] },
      { order: [['nope', 'asc']] },
      { type: 'spot' },
      { type: 'interruptible' },
      { allocated_storage: -5 },
    ]) {
      const r = await call(sim, 'POST', '/api/v0/bundles/', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBe('invalid_request');
    }
  });
});

describe('documented defaults and forms', () => {
  test('without filters: verified, rentable and not rented only; a widened boolean brings the rest', async () => {
    const def = await search({ limit: 1000 });
    expect(def.length).toBe(catalog.filter((o) => o.verified).length);
    expect(def.every((o) => o.verified && o.rentable && !o.rented)).toBe(true);
    expect((await search({ limit: 1000, ...ANY_VERIFIED })).length).toBe(600);
    expect((await search({ limit: 1000, verified: { eq: false } })).every((o) => !o.verified)).toBe(true);
  });

  test('allocated_storage (GB, default 8) prices dph_total at storage_cost per GB-month over 720 h', async () => {
    const o = catalog.find((x) => x.verified)!;
    const disk = (gb: number) => (o.storage_cost * gb) / HOURS_PER_MONTH;
    expect(HOURS_PER_MONTH).toBe(720);
    expect(DEFAULT_ALLOCATED_GB).toBe(8);
    expect(o.dph_total).toBeCloseTo(o.dph_base + disk(8), 12);
    const [eight] = await search({ id: { eq: o.id } });
    expect(eight!.dph_total).toBeCloseTo(o.dph_base + disk(8), 12);
    expect(eight!.storage_total_cost).toBeCloseTo(disk(8), 12);
    const [big] = await search({ id: { eq: o.id }, allocated_storage: '500' });
    expect(big!.dph_total).toBeCloseTo(o.dph_base + disk(500), 12);
    expect(big!.dlperf_per_dphtotal).toBeCloseTo(o.dlperf / big!.dph_total, 2);
    // Filters and order see the priced value.
    const cap = o.dph_base + disk(250);
    expect(await search({ id: { eq: o.id }, dph_total: { lte: cap }, allocated_storage: 200 })).toHaveLength(1);
    expect(await search({ id: { eq: o.id }, dph_total: { lte: cap }, allocated_storage: 300 })).toHaveLength(0);
  });

  test('geolocation takes two-letter country codes', async () => {
    const got = await search({ geolocation: { in: ['US', 'CA'] }, limit: 1000, ...ANY_VERIFIED });
    const want = catalog.filter((o) => /, (US|CA)$/.test(o.geolocation));
    expect(got.length).toBe(want.length);
    expect(got.length).toBeGreaterThan(0);
    expect((await search({ geolocation: { eq: 'se' }, limit: 1000, ...ANY_VERIFIED })).every((o) => o.geolocation.endsWith(', SE'))).toBe(
      true,
    );
    expect(await search({ geolocation: { notin: ['US', 'CA'] }, limit: 1000, ...ANY_VERIFIED })).toHaveLength(600 - want.length);
    expect(await search({ geolocation: { eq: 'Texas, US' }, ...ANY_VERIFIED })).toHaveLength(0);
  });

  test('gpu_name with underscores or spaces; driver_version as the CLI sends it', async () => {
    const a = await search({ gpu_name: { eq: 'RTX_4090' }, limit: 1000 });
    expect(a.length).toBeGreaterThan(0);
    expect(a).toEqual(await search({ gpu_name: { eq: 'RTX 4090' }, limit: 1000 }));
    expect(await search({ gpu_name: { in: ['H100_SXM', 'RTX_4090'] }, limit: 1000 })).toEqual(
      await search({ gpu_name: { in: ['H100 SXM', 'RTX 4090'] }, limit: 1000 }),
    );
    // `driver_version >= 550.90.07` is sent by the CLI as 550090007.
    const newer = await search({ driver_version: { gte: 550090007 }, limit: 1000, ...ANY_VERIFIED });
    expect(newer.length).toBe(catalog.filter((o) => ['550.90.07', '555.42.02', '560.35.03'].includes(o.driver_version)).length);
    expect(await search({ driver_version: { gte: '550.90.07' }, limit: 1000, ...ANY_VERIFIED })).toEqual(newer);
  });

  test('numbers and booleans as the CLI sends them (strings, True/False)', async () => {
    const a = await search({
      num_gpus: { gte: '2' },
      reliability: { gt: '0.95' },
      verified: { eq: 'True' },
      rentable: { eq: 'true' },
      rented: { eq: 'False' },
      limit: '1000',
    });
    const b = await search({ num_gpus: { gte: 2 }, reliability: { gt: 0.95 }, limit: 1000 });
    expect(a).toEqual(b);
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
    const got = await search({
      order: [
        ['num_gpus', 'asc'],
        ['dph_total', 'desc'],
      ],
      limit: 1000,
    });
    for (let i = 1; i < got.length; i++) {
      const [a, b] = [got[i - 1]!, got[i]!];
      expect(a.num_gpus < b.num_gpus || (a.num_gpus === b.num_gpus && a.dph_total >= b.dph_total)).toBe(true);
    }
  });

  test('limit is clamped to max_limit', async () => {
    expect((await search({ limit: 5 })).length).toBe(5);
    expect((await search({ limit: 100_000, ...ANY_VERIFIED })).length).toBe(600);
  });

  test('type bid prices offers at their minimum bid; ondemand and reserved at dph_base', async () => {
    const o = catalog[0]!;
    const [bid] = await search({ type: 'bid', id: { eq: o.id }, ...ANY_VERIFIED });
    expect(bid!.is_bid).toBe(true);
    expect(bid!.dph_total).toBeCloseTo(o.min_bid + (o.storage_cost * 8) / 720, 12);
    expect(await search({ type: 'ondemand', limit: 3 })).toEqual(await search({ type: 'on-demand', limit: 3 }));
    expect(await search({ type: 'reserved', limit: 3 })).toEqual(await search({ limit: 3 }));
  });

  test('a rented offer is not rentable; offers on machines this account uses are rented', async () => {
    const own = await startTestSim({ seed: 7 });
    try {
      const s = (body: Record<string, unknown>) => call(own, 'POST', '/api/v0/bundles/', body).then((r) => r.body.offers as SimOffer[]);
      const machine = [...new Set(catalog.map((o) => o.machine_id))].find(
        (m) => catalog.filter((o) => o.machine_id === m && o.verified).length > 1,
      )!;
      const [first, second] = catalog.filter((o) => o.machine_id === machine && o.verified);
      await call(own, 'PUT', `/api/v0/asks/${first!.id}/`, { image: 'x' });
      expect(await s({ id: { eq: first!.id } })).toEqual([]);
      expect(await s({ id: { eq: second!.id } })).toEqual([]); // rented: {eq: false} by default
      expect((await s({ id: { eq: second!.id }, rented: { eq: true } }))[0]).toMatchObject({ rentable: true, rented: true });
      expect((await s({ id: { eq: first!.id }, rentable: { eq: false }, rented: { in: [true, false] } }))[0]).toMatchObject({
        rentable: false,
        rented: true,
      });
      const [top] = await s({ limit: 1 });
      expect(top!.machine_id).not.toBe(machine);
    } finally {
      await own.close();
    }
  });
});
