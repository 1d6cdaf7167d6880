// The words of a run that found nothing to rent (src/job-spec/no-offers-why.ts).
import { describe, expect, it } from 'vitest';
import type { Offer } from '../../../src/client/types.js';
import { loadConfig } from '../../../src/config/load.js';
import { noOffersWhy, uncappedQuery } from '../../../src/job-spec/no-offers-why.js';
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
