// A run that finds nothing to rent says what excluded the offers: a cap below the cheapest offer
// names how many offers match, the cheapest (its billed price, with its disk) and the cap, each
// checked against the simulator's own catalog; a spec no machine fits says so. They used to end with
// the same sentence ("No usable offer matched the spec ... Tried: no offer was tried"); a spec whose
// filters match nothing at any price names the filter that excluded the most. On the simulator.
import { afterEach, describe, expect, it } from 'vitest';
import type { Offer } from '../../../src/client/types.js';
import { loadConfig } from '../../../src/config/load.js';
import { uncappedQuery } from '../../../src/job-spec/no-offers-why.js';
import { planRun } from '../../../src/job-spec/run-plan.js';
import { billedPriceFor } from '../../../src/job-spec/search-query.js';
import { parseJobSpec } from '../../../src/job-spec/validate.js';
import { isEnded, jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('no usable offer: the reason', () => {
  it('a cap below the cheapest offer: how many offers match, the cheapest price with its disk, and the cap', async () => {
    world = await startWorld();
    const spec = jobSpec({ max_price_per_hour: 0.01 });
    const run = await submit(world, spec);
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.state).toBe('failed');
    expect(failed.error?.kind).toBe('no_offers');
    // Each part of the reason, against the catalog: the offers the filters match without the cap
    // (as many as the explanation reads, 64), and the cheapest of them as it would be billed.
    const resolved = planRun(parseJobSpec(spec), loadConfig({}, {}).config.runs);
    const res = await fetch(`${world.sim.url}/api/v0/bundles/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${world.sim.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(uncappedQuery(resolved, 0, { offerIds: [], machineIds: [] })),
    });
    const { offers } = (await res.json()) as { offers: Offer[] };
    const count = offers.length >= 64 ? `at least ${offers.length} offers match` : `${offers.length} offers match`;
    const cheapest = Math.min(...offers.map((o) => billedPriceFor(o, resolved)!));
    expect(cheapest).toBeGreaterThan(0.01);
    const price = cheapest.toFixed(3).endsWith('0') ? cheapest.toFixed(2) : cheapest.toFixed(3);
    expect(failed.error?.message).toMatch(
      new RegExp(
        `^No usable offer matched the spec after 0 of 0 relax steps: ${count} the filters; the cheapest costs \\$${price.replace('.', '\\.')}/h with 20 GB of disk, above max_price_per_hour \\(\\$0\\.01\\)\\.`,
      ),
    );
    expect(world.sim.history()).toEqual([]);
  });

  it('a spec no machine fits says no offer matches the filters, whatever its price', async () => {
    world = await startWorld();
    const run = await submit(world, jobSpec({ search: { filters: { num_gpus: { eq: 64 } } }, max_price_per_hour: 1000 }));
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.error?.kind).toBe('no_offers');
    expect(failed.error?.message).toMatch(
      /: no offer matches the filters, whatever its price; of the \d+ (cheapest )?rentable offers, num_gpus \(eq 64\) excludes \d+, the most\. Tried:/,
    );
  });

  it('a GPU name no machine has is named as the filter that excluded the most (issue #41)', async () => {
    world = await startWorld();
    const spec = jobSpec({ search: { filters: { gpu_name: { eq: 'RTX 4900' }, num_gpus: { eq: 1 } } }, max_price_per_hour: 1000 });
    const run = await submit(world, spec);
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.error?.kind).toBe('no_offers');
    const m = /of the (\d+) (?:cheapest )?rentable offers, gpu_name \(eq RTX 4900\) excludes (\d+), the most\. Tried:/.exec(
      failed.error!.message,
    );
    expect(m, failed.error!.message).not.toBeNull();
    // No offer of the market is an RTX 4900: the filter excludes every one searched.
    expect(m![2]).toBe(m![1]);
    expect(world.sim.history()).toEqual([]);
  });
});
