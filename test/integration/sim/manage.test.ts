// Manage, reboot, change bid and destroy with the bodies their yamls document
// (manage/stop/start/label_instance, reboot_instance, change_bid, destroy_instance), and the official
// client's bulk destroy (vast-cli `vastai/api/instances.py`).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim, statusOf, waitFor } from './helpers.js';

// Sim seconds at 1000×: a reboot lasts 0.3 wall s, long enough to be seen.
const fast = { provision_s: 2, boot_s: { min: 20, max: 20 }, restart_s: 5, reboot_s: 300 };
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim({ config: { lifecycle: fast } });
});
const others: RunningSimulator[] = [];
afterAll(() => Promise.all([sim.close(), ...others.map((s) => s.close())]));

const running = (s: RunningSimulator, id: number) =>
  waitFor(async () => ((await statusOf(s, id)) === 'running' ? true : undefined), 3000, 'running');

describe('manage', () => {
  test('stop answers {success}; start and label answer {success, msg}', async () => {
    const { instanceId: id } = await rent(sim);
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' })).body).toEqual({ success: true });
    expect(await statusOf(sim, id)).toBe('stopped');
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' })).body).toEqual({
      success: true,
      msg: `starting instance ${id}.`,
    });
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { label: 'My job' })).body).toEqual({
      success: true,
      msg: `label for ${id} set to 'My job'.`,
    });
    expect((await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances.label).toBe('My job');
  });

  test('labels up to 1024 characters; longer is label_too_long; bad state and empty bodies are invalid_args', async () => {
    const { instanceId: id } = await rent(sim);
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { label: 'x'.repeat(1024) })).status).toBe(200);
    const long = await call(sim, 'PUT', `/api/v0/instances/${id}/`, { label: 'x'.repeat(1025) });
    expect(long.status).toBe(400);
    expect(long.body).toEqual({
      success: false,
      error: 'label_too_long',
      msg: 'Please limit label length to 1024 characters, ideally less than 128.',
    });
    for (const body of [{ state: 'paused' }, {}, { label: 7 }]) {
      const r = await call(sim, 'PUT', `/api/v0/instances/${id}/`, body);
      expect([r.status, r.body.error], JSON.stringify(body)).toEqual([400, 'invalid_args']);
    }
  });

  test('unknown ids: manage 404 no_such_instance, destroy 404 not_found "Instance not found"', async () => {
    expect(await call(sim, 'PUT', '/api/v0/instances/1/', { state: 'stopped' })).toMatchObject({
      status: 404,
      body: { success: false, error: 'no_such_instance', msg: 'Instance 1 not found.' },
    });
    expect(await call(sim, 'DELETE', '/api/v0/instances/1/')).toMatchObject({
      status: 404,
      body: { success: false, error: 'not_found', msg: 'Instance not found' },
    });
  });

  test('destroy answers {success, msg}', async () => {
    const { instanceId: id } = await rent(sim);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${id}/`)).body).toEqual({ success: true, msg: 'Instance destroyed successfully' });
  });

  test('a destroy of an instance already destroyed is the stricter of the documented answers: 400 invalid_args "invalid instance_id"', async () => {
    const { instanceId: id } = await rent(sim);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${id}/`)).status).toBe(200);
    expect(await call(sim, 'DELETE', `/api/v0/instances/${id}/`)).toMatchObject({
      status: 400,
      body: { success: false, error: 'invalid_args', msg: 'invalid instance_id' },
    });
  });

  test('starting without credit is missing_billing', async () => {
    const broke = await startTestSim({ config: { account: { credit: 0 } } });
    others.push(broke);
    const { instanceId: id } = await rent(broke);
    await call(broke, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    expect((await call(broke, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' })).body).toMatchObject({
      success: false,
      error: 'missing_billing',
    });
  });
});

describe('bulk destroy (vast-cli destroy_instance with a list: DELETE /instances/ {instance_ids}; no yaml, the strictest reading)', () => {
  const bulk = (body: unknown, key?: string) => call(sim, 'DELETE', '/api/v0/instances/', body, key);

  test('destroys every id as the single destroy does: history, billing stopped, gone from the list; answers {success, msg}', async () => {
    const ids = [(await rent(sim)).instanceId, (await rent(sim)).instanceId, (await rent(sim)).instanceId];
    const r = await bulk({ instance_ids: ids });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, msg: expect.any(String) });
    const history = sim.history().filter((h) => ids.includes(h.id));
    expect(history.map((h) => h.destroyed_at !== null)).toEqual([true, true, true]);
    const billing = sim.ledger().billing_now;
    expect(ids.filter((id) => billing.includes(id))).toEqual([]);
    const listed = (await call(sim, 'GET', '/api/v1/instances/')).body.instances.map((i: { id: number }) => i.id);
    expect(ids.filter((id) => listed.includes(id))).toEqual([]);
    expect(sim.stats().requests['DELETE /api/v0/instances/']).toBeGreaterThanOrEqual(1);
  });

  test('all or nothing: one id that is not a live instance of the caller is 404 not_found and destroys none', async () => {
    const live = (await rent(sim)).instanceId;
    const done = (await rent(sim)).instanceId;
    expect((await call(sim, 'DELETE', `/api/v0/instances/${done}/`)).status).toBe(200);
    for (const ids of [
      [live, 999_999],
      [live, done],
    ]) {
      expect(await bulk({ instance_ids: ids })).toMatchObject({
        status: 404,
        body: { success: false, error: 'not_found', msg: 'Instance not found' },
      });
    }
    expect(sim.history().find((h) => h.id === live)!.destroyed_at).toBeNull();
    expect(sim.ledger().billing_now).toContain(live);
  });

  test('1 to 64 distinct integer ids, else 400 invalid_args, nothing destroyed', async () => {
    const live = (await rent(sim)).instanceId;
    const tooMany = [live, ...Array.from({ length: 64 }, (_, i) => 900_000 + i)];
    for (const body of [
      {},
      { instance_ids: [] },
      { instance_ids: tooMany },
      { instance_ids: [String(live)] },
      { instance_ids: [live, live] },
      { instance_ids: live },
    ]) {
      const r = await bulk(body);
      expect([r.status, r.body.error], JSON.stringify(body).slice(0, 60)).toEqual([400, 'invalid_args']);
    }
    expect(sim.history().find((h) => h.id === live)!.destroyed_at).toBeNull();
  });

  test("an instance's own key may not use it, even for its own instance", async () => {
    const { instanceId, instanceKey } = await rent(sim);
    expect((await bulk({ instance_ids: [instanceId] }, instanceKey)).status).toBe(403);
    expect(sim.history().find((h) => h.id === instanceId)!.destroyed_at).toBeNull();
  });
});

describe('reboot', () => {
  test('PUT reboot/{id}/ answers {success}; the instance goes rebooting, then loading, then running', async () => {
    const { instanceId: id } = await rent(sim);
    await running(sim, id);
    expect((await call(sim, 'PUT', `/api/v0/instances/reboot/${id}/`, {})).body).toEqual({ success: true });
    expect(await statusOf(sim, id)).toBe('rebooting');
    await running(sim, id);
    const statuses = sim
      .history()
      .find((h) => h.id === id)!
      .statuses.map((s) => s.status);
    expect(statuses).toEqual([null, 'loading', 'running', 'rebooting', 'loading', 'running']);
  });

  test('a stopped or unknown instance is invalid_args', async () => {
    const { instanceId: id } = await rent(sim);
    await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    expect((await call(sim, 'PUT', `/api/v0/instances/reboot/${id}/`, {})).body.error).toBe('invalid_args');
    expect(await call(sim, 'PUT', '/api/v0/instances/reboot/1/', {})).toMatchObject({
      status: 400,
      body: { success: false, error: 'invalid_args', msg: 'error 400/3001: invalid instance_id' },
    });
  });
});

describe('change bid', () => {
  async function bidInstance(s: RunningSimulator) {
    const offer = (await call(s, 'POST', '/api/v0/bundles/', { type: 'bid', limit: 1 })).body.offers[0];
    const id = (await call(s, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', price: offer.min_bid })).body.new_contract as number;
    return { id, offer };
  }

  test('the documented limits and errors', async () => {
    const { id, offer } = await bidInstance(sim);
    const put = (body: unknown, target = id) => call(sim, 'PUT', `/api/v0/instances/bid_price/${target}/`, body);
    expect((await put({ client_id: 'me', price: offer.min_bid * 2 })).body).toEqual({ success: true });
    expect((await put({ client_id: 'me', price: 0.0005 })).body).toEqual({
      success: false,
      error: 'invalid_args',
      msg: 'error 400/3001: Please set a bid price >= 0.001.',
    });
    expect((await put({ client_id: 'me', price: 32 * offer.num_gpus + 0.01 })).body.error).toBe('invalid_args');
    expect((await put({ price: 1 })).body.error).toBe('invalid_args');
    expect(await put({ client_id: 'me', price: 1 }, 1)).toMatchObject({
      status: 404,
      body: { success: false, error: 'no_such_instance', msg: 'Instance with that ID does not exist.' },
    });
    const { instanceId: onDemand } = await rent(sim);
    expect((await put({ client_id: 'me', price: 1 }, onDemand)).body.error).toBe('invalid_args');
  });

  test('a bid below the minimum is outbid: stopped (client:outbid) until a winning bid; each hour billed at its bid', async () => {
    let now = 1_000_000;
    const own = await startTestSim({
      timeScale: 1,
      now: () => now,
      config: { lifecycle: { provision_s: 0, boot_s: { min: 0, max: 0 }, restart_s: 0 } },
    });
    others.push(own);
    const { id, offer } = await bidInstance(own);
    expect(await statusOf(own, id)).toBe('running');
    now += 3600_000;
    const high = offer.min_bid * 3;
    await call(own, 'PUT', `/api/v0/instances/bid_price/${id}/`, { client_id: 'me', price: high });
    now += 3600_000;
    await call(own, 'PUT', `/api/v0/instances/bid_price/${id}/`, { client_id: 'me', price: offer.min_bid / 2 });
    const outbid = (await call(own, 'GET', `/api/v0/instances/${id}/`)).body.instances;
    expect(outbid).toMatchObject({ actual_status: 'stopped', intended_status: 'running', status_msg: expect.stringContaining('Outbid') });
    // Starting does not help while the bid loses.
    expect((await call(own, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' })).body.msg).toContain('stays stopped');
    expect(await statusOf(own, id)).toBe('stopped');
    now += 3600_000;
    const e = own.ledger().instances[0]!;
    expect(e.compute_usd).toBeCloseTo(offer.min_bid + high, 9);
    await call(own, 'PUT', `/api/v0/instances/bid_price/${id}/`, { client_id: 'me', price: high });
    expect(await statusOf(own, id)).toBe('running');
  });
});
