import { describe, expect, it } from 'vitest';
import { MONEY_TOLERANCE_USD as TOL, overCap, reachedBudget } from '../../src/money-rules.js';
import { billedPricePerHour } from '../../src/job-spec/search-query.js';
import type { Offer } from '../../src/client/types.js';

/** An offer stating its prices: `storage_cost` is $/GB/month. */
const offer = (dph_total: number, dph_base: number, storage_cost: number): Offer => ({
  id: 1,
  machine_id: 1,
  gpu_name: 'RTX 4090',
  num_gpus: 1,
  gpu_ram: 24564,
  dph_total,
  dph_base,
  storage_cost,
});

describe('overCap', () => {
  it('counts a price equal to the cap as within it', () => {
    expect(overCap(0.3, 0.3)).toBe(false);
  });

  it('counts a price less than the tolerance above the cap as within it', () => {
    expect(overCap(0.3 + TOL / 2, 0.3)).toBe(false);
  });

  it('counts a price more than the tolerance above the cap as over it', () => {
    expect(overCap(0.3 + 2 * TOL, 0.3)).toBe(true);
  });

  it('holds dollars to a dollar cap the same way', () => {
    expect(overCap(24, 24)).toBe(false);
    expect(overCap(24 + TOL / 2, 24)).toBe(false);
    expect(overCap(24 + 2 * TOL, 24)).toBe(true);
  });

  it('keeps a disk-inclusive price that lands on the cap in float within it', () => {
    // A bid of $0.10/h and 10 GB at $14.40/GB/month ($0.20/h): 0.30000000000000004 in float.
    const billed = billedPricePerHour(offer(0.31, 0.3, 14.4), 10, 0.1)!;
    expect(billed).toBeGreaterThan(0.3);
    expect(overCap(billed, 0.3)).toBe(false);
    expect(overCap(billed, 0.3 - 2 * TOL)).toBe(true);
  });

  it("keeps an instance listed at the service's full-float price within a cap written to 6 decimals", () => {
    // show_instance.yaml: dph_base 1.0, storage_cost 0.14933333333333335 for 10 GB, dph_total 1.0020740740740741.
    const listed = billedPricePerHour(offer(1.002074, 1, 0.14933333333333335), 10)!;
    expect(listed).toBeCloseTo(1.0020740740740741, 15);
    expect(overCap(listed, 1.002074)).toBe(false);
    expect(overCap(listed, 1.002072)).toBe(true);
  });
});

describe('reachedBudget', () => {
  it('counts a spend equal to the budget as reached', () => {
    expect(reachedBudget(5, 5)).toBe(true);
  });

  it('counts a spend less than the tolerance short of the budget as reached', () => {
    expect(reachedBudget(5 - TOL / 2, 5)).toBe(true);
  });

  it('counts a spend more than the tolerance short of the budget as not reached', () => {
    expect(reachedBudget(5 - 2 * TOL, 5)).toBe(false);
  });

  it('counts a spend past the budget as reached', () => {
    expect(reachedBudget(5.01, 5)).toBe(true);
  });
});
