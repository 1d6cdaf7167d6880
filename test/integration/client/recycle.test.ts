// recycleInstance and updateInstance against the real simulator over HTTP: the fresh container
// they ask for, a 200 `success: false` read as a failure, `invalid_id`/`not_found` as NotFoundError
// (both of recycle's forms: the preview spec's 200 and the yaml's 400), transient faults retried,
// and each call paced by its own group at the documented spacing (the simulator's 429s judge).
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator, type SimConfigInput } from '../../../src/sim/index.js';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { ClientEvent } from '../../../src/client/events.js';
import { NotFoundError, ServiceHttpError } from '../../../src/errors.js';
import { testConfig } from '../../unit/client/fake-server.js';

let sim: RunningSimulator | undefined;
const clients: MarketplaceClient[] = [];

async function start(config: SimConfigInput = {}): Promise<RunningSimulator> {
  sim = await startSimulator({
    seed: 7,
    timeScale: 1000,
    config: { admin: true, lifecycle: { provision_s: 1, boot_s: { min: 20, max: 20 }, recycle_s: 100 }, ...config },
  });
  return sim;
}

function client(s: RunningSimulator, config = testConfig(), events?: ClientEvent[]): MarketplaceClient {
  const c = createMarketClient({ baseUrl: s.url, apiKey: s.apiKey, config, onEvent: (e) => events?.push(e) });
  clients.push(c);
  return c;
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await sim?.close();
  sim = undefined;
});

async function rented(c: MarketplaceClient, env: Record<string, string> = {}): Promise<number> {
  const [offer] = await c.searchOffers({ limit: 1 });
  return (await c.createInstance(offer!.id, { image: 'pytorch/pytorch:latest', disk: 16, label: 'berth:t:recycle:1', env })).instanceId;
}

const statusesOf = (s: RunningSimulator, id: number) =>
  s
    .history()
    .find((h) => h.id === id)!
    .statuses.map((x) => x.status);
const noLimits: SimConfigInput = { rate_limits: { enabled: false } };

describe('recycleInstance and updateInstance against the simulator', () => {
  it('recycleInstance resolves and the instance goes recycling; updateInstance with recycle changes its image', async () => {
    const s = await start(noLimits);
    const c = client(s);
    const id = await rented(c);
    await c.recycleInstance(id);
    expect((await c.showInstance(id))?.actual_status).toBe('recycling');
    await c.updateInstance(id, { image: 'other/image:2', onstart: 'echo hi', env: { A: 'b' }, args: '--x', disk: 16, recycle: true });
    expect(s.history().find((h) => h.id === id)!.image).toBe('other/image:2');
    expect(statusesOf(s, id).filter((x) => x === 'recycling')).toHaveLength(2);
  });

  it('a missing instance is NotFoundError: recycle answered 200 invalid_id (preview), 400 invalid_id (yaml); update 404 not_found', async () => {
    for (const status of [200, 400] as const) {
      const s = await start({ ...noLimits, quirks: { recycle_refused_status: status } });
      const c = client(s);
      const err = await c.recycleInstance(1).catch((e: unknown) => e);
      expect(err, String(status)).toBeInstanceOf(NotFoundError);
      expect((err as NotFoundError).serviceCode).toBe('invalid_id');
      await expect(c.updateInstance(1, { image: 'x' })).rejects.toBeInstanceOf(NotFoundError);
      await Promise.all(clients.splice(0).map((x) => x.close()));
      await s.close();
      sim = undefined;
    }
  });

  it('a 200 success: false is a typed failure, sent once (not retried)', async () => {
    const s = await start(noLimits);
    const c = client(s);
    const id = await rented(c);
    s.setFaults({ unsuccessful_200_rate: 1 });
    for (const run of [() => c.recycleInstance(id), () => c.updateInstance(id, { image: 'x', recycle: true })]) {
      const err = await run().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServiceHttpError);
      expect(err).not.toBeInstanceOf(NotFoundError);
      expect((err as ServiceHttpError).code).toBe('unsuccessful');
    }
    expect(s.stats().requests['PUT /api/v0/instances/recycle/{id}/']).toBe(1);
    expect(s.stats().requests['PUT /api/v0/instances/update_template/{id}/']).toBe(1);
    // A refusal of the recycle part (a stopped instance) is a failure too.
    s.setFaults({ unsuccessful_200_rate: 0 });
    await c.setInstanceState(id, 'stopped');
    await expect(c.updateInstance(id, { image: 'y', recycle: true })).rejects.toMatchObject({ code: 'unsuccessful' });
    await expect(c.recycleInstance(id)).rejects.toMatchObject({ code: 'unsuccessful' });
  });

  it('a 5xx is retried until the recycle is done', async () => {
    const s = await start(noLimits);
    const c = client(s);
    const id = await rented(c);
    s.setFaults({ error_5xx_rate: 0.6 });
    await c.recycleInstance(id);
    s.setFaults({ error_5xx_rate: 0 });
    expect(statusesOf(s, id)).toContain('recycling');
  });

  it("each call keeps to its endpoint's limit with the default spacing: no 429 from the simulator's documented limits", async () => {
    const s = await start({ rate_limits: { enabled: true, groups: { search: null, create: null } } });
    const events: ClientEvent[] = [];
    const defaults = testConfig({ rate: { recycle: { per_s: 0.9, burst: 1 }, update: { per_s: 0.45, burst: 1 } } });
    const c = client(s, defaults, events);
    const id = await rented(c);
    const t0 = Date.now();
    await Promise.all([
      c.recycleInstance(id),
      c.recycleInstance(id),
      c.updateInstance(id, { onstart: 'a' }),
      c.updateInstance(id, { onstart: 'b' }),
    ]);
    const took = Date.now() - t0;
    expect(s.stats().rate_limited['PUT /api/v0/instances/recycle/{id}/'] ?? 0).toBe(0);
    expect(s.stats().rate_limited['PUT /api/v0/instances/update_template/{id}/'] ?? 0).toBe(0);
    expect(events.filter((e) => e.type === 'rate_limited')).toEqual([]);
    // The second update waited out update's 2.2 s; the recycles their 1.1 s, meanwhile.
    expect(took).toBeGreaterThanOrEqual(2000);
    expect(took).toBeLessThan(4000);
  });
});
