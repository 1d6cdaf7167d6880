import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Offer } from '../../../src/client/types.js';
import type { Config } from '../../../src/config/schema.js';
import { buildSearchQuery, describeRelaxStep, relaxStepCount, usableOffers } from '../../../src/job-spec/search-query.js';
import { parseJobSpec, parseJobSpecText, resolveJobSpec } from '../../../src/job-spec/validate.js';

const runs: Config['runs'] = {
  max_attempts: 8,
  boot_timeout_s: 600,
  deadline_s: 7200,
  destroy_retry_max_delay_s: 60,
  outage_backoff_s: 30,
  machine_quarantine_s: 900,
  gone_offers_per_search: 3,
  relax: [{ drop: ['verified'] }],
};
const none = { offerIds: [], machineIds: [] };
const specJob = resolveJobSpec(
  parseJobSpecText(readFileSync(new URL('../../../examples/job.json', import.meta.url), 'utf8')),
  runs,
);

describe('buildSearchQuery', () => {
  it('sends the filters as written at relax level 0, plus the fixed rules', () => {
    expect(buildSearchQuery(specJob, 0, none)).toEqual({
      gpu_name: { eq: 'RTX 4090' },
      num_gpus: { eq: 1 },
      gpu_ram: { gte: 24000 },
      verified: { eq: true },
      direct_port_count: { gte: 1 },
      dph_total: { lte: 0.9 },
      rentable: { eq: true },
      order: [['dlperf_per_dphtotal', 'desc']],
      type: 'on-demand',
      limit: 64,
    });
  });

  it('applies the relax ladder one step per level, in order', () => {
    expect(relaxStepCount(specJob)).toBe(2);
    const level1 = buildSearchQuery(specJob, 1, none);
    expect(level1).not.toHaveProperty('verified');
    expect(level1['gpu_name']).toEqual({ eq: 'RTX 4090' });
    const level2 = buildSearchQuery(specJob, 2, none);
    expect(level2).not.toHaveProperty('verified');
    expect(level2['gpu_name']).toEqual({ in: ['RTX 4090', 'RTX 3090', 'RTX A6000'] });
    expect(level2['gpu_ram']).toEqual({ gte: 24000 });
    expect(() => buildSearchQuery(specJob, 3, none)).toThrow(RangeError);
  });

  it('never relaxes the price cap or the port floor, whatever the ladder says', () => {
    // A configured default ladder is not checked like a spec's: the fixed rules still win.
    const spec = resolveJobSpec(
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
    const spec = resolveJobSpec(
      parseJobSpec({ name: 'j', image: 'img', max_price_per_hour: 1, search: { filters: { direct_port_count: { gte: 0, lte: 8 } } } }),
      runs,
    );
    expect(buildSearchQuery(spec, 0, none)['direct_port_count']).toEqual({ gte: 1, lte: 8 });
  });

  it('excludes blocked offers and machines, merged with the user own exclusions', () => {
    const spec = resolveJobSpec(
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
    expect(describeRelaxStep({ set: { gpu_name: { in: ['RTX 4090', 'RTX 3090'] } } })).toBe(
      'set gpu_name in [RTX 4090, RTX 3090]',
    );
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
});
