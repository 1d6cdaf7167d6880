// One malformed record among good ones, sent by the real simulator (its `malformed_record` fault):
// the client leaves out what it cannot use and keeps the rest of the answer (issue #18 item 5).
import { afterEach, describe, expect, it } from 'vitest';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { ClientEvent } from '../../../src/client/events.js';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import { testConfig } from '../../unit/client/fake-server.js';

let sim: RunningSimulator | undefined;
let client: MarketplaceClient | undefined;
let events: ClientEvent[] = [];

async function start(): Promise<{ sim: RunningSimulator; client: MarketplaceClient }> {
  sim = await startSimulator({ seed: 5, config: { admin: true, rate_limits: { enabled: false } } });
  events = [];
  client = createMarketClient({ baseUrl: sim.url, apiKey: sim.apiKey, config: testConfig(), onEvent: (e) => events.push(e) });
  return { sim, client };
}

afterEach(async () => {
  await client?.close();
  await sim?.close();
  sim = client = undefined;
});

const malformed = () => events.filter((e) => e.type === 'malformed_records');
const QUERY = { num_gpus: { eq: 1 }, order: [['dph_total', 'asc']] as Array<[string, 'asc' | 'desc']>, limit: 64 };

describe('one malformed record from the simulator', () => {
  it.each(['number_as_string', 'missing_field'] as const)('%s: a search keeps every offer but the broken one', async (kind) => {
    const { sim, client } = await start();
    const good = await client.searchOffers(QUERY);
    expect(good.length).toBeGreaterThan(10);
    sim.setFaults({ malformed_record: kind });
    const got = await client.searchOffers(QUERY);
    expect(got.map((o) => o.id)).toEqual(good.slice(1).map((o) => o.id));
    expect(malformed()).toMatchObject([{ op: 'search', group: 'search', dropped: 1, repaired: 0 }]);
  });

  it('an instance list keeps a record with an unreadable dph_total (set to null), and leaves out one without an id', async () => {
    const { sim, client } = await start();
    const offers = await client.searchOffers(QUERY);
    const made: number[] = [];
    for (const [i, o] of offers.slice(0, 3).entries()) {
      made.push((await client.createInstance(o.id, { image: 'ubuntu:22.04', disk: 10, label: `t:${i}` })).instanceId);
    }
    made.sort((a, b) => a - b);

    sim.setFaults({ malformed_record: 'number_as_string' });
    const listed = await client.listInstances();
    expect(listed.map((i) => i.id)).toEqual(made);
    expect(listed[0]!.dph_total).toBeNull();
    expect(listed[1]!.dph_total).toEqual(expect.any(Number));
    expect(await client.showInstance(made[1]!)).toMatchObject({ id: made[1], dph_total: null, label: 't:1' });
    expect(malformed()).toMatchObject([
      { op: 'list', repaired: 1, dropped: 0 },
      { op: 'show', repaired: 1, dropped: 0 },
    ]);

    events = [];
    sim.setFaults({ malformed_record: 'missing_field' });
    expect((await client.listInstances()).map((i) => i.id)).toEqual(made.slice(1));
    expect(malformed()).toMatchObject([{ op: 'list', dropped: 1, repaired: 0 }]);
    // A show answer whose one record has no id is the answer itself malformed.
    expect(await client.showInstance(made[0]!).catch((e: { code?: string }) => e.code)).toBe('bad_response');
  });
});
