// The words of a run that found nothing to rent (src/job-spec/no-offers-why.ts).
import { describe, expect, it } from 'vitest';
import type { Offer } from '../../../src/client/types.js';
import { loadConfig } from '../../../src/config/load.js';
import { excludedMost, marketQuery, noOffersWhy, uncappedQuery } from '../../../src/job-spec/no-offers-why.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';
import { planRun } from '../../../src/job-spec/run-plan.js';

const spec = planRun(
  parseJobSpec({ name: 'j', image: 'i', disk_gb: 20, max_price_per_hour: 0.01, search: { filters: { num_gpus: { eq: 1 } } } }),
  loadConfig({}, {}).config.runs,
);

function offer(id: number, dph: number): Offer {
  return {
    id,
    machine_id: id,
    dph_total: dph,
    dph_base: dph,
    direct_port_count: 2,
    num_gpus: 1,
    gpu_name: 'RTX 3090',
    gpu_ram: 24000,
  } as Offer;
}

describe('noOffersWhy', () => {
  it('the search leaves out the cap and asks for the cheapest first', () => {
    const q = uncappedQuery(spec, 0, { offerIds: [], machineIds: [] });
    expect(q['dph_total']).toBeUndefined();
    expect(q.order).toEqual([['dph_total', 'asc']]);
    expect(q['num_gpus']).toEqual({ eq: 1 });
  });

  it('names the cheapest offer, its disk and the cap when the cap is below every offer', () => {
    const offers = Array.from({ length: 12 }, (_, i) => offer(i + 1, 0.17 + i / 100));
    expect(noOffersWhy(spec, offers)).toBe(
      '12 offers match the filters; the cheapest costs $0.17/h with 20 GB of disk, above max_price_per_hour ($0.01)',
    );
  });

  it('says when nothing matches the filters at any price', () => {
    expect(noOffersWhy(spec, [])).toBe('no offer matches the filters, whatever its price');
  });

  it('says when offers within the cap could not be used, and why they may not have been', () => {
    expect(noOffersWhy(spec, [offer(1, 0.005)])).toBe(
      '1 offer matches the filters and 1 of them is within max_price_per_hour ($0.01), but none could be used: blocked after failed attempts, or taken by other runs',
    );
  });

  it('says when the offers that match state no price it can read', () => {
    expect(noOffersWhy(spec, [offer(1, Number.NaN), offer(2, Number.NaN)])).toBe(
      '2 offers match the filters, but none states a price berth can read',
    );
  });
});

describe('excludedMost: the filter that excluded the most, when the filters match nothing at any price', () => {
  const nothing = { offerIds: [], machineIds: [] };
  const typo = planRun(
    parseJobSpec({
      name: 'j',
      image: 'i',
      disk_gb: 20,
      max_price_per_hour: 1,
      search: { filters: { gpu_name: { eq: 'RTX 4900' }, num_gpus: { eq: 1 }, gpu_ram: { gte: 20000 } } },
      relax: [],
    }),
    loadConfig({}, {}).config.runs,
  );
  const market = [
    offer(1, 0.2),
    { ...offer(2, 0.3), gpu_name: 'RTX 4090', num_gpus: 2 },
    { ...offer(3, 0.4), gpu_name: 'RTX 4090', gpu_ram: 12000 },
    { ...offer(4, 0.5), gpu_name: 'RTX 4090', gpu_ram: 16000 },
  ] as Offer[];

  it('the market search drops every filter of the spec and the cap, keeps a direct port, the disk and cheapest first', () => {
    const q = marketQuery(typo);
    expect(q['gpu_name']).toBeUndefined();
    expect(q['num_gpus']).toBeUndefined();
    expect(q['dph_total']).toBeUndefined();
    expect(q['direct_port_count']).toEqual({ gte: 1 });
    expect(q['verified']).toEqual({ in: [true, false] });
    expect(q.allocated_storage).toBe(20);
    expect(q.order).toEqual([['dph_total', 'asc']]);
  });

  it('names the GPU-name typo: it excludes every offer, more than any other filter', () => {
    expect(excludedMost(typo, 0, nothing, market)).toBe('of the 4 rentable offers, gpu_name (eq RTX 4900) excludes 4, the most');
  });

  it('names the filter of the level searched: after a relax step set gpu_name, another filter excludes the most', () => {
    const relaxed = { ...typo, relax: [{ set: { gpu_name: { in: ['RTX 4090', 'RTX 3090'] }, gpu_ram: { gte: 24000 } } }] };
    expect(excludedMost(relaxed, 1, nothing, market)).toBe('of the 4 rentable offers, gpu_ram (gte 24000) excludes 2, the most');
  });

  it('says nothing when the market is empty or no filter excludes an offer', () => {
    expect(excludedMost(typo, 0, nothing, [])).toBeNull();
    const fits = { ...typo, search: { ...typo.search, filters: { num_gpus: { eq: 1 } } } };
    expect(excludedMost(fits, 0, nothing, [offer(1, 0.2)])).toBeNull();
  });
});
