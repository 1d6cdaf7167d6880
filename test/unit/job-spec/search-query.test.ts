import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Offer } from '../../../src/client/types.js';
import type { Config } from '../../../src/config/schema.js';
import {
  billedPriceFor,
  billedPricePerHour,
  buildSearchQuery,
  describeRelaxStep,
  relaxStepCount,
  usableOffers,
} from '../../../src/job-spec/search-query.js';
import { parseJobSpec, parseJobSpecText } from '../../../src/job-spec/validate.js';
import { planRun } from '../../../src/job-spec/run-plan.js';

const runs: Config['runs'] = {
  max_attempts: 8,
  boot_timeout_s: 600,
  deadline_s: 7200,
  destroy_retry_max_delay_s: 60,
  outage_backoff_s: 30,
  machine_quarantine_s: 900,
  gone_offers_per_search: 3,
  rebid_wait_s: 30,
  idle_warning_s: 300,
  search_share_s: 30,
  relax: [{ drop: ['verified'] }],
};
const none = { offerIds: [], machineIds: [] };
const specJob = planRun(parseJobSpecText(readFileSync(new URL('../../../examples/job.json', import.meta.url), 'utf8')), runs);

describe('buildSearchQuery', () => {
  it('sends the filters as written at relax level 0, plus the fixed rules, the service defaults and the disk', () => {
    expect(buildSearchQuery(specJob, 0, none)).toEqual({
      gpu_name: { eq: 'RTX 4090' },
      num_gpus: { eq: 1 },
      gpu_ram: { gte: 24000 },
      verified: { eq: true },
      rented: { eq: false },
      direct_port_count: { gte: 1 },
      dph_total: { lte: 0.9 },
      rentable: { eq: true },
      allocated_storage: 40,
      order: [['dlperf_per_dphtotal', 'desc']],
      type: 'on-demand',
      limit: 64,
    });
  });

  it('prices every search for the disk the instance will have (allocated_storage = disk_gb)', () => {
    const spec = planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 0.5, disk_gb: 4000 }), runs);
    expect(buildSearchQuery(spec, 0, none)['allocated_storage']).toBe(4000);
    expect(buildSearchQuery(spec, 1, none)['allocated_storage']).toBe(4000);
  });

  it("sends berth's verified default explicitly, and a dropped service-defaulted filter in the form that widens", () => {
    const spec = planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1 }), {
      ...runs,
      relax: [{ drop: ['verified'] }, { drop: ['rented', 'gpu_ram'] }],
    });
    // Absent, the service would apply verified eq true anyway; berth says so.
    expect(buildSearchQuery(spec, 0, none)['verified']).toEqual({ eq: true });
    // Deleting it would change nothing: it is sent as "either".
    expect(buildSearchQuery(spec, 1, none)['verified']).toEqual({ in: [true, false] });
    const level2 = buildSearchQuery(spec, 2, none);
    expect(level2['rented']).toEqual({ in: [true, false] });
    expect(level2).not.toHaveProperty('gpu_ram');
    // rentable is berth's own fixed rule: never widened.
    const dropRentable = planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1 }), {
      ...runs,
      relax: [{ drop: ['rentable'] }],
    });
    expect(buildSearchQuery(dropRentable, 1, none)['rentable']).toEqual({ eq: true });
  });

  it('applies the relax ladder one step per level, in order', () => {
    expect(relaxStepCount(specJob)).toBe(2);
    const level1 = buildSearchQuery(specJob, 1, none);
    expect(level1['verified']).toEqual({ in: [true, false] });
    expect(level1['gpu_name']).toEqual({ eq: 'RTX 4090' });
    const level2 = buildSearchQuery(specJob, 2, none);
    expect(level2['verified']).toEqual({ in: [true, false] });
    expect(level2['gpu_name']).toEqual({ in: ['RTX 4090', 'RTX 3090', 'RTX A6000'] });
    expect(level2['gpu_ram']).toEqual({ gte: 24000 });
    expect(() => buildSearchQuery(specJob, 3, none)).toThrow(RangeError);
  });

  it('never relaxes the price cap or the port floor, whatever the ladder says', () => {
    // A configured default ladder is not checked like a spec's: the fixed rules still win.
    const spec = planRun(
      parseJobSpec({
        name: 'j',
        image: 'img',
        max_price_per_hour: 0.4,
        search: { filters: { direct_port_count: { gte: 3 }, rentable: { eq: false } } },
      }),
      { ...runs, relax: [{ drop: ['direct_port_count', 'rentable'], set: { dph_total: { lte: 99 } } }] },
    );
    expect(buildSearchQuery(spec, 0, none)).toMatchObject({
      dph_total: { lte: 0.4 },
      direct_port_count: { gte: 3 },
      rentable: { eq: true },
    });
    expect(buildSearchQuery(spec, 1, none)).toMatchObject({
      dph_total: { lte: 0.4 },
      direct_port_count: { gte: 1 },
      rentable: { eq: true },
    });
  });

  it('raises a port floor below 1 and keeps other bounds', () => {
    const spec = planRun(
      parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1, search: { filters: { direct_port_count: { gte: 0, lte: 8 } } } }),
      runs,
    );
    expect(buildSearchQuery(spec, 0, none)['direct_port_count']).toEqual({ gte: 1, lte: 8 });
  });

  it('excludes blocked offers and machines, merged with the user own exclusions', () => {
    const spec = planRun(
      parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1, search: { filters: { machine_id: { notin: [7] } } } }),
      runs,
    );
    const query = buildSearchQuery(spec, 1, { offerIds: [101, 102], machineIds: [7, 8] });
    expect(query['id']).toEqual({ notin: [101, 102] });
    expect(query['machine_id']).toEqual({ notin: [7, 8] });
    expect(buildSearchQuery(specJob, 0, none)).not.toHaveProperty('id');
  });

  it('does not change the spec it reads', () => {
    const before = structuredClone(specJob);
    buildSearchQuery(specJob, 2, { offerIds: [1], machineIds: [2] });
    expect(specJob).toEqual(before);
  });
});

describe('describeRelaxStep', () => {
  it('writes one line per step for the event log', () => {
    expect(describeRelaxStep({ drop: ['verified'] })).toBe('dropped filter verified');
    expect(describeRelaxStep({ drop: ['verified', 'gpu_ram'] })).toBe('dropped filters verified, gpu_ram');
    expect(describeRelaxStep({ set: { gpu_name: { in: ['RTX 4090', 'RTX 3090'] } } })).toBe('set gpu_name in [RTX 4090, RTX 3090]');
    expect(describeRelaxStep({ drop: ['verified'], set: { gpu_ram: { gte: 16000, lte: 48000 } } })).toBe(
      'dropped filter verified; set gpu_ram gte 16000 lte 48000',
    );
  });
});

describe('usableOffers', () => {
  const offer = (id: number, machine_id: number, dph_total: number, direct_port_count?: number): Offer => ({
    id,
    machine_id,
    gpu_name: 'RTX 4090',
    num_gpus: 1,
    gpu_ram: 24564,
    dph_total,
    ...(direct_port_count === undefined ? {} : { direct_port_count }),
  });

  it('drops over-priced, portless and blocked offers, keeping the order of the rest', () => {
    const offers = [
      offer(1, 10, 0.5, 4),
      offer(2, 20, 0.91, 4), // over the 0.9 cap
      offer(3, 30, 0.9, 2), // exactly at the cap: allowed
      offer(4, 40, 0.3, 0), // no direct port
      offer(5, 50, 0.3), // port count not stated
      offer(6, 60, 0.3, 1), // blocked offer
      offer(7, 70, 0.3, 1), // blocked machine
      offer(8, 80, 0.2, 1),
    ];
    const usable = usableOffers(offers, specJob, { offerIds: [6], machineIds: [70] });
    expect(usable.map((o) => o.id)).toEqual([1, 3, 8]);
  });

  it('checks the billed price, disk included, not a quote for a smaller disk (#14 item 2)', () => {
    // $0.15/h compute and $0.20/GB/month storage: quoted $0.157/h for 8 GB; a 4000 GB disk bills $1.25/h.
    const cheapQuote = { ...offer(1, 10, 0.157, 1), dph_base: 0.15, storage_cost: 0.2 };
    const big = planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 0.5, disk_gb: 4000 }), runs);
    expect(billedPricePerHour(cheapQuote, 4000)).toBeCloseTo(0.15 + (0.2 * 4000) / 720, 6);
    expect(usableOffers([cheapQuote], big, none)).toEqual([]);
    const small = planRun(parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 0.5, disk_gb: 8 }), runs);
    expect(usableOffers([cheapQuote], small, none)).toHaveLength(1);
  });

  it('takes the larger of the quote and base + disk, and trusts no offer without a usable price', () => {
    expect(billedPricePerHour({ ...offer(1, 1, 0.9, 1), dph_base: 0.1, storage_cost: 0.1 }, 10)).toBe(0.9);
    // Without storage_cost the disk part is what dph_total adds to dph_base (priced for this disk).
    expect(billedPricePerHour({ ...offer(1, 1, 0.5, 1), dph_base: 0.4 }, 100)).toBe(0.5);
    expect(billedPricePerHour({ ...offer(1, 1, Number.NaN, 1) }, 10)).toBeNull();
    expect(billedPricePerHour({ ...offer(1, 1, -1, 1) }, 10)).toBeNull();
    const noPrice = { ...offer(1, 10, 0.2, 1), dph_total: 'cheap' as unknown as number };
    expect(usableOffers([noPrice], specJob, none)).toEqual([]);
  });

  it('for a bid, the billed price is the bid plus the disk', () => {
    const o = { ...offer(1, 10, 0.05, 1), dph_base: 0.04, storage_cost: 0.36 };
    expect(billedPricePerHour(o, 100, 0.3)).toBeCloseTo(0.3 + 0.05, 6);
    // No storage_cost and no dph_base: the disk part is unknown, the offer is not trusted.
    expect(billedPricePerHour(offer(1, 10, 0.05, 1), 100, 0.3)).toBeNull();
    const bid = planRun(
      parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 0.32, disk_gb: 100, search: { type: 'bid' }, bid_price: 0.3 }),
      runs,
    );
    expect(usableOffers([o], bid, none)).toEqual([]);
  });

  it('for bid_price "min", the billed price is the offer\'s min_bid plus the disk; an offer without one is not tried', () => {
    const spec = planRun(
      parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 0.2, disk_gb: 100, search: { type: 'bid' }, bid_price: 'min' }),
      runs,
    );
    const cheap = { ...offer(1, 10, 0.5, 1), dph_base: 0.4, storage_cost: 0.36, min_bid: 0.1 };
    const dear = { ...offer(2, 20, 0.5, 1), dph_base: 0.4, storage_cost: 0.36, min_bid: 0.16 };
    const silent = { ...offer(3, 30, 0.5, 1), dph_base: 0.4, storage_cost: 0.36 };
    expect(billedPriceFor(cheap, spec)).toBeCloseTo(0.1 + 0.05, 6);
    expect(usableOffers([cheap, dear, silent], spec, none).map((o) => o.id)).toEqual([1]);
  });
});
