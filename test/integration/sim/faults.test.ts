// Injected faults: 5xx, latency, dropped sockets, ambiguous creates, offers taken by someone else,
// 200 answers with success false, lists with `instances: null`, and 404 auth_error for bad keys.
// (Rate limits: rate-limits.test.ts.)
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, startTestSim } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));
async function fresh(config: Parameters<typeof startTestSim>[0] = {}) {
  const sim = await startTestSim(config);
  sims.push(sim);
  return sim;
}

describe('injected faults', () => {
  test('5xx answers do nothing', async () => {
    const sim = await fresh({ config: { faults: { error_5xx_rate: 1 } } });
    const offer = sim.offers()[0]!;
    const r = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' });
    expect([500, 502, 503]).toContain(r.status);
    expect(sim.history()).toEqual([]);
    expect(sim.stats().injected_5xx).toBe(1);
    sim.setFaults({ error_5xx_rate: 0 });
    expect((await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' })).status).toBe(200);
  });

  test('latency delays answers', async () => {
    const sim = await fresh({ config: { faults: { latency_ms: 120, latency_jitter_ms: 10 } } });
    // An order, not a duration: a timer due 100 ms after the call was sent fires before the answer
    // comes, since the simulator (in this process) sleeps 120 ms from a later moment, on the same timers.
    const order: string[] = [];
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        order.push('timer');
        resolve();
      }, 100),
    );
    await call(sim, 'GET', '/api/v0/users/current/').then(() => order.push('answer'));
    await timer;
    expect(order).toEqual(['timer', 'answer']);
  });

  test('a dropped request gets no answer and does nothing', async () => {
    const sim = await fresh({ config: { faults: { drop_rate: 1 } } });
    await expect(call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x' })).rejects.toThrow();
    expect(sim.history()).toEqual([]);
    expect(sim.stats().drops).toBe(1);
  });

  test('an ambiguous create makes the instance, then drops the answer', async () => {
    const sim = await fresh({ config: { faults: { ambiguous_create_rate: 1 } } });
    const offer = sim.offers()[0]!;
    await expect(call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', label: 'berth:a:b:1' })).rejects.toThrow();
    const listed = (await call(sim, 'GET', '/api/v0/instances/')).body.instances;
    expect(listed.map((i: any) => i.label)).toEqual(['berth:a:b:1']);
    expect(sim.stats()).toMatchObject({ creates_received: 1, creates_answered: 0, creates_ambiguous: 1 });
  });

  test('an offer taken by someone else answers 410 and leaves search', async () => {
    const sim = await fresh({ config: { faults: { offer_taken_rate: 1 } } });
    const offer = sim.offers()[0]!;
    const r = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' });
    expect(r.status).toBe(410);
    expect(r.body.error).toBe('no_such_ask');
    expect((await call(sim, 'POST', '/api/v0/bundles/', { id: { eq: offer.id } })).body.offers).toEqual([]);
    sim.setFaults({ offer_taken_rate: 0 });
    expect((await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' })).status).toBe(410);
    expect(sim.history()).toEqual([]);
  });

  test('unsuccessful_200_rate: stop, start, label, reboot and destroy answer 200 {success: false} and do nothing', async () => {
    const sim = await fresh();
    const { instanceId } = await rent(sim, { image: 'x', label: 'keep' });
    sim.setFaults({ unsuccessful_200_rate: 1 });
    for (const [method, path, body] of [
      ['PUT', `/api/v0/instances/${instanceId}/`, { state: 'stopped' }],
      ['PUT', `/api/v0/instances/${instanceId}/`, { label: 'changed' }],
      ['PUT', `/api/v0/instances/reboot/${instanceId}/`, {}],
      ['DELETE', `/api/v0/instances/${instanceId}/`, undefined],
    ] as const) {
      const r = await call(sim, method, path, body);
      expect(r.status, path).toBe(200);
      expect(r.body).toMatchObject({ success: false, error: expect.any(String), msg: expect.any(String) });
    }
    const shown = (await call(sim, 'GET', `/api/v0/instances/${instanceId}/`)).body.instances;
    expect(shown).toMatchObject({ label: 'keep', intended_status: 'running' });
    expect(sim.history()[0]!.statuses.map((s) => s.status)).not.toContain('rebooting');
    sim.setFaults({ unsuccessful_200_rate: 0 });
    expect((await call(sim, 'DELETE', `/api/v0/instances/${instanceId}/`)).body.success).toBe(true);
  });

  test('null_instances_rate: a v0 list or a v1 page answers instances: null', async () => {
    const sim = await fresh({ config: { faults: { null_instances_rate: 1 } } });
    await rent(sim);
    const v0 = await call(sim, 'GET', '/api/v0/instances/');
    expect(v0.status).toBe(200);
    expect(v0.body.instances).toBeNull();
    const v1 = await call(sim, 'GET', '/api/v1/instances/');
    expect(v1.body).toMatchObject({ success: true, instances: null });
    sim.setFaults({ null_instances_rate: 0 });
    expect((await call(sim, 'GET', '/api/v0/instances/')).body.instances).toHaveLength(1);
  });

  test('a bad key is 404 auth_error on search always, and everywhere with bad_key_404_everywhere', async () => {
    const sim = await fresh();
    const authError = { success: false, error: 'auth_error', msg: 'Invalid user key' };
    expect(await call(sim, 'POST', '/api/v0/bundles/', {}, 'wrong')).toMatchObject({ status: 404, body: authError });
    expect(await call(sim, 'POST', '/api/v0/bundles/', {}, null)).toMatchObject({ status: 404, body: authError });
    expect(await call(sim, 'GET', '/api/v0/users/current/', undefined, 'wrong')).toMatchObject({ status: 401, body: authError });
    sim.setFaults({ bad_key_404_everywhere: true });
    expect(await call(sim, 'GET', '/api/v0/users/current/', undefined, 'wrong')).toMatchObject({ status: 404, body: authError });
    expect(await call(sim, 'DELETE', '/api/v0/instances/1/', undefined, 'wrong')).toMatchObject({ status: 404, body: authError });
  });

  test('faults do not touch the admin endpoints', async () => {
    const sim = await fresh({ config: { faults: { drop_rate: 1 } } });
    expect((await call(sim, 'GET', '/_sim/stats', undefined, null)).status).toBe(200);
  });
});

test('a stuck client does not hang the server: half-sent bodies and garbage', async () => {
  const sim = await fresh();
  const { connect } = await import('node:net');
  const url = new URL(sim.url);
  const sock = connect(Number(url.port), url.hostname);
  await new Promise((r) => sock.once('connect', r));
  sock.write('PUT /api/v0/asks/1/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"ima');
  // Meanwhile others are served.
  expect((await call(sim, 'GET', '/api/v0/users/current/')).status).toBe(200);
  sock.destroy();
  const { instanceId } = await rent(sim);
  expect(instanceId).toBeGreaterThan(0);
});
