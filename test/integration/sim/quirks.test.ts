// The simulator's `quirks` (issue #30): real-service answers behind switches. The record quirks
// (padded strings, -1 for unknown figures) are on by default (issue #37 item 7); idealized records
// are the opt-in. The others are off by default.
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim } from './helpers.js';

let sim: RunningSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe('quirks', () => {
  it('by default every string of list, v1 list and show records comes padded, and filters still match the stored value', async () => {
    sim = await startTestSim();
    const { instanceId } = await rent(sim, { image: 'img', disk: 20, label: 'padded' });
    // Read as sent (`text`): the helper's `body` strips instance records as the official CLI does.
    const raw = async (path: string) => JSON.parse((await call(sim!, 'GET', path)).text);
    const shown = (await raw(`/api/v0/instances/${instanceId}/`)).instances;
    const v1 = await raw(`/api/v1/instances/?select_filters=${encodeURIComponent('{"label":{"eq":"padded"}}')}`);
    const v0 = (await raw('/api/v0/instances/')).instances[0];
    for (const r of [shown, v1.instances[0], v0]) {
      expect(r.label).toBe('padded \n');
      // Every string the record holds (which ones are set depends on how far the instance has come).
      const strings = Object.entries(r as Record<string, unknown>).filter(([, v]) => typeof v === 'string');
      expect(strings.length).toBeGreaterThan(3);
      for (const [key, value] of strings) expect(value, key).toMatch(/ \n$/);
      expect(r.id).toBe(instanceId);
    }
  });

  it('by default an unknown figure is -1: gpu_util of a host that reports none, disk_util, disk_usage', async () => {
    sim = await startTestSim({ config: { profile_rates: { no_gpu_util: 1 } } });
    const { instanceId } = await rent(sim);
    const r = (await call(sim, 'GET', `/api/v0/instances/${instanceId}/`)).body.instances;
    expect([r.gpu_util, r.disk_util, r.disk_usage]).toEqual([-1, -1, -1]);
  });

  it('idealized records are the opt-in: no padding, null for unknown figures', async () => {
    sim = await startTestSim({
      config: { quirks: { padded_strings: false, unknown_as_minus_one: false }, profile_rates: { no_gpu_util: 1 } },
    });
    const { instanceId } = await rent(sim, { image: 'img', disk: 20, label: 'clean' });
    const r = JSON.parse((await call(sim, 'GET', `/api/v0/instances/${instanceId}/`)).text).instances;
    expect([r.label, r.gpu_util, r.disk_util, r.disk_usage]).toEqual(['clean', null, null, null]);
  });

  it('pending_bid_create answers a bid 200 success:false naming the instance, which exists', async () => {
    sim = await startTestSim({ config: { quirks: { pending_bid_create: true } } });
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1, type: 'bid' })).body.offers[0];
    const created = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'img', disk: 20, label: 'bid', price: offer.min_bid * 2 });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ success: false, new_contract: expect.any(Number), instance_api_key: expect.any(String) });
    expect(sim.history().map((h) => h.id)).toEqual([created.body.new_contract]);
    // On demand answers as before.
    const other = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })).body.offers[0];
    expect((await call(sim, 'PUT', `/api/v0/asks/${other.id}/`, { image: 'img', disk: 20, label: 'od' })).body.success).toBe(true);
  });

  it('bad_key_msg_only answers a bad key 404 with msg alone', async () => {
    sim = await startTestSim({ config: { quirks: { bad_key_msg_only: true } } });
    const search = await call(sim, 'POST', '/api/v0/bundles/', {}, 'bad-key-0123456789');
    expect([search.status, search.body]).toEqual([404, { msg: 'Invalid user key' }]);
    // A 401 keeps its documented body.
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, 'bad-key-0123456789')).body).toMatchObject({ error: 'auth_error' });
  });
});
