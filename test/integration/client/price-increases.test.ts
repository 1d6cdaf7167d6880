// Pending price increases between the client and the simulator, in the shape the official CLI reads
// (vast-cli `vastai/api/price_increase.py`, `tests/api/test_price_increase.py`): the list with its
// envelope, accept and reject with a body of exactly {pending_price_increase_id}, a stale row 404
// no_pending_price_increase (the client: 'stale'), each call in its rate group.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClientEvent } from '../../../src/client/events.js';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import { testConfig } from '../../unit/client/fake-server.js';

let sim: RunningSimulator | undefined;
let client: MarketplaceClient | undefined;
afterEach(async () => {
  await client?.close();
  await sim?.close();
  client = sim = undefined;
});

describe('pending price increases', () => {
  it('lists them, accepts or rejects one by id (the new price applies on accept only), and answers a stale row 404', async () => {
    sim = await startSimulator({ seed: 7, config: { admin: true, rate_limits: { enabled: false } } });
    const events: ClientEvent[] = [];
    client = createMarketClient({ baseUrl: sim.url, apiKey: sim.apiKey, config: testConfig(), onEvent: (e) => events.push(e) });
    const offers = sim.offers().filter((o) => o.rentable && !o.rented);
    const a = await client.createInstance(offers[0]!.id, { image: 'x', disk: 16, label: 'a' });
    const b = await client.createInstance(offers[1]!.id, { image: 'x', disk: 16, label: 'b' });
    const price = (id: number) => sim!.history().find((h) => h.id === id)!.compute_dph;
    const [priceA, priceB] = [price(a.instanceId), price(b.instanceId)];
    expect(await client.pendingPriceIncreases()).toEqual({ rows: [], truncated: false, malformed: 0 });
    const rowA = sim.raisePrice(a.instanceId, 50)!;
    const rowB = sim.raisePrice(b.instanceId, 20)!;
    const listed = await client.pendingPriceIncreases();
    expect(listed.rows).toEqual([
      expect.objectContaining({
        pending_price_increase_id: rowA.pending_price_increase_id,
        contract_id: a.instanceId,
        old_disk_ram_costpersec: null,
      }),
      expect.objectContaining({ pending_price_increase_id: rowB.pending_price_increase_id, contract_id: b.instanceId }),
    ]);
    expect(listed.rows[0]!.new_gpu_costpersec! * 3600).toBeCloseTo(priceA * 1.5, 6);
    expect(listed.rows[0]!.old_gpu_costpersec! * 3600).toBeCloseTo(priceA, 6);

    expect(await client.answerPriceIncrease(rowA.pending_price_increase_id, 'reject')).toBe('done');
    expect(await client.answerPriceIncrease(rowB.pending_price_increase_id, 'accept')).toBe('done');
    expect(price(a.instanceId)).toBe(priceA);
    expect(price(b.instanceId)).toBeCloseTo(priceB * 1.2, 6);
    expect((await client.pendingPriceIncreases()).rows).toEqual([]);
    // Answered already: stale, either way.
    expect(await client.answerPriceIncrease(rowA.pending_price_increase_id, 'accept')).toBe('stale');
    expect(await client.answerPriceIncrease(rowB.pending_price_increase_id, 'reject')).toBe('stale');
    expect(price(a.instanceId)).toBe(priceA);
    // Rate groups: the list with the account's other calls, the answers with instance changes.
    const groups = new Set(events.filter((e) => e.type === 'response').map((e) => `${e.op}:${e.group}`));
    expect([...groups].filter((g) => g.startsWith('price_increase')).sort()).toEqual([
      'price_increase_accept:change',
      'price_increase_reject:change',
      'price_increases:other',
    ]);
  });

  it('the simulator takes exactly {pending_price_increase_id}: another key is 400, an unknown id 404 no_pending_price_increase', async () => {
    sim = await startSimulator({ seed: 7, config: { admin: true, rate_limits: { enabled: false } } });
    const offer = sim.offers().find((o) => o.rentable && !o.rented)!;
    const put = async (path: string, body: unknown) => {
      const res = await request(`${sim!.url}${path}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${sim!.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
    };
    const id = (await put(`/api/v0/asks/${offer.id}/`, { image: 'x' })).body['new_contract'] as number;
    const row = sim.raisePrice(id, 10)!;
    const pid = row.pending_price_increase_id;
    expect((await put('/api/v0/instances/accept-price-increase/', { pending_price_increase_id: pid, instance_id: id })).status).toBe(400);
    expect((await put('/api/v0/instances/accept-price-increase/', { pending_price_increase_id: String(pid) })).status).toBe(400);
    expect(await put('/api/v0/instances/reject-price-increase/', { pending_price_increase_id: pid + 1 })).toMatchObject({
      status: 404,
      body: { success: false, error: 'no_pending_price_increase' },
    });
    expect(await put('/api/v0/instances/reject-price-increase/', { pending_price_increase_id: pid })).toEqual({
      status: 200,
      body: { success: true, pending_price_increase_id: pid, contract_id: id },
    });
  });

  it('an increase left unanswered applies at its cutover (the scenario a host whose raise goes through anyway)', async () => {
    sim = await startSimulator({ seed: 7, config: { admin: true, rate_limits: { enabled: false }, time_scale: 100, tick_ms: 10 } });
    const offer = sim.offers().find((o) => o.rentable && !o.rented)!;
    const res = await request(`${sim.url}/api/v0/asks/${offer.id}/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${sim.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'x' }),
    });
    const id = ((await res.body.json()) as { new_contract: number }).new_contract;
    const before = sim.history().find((h) => h.id === id)!.compute_dph;
    sim.raisePrice(id, 100, 10);
    const until = Date.now() + 5000;
    while (Date.now() < until && sim.history().find((h) => h.id === id)!.compute_dph === before)
      await new Promise((r) => setTimeout(r, 20));
    expect(sim.history().find((h) => h.id === id)!.compute_dph).toBeCloseTo(before * 2, 6);
    expect(sim.instances().find((i) => i.id === id)!.dph_total).toBeGreaterThan(before * 2 - 1e-9);
  });
});
