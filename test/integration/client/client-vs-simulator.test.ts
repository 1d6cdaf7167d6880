// The client against the real simulator (src/sim): rate limits, injected faults, auth failures,
// ambiguous creates and the v1 instance list, checked from the simulator's own request counts.
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type RunningSimulator, type SimConfigInput } from '../../../src/sim/index.js';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { ClientEvent } from '../../../src/client/events.js';
import { AmbiguousCreateError, AuthError, OfferGoneError, PermissionError } from '../../../src/errors.js';
import { testConfig } from '../../unit/client/fake-server.js';

const READ_ONLY_KEY = 'read-only-key-0123456789';
let sim: RunningSimulator | undefined;
const clients: MarketplaceClient[] = [];

async function start(config: SimConfigInput = {}): Promise<RunningSimulator> {
  sim = await startSimulator({
    seed: 7,
    config: { admin: true, keys: [{ key: READ_ONLY_KEY, permissions: { api: { user_read: {}, instance_read: {} } } }], ...config },
  });
  return sim;
}

function client(
  s: RunningSimulator,
  opts: { apiKey?: string; config?: ReturnType<typeof testConfig>; events?: ClientEvent[] } = {},
): MarketplaceClient {
  const c = createMarketClient({
    baseUrl: s.url,
    apiKey: opts.apiKey ?? s.apiKey,
    config: opts.config ?? testConfig(),
    onEvent: (e) => opts.events?.push(e),
  });
  clients.push(c);
  return c;
}

const request = (label: string) => ({ image: 'pytorch/pytorch:latest', disk: 16, label, env: { HF_TOKEN: 'hf_secret_value' } });

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await sim?.close();
  sim = undefined;
});

describe('client against the simulator', () => {
  it('a burst of 200 calls under a tight limit all succeed without exceeding the rate', async () => {
    const perS = 50;
    const burst = 5;
    const s = await start({ rate_limits: { groups: { show: { per_s: perS, burst: 10 } } } });
    const c = client(s, { config: testConfig({ rate: { show: { per_s: perS, burst } }, retry: { max_delay_s: 1 } }) });
    const [offer] = await c.searchOffers({ limit: 1 });
    const { instanceId } = await c.createInstance(offer!.id, request('berth:t:burst:1'));

    const shown = await Promise.all(Array.from({ length: 200 }, () => c.showInstance(instanceId)));

    expect(shown.every((i) => i?.id === instanceId)).toBe(true);
    // The simulator's own limit (the same rate, a larger burst) is the judge, not a stopwatch: a
    // client that sent faster than per_s would have been answered 429 for all it sent above it.
    const received = s.stats().requests['GET /api/v0/instances/{id}/'] ?? 0;
    const rejected = s.stats().rate_limited['GET /api/v0/instances/{id}/'] ?? 0;
    expect(rejected).toBeLessThanOrEqual(2);
    expect(received).toBe(200 + rejected);
    console.log(`burst of 200 shows: ${received} requests received, ${rejected} answered 429`);
  }, 20_000);

  it('a client limit set above the service limit recovers through 429 pauses of that group only', async () => {
    // A service limit of 1/s: a 429 pauses the list group for a second or more.
    const s = await start({ rate_limits: { groups: { list_v1: { per_s: 1, burst: 1 } } } });
    const events: ClientEvent[] = [];
    const c = client(s, { events, config: testConfig({ rate: { list: { per_s: 50, burst: 5 } }, retry: { max_delay_s: 2 } }) });
    const lists = Promise.all(Array.from({ length: 3 }, () => c.listInstances()));
    // While the list group is paused, another group still goes through: its answer comes between
    // the list group's pause and its resume (an order, not a duration).
    await expect.poll(() => events.some((e) => e.type === 'rate_limited' && e.group === 'list')).toBe(true);
    await c.currentUser();
    const answeredAt = events.length;
    expect(await lists).toHaveLength(3);
    const listPauses = (es: ClientEvent[]) =>
      es.filter((e) => (e.type === 'rate_limited' || e.type === 'resumed') && e.group === 'list').map((e) => e.type);
    expect(listPauses(events.slice(0, answeredAt)).at(-1)).toBe('rate_limited');
    expect(listPauses(events.slice(answeredAt))).toContain('resumed');

    const rejected = s.stats().rate_limited['GET /api/v1/instances/'] ?? 0;
    expect(rejected).toBeGreaterThan(0);
    expect(c.stats().rateLimited).toBe(rejected);
    expect(c.stats().groups.list.rateLimited).toBe(rejected);
    expect(new Set(events.filter((e) => e.type === 'rate_limited').map((e) => (e as { group: string }).group))).toEqual(new Set(['list']));
    console.log(`over-limit lists: ${rejected} answered 429, ${c.stats().groups.list.pauses} pauses`);
  });

  it('retries injected 5xx and dropped connections to success', async () => {
    // Rate limits off: this test counts fault retries only.
    const s = await start({ rate_limits: { enabled: false } });
    const events: ClientEvent[] = [];
    const c = client(s, { events });
    s.setFaults({ error_5xx_rate: 0.3, drop_rate: 0.2 });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? c.currentUser().then((u) => u.id) : c.listInstances().then((l) => l.length))),
    );
    expect(results).toHaveLength(40);
    const st = s.stats();
    expect(st.injected_5xx).toBeGreaterThan(0);
    expect(st.drops).toBeGreaterThan(0);
    // One retry for each injected fault, no more.
    expect(c.stats().retries).toBe(st.injected_5xx + st.drops);
    expect(events.filter((e) => e.type === 'retry')).toHaveLength(st.injected_5xx + st.drops);
  });

  it('retries a create refused with 503, reports a 500 or 502 as ambiguous, and never makes two instances per label', async () => {
    const s = await start({ rate_limits: { enabled: false } });
    const c = client(s);
    const offers = await c.searchOffers({ limit: 10 });
    s.setFaults({ error_5xx_rate: 0.4 });
    const labels = offers.map((_, i) => `berth:t:5xx:${i}`);
    const results = await Promise.allSettled(offers.map((o, i) => c.createInstance(o.id, request(labels[i]!))));
    expect(s.stats().injected_5xx).toBeGreaterThan(0);
    results.forEach((r, i) => {
      const made = s.history().filter((h) => h.label === labels[i]);
      if (r.status === 'fulfilled') {
        expect(made).toHaveLength(1);
      } else {
        // The simulator's 5xx acts on nothing: the caller's label lookup will find no instance.
        expect(r.reason).toBeInstanceOf(AmbiguousCreateError);
        expect(made).toHaveLength(0);
      }
    });
  });

  it('fails at once on 401 with a clear message and no retries', async () => {
    const s = await start();
    const c = client(s, { apiKey: 'not-a-valid-key-000000' });
    const err = await c.listInstances().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect((err as Error).message).toMatch(/BERTH_API_KEY/);
    expect(s.stats().requests['GET /api/v1/instances/']).toBe(1);
    expect(c.stats().retries).toBe(0);
  });

  it('fails at once on 403 naming the missing permission, with no retries', async () => {
    const s = await start();
    const c = client(s, { apiKey: READ_ONLY_KEY });
    expect(await c.listInstances()).toEqual([]);
    const err = await c.destroyInstance(12345).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermissionError);
    expect((err as PermissionError).category).toBe('instance_write');
    expect(s.stats().requests['DELETE /api/v0/instances/{id}/']).toBe(1);
  });

  it('reports an ambiguous create as such and does not repeat it', async () => {
    const s = await start();
    const events: ClientEvent[] = [];
    const c = client(s, { events });
    const [offer] = await c.searchOffers({ limit: 1 });
    s.setFaults({ ambiguous_create_rate: 1 });
    const label = 'berth:t:ambiguous:1';
    const err = await c.createInstance(offer!.id, request(label)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousCreateError);
    expect(err).toMatchObject({ offerId: offer!.id, label });
    expect(s.stats().creates_received).toBe(1);
    expect(s.stats().creates_by_label[label]).toBe(1);
    expect(events.filter((e) => e.type === 'ambiguous_create')).toHaveLength(1);
    // The caller's next step: look for the label. Here the create did go through.
    s.setFaults({ ambiguous_create_rate: 0 });
    expect((await c.listInstances()).filter((i) => i.label === label)).toHaveLength(1);
  });

  it('a taken offer is OfferGoneError, not retried', async () => {
    const s = await start();
    const c = client(s);
    const [offer] = await c.searchOffers({ limit: 1 });
    s.setFaults({ offer_taken_rate: 1 });
    await expect(c.createInstance(offer!.id, request('berth:t:taken:1'))).rejects.toBeInstanceOf(OfferGoneError);
    expect(s.stats().creates_received).toBe(1);
  });

  it('lists every instance across v1 pages, never calling the undocumented v0 list', async () => {
    const s = await start({ rate_limits: { enabled: false } });
    const c = client(s);
    const offers = await c.searchOffers({ limit: 60 });
    expect(offers.length).toBe(60);
    const created = await Promise.all(offers.map((o, i) => c.createInstance(o.id, request(`berth:t:v1:${i}`))));

    const listed = await c.listInstances();
    expect(listed).toHaveLength(60);
    expect(new Set(listed.map((i) => i.id))).toEqual(new Set(created.map((x) => x.instanceId)));
    expect(s.stats().requests['GET /api/v1/instances/']).toBe(3); // 25 + 25 + 10
    expect(s.stats().requests['GET /api/v0/instances/']).toBeUndefined();
    // Only the columns berth reads: no env value travels back.
    expect(listed.every((i) => !('extra_env' in i))).toBe(true);
  });

  it('filters by id and by label on the service side', async () => {
    const s = await start({ rate_limits: { enabled: false } });
    const c = client(s);
    const offers = await c.searchOffers({ limit: 5 });
    const created = await Promise.all(offers.map((o, i) => c.createInstance(o.id, request(`berth:t:f:${i}`))));
    const ids = created.map((x) => x.instanceId);
    const byId = await c.listInstancePage({ filters: { id: { in: [ids[1], ids[3], 1] } } });
    expect(byId.instances.map((i) => i.id)).toEqual([ids[1], ids[3]]);
    expect(byId.nextToken).toBeNull();
    const byLabel = await c.listInstances({ label: { in: ['berth:t:f:4', 'berth:t:none:1'] } });
    expect(byLabel.map((i) => i.id)).toEqual([ids[4]]);
  });
});
