// Rate limits (token buckets on wall time) and injected faults: 5xx, latency, dropped sockets,
// ambiguous creates and offers taken by someone else.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, rent, sleep, startTestSim } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));
async function fresh(config: Parameters<typeof startTestSim>[0] = {}) {
  const sim = await startTestSim(config);
  sims.push(sim);
  return sim;
}

describe('rate limits', () => {
  test('a bucket of max(1, threshold) refills at threshold per second', async () => {
    const sim = await fresh({ config: { rate_limits: { enabled: true } } });
    const show = () => call(sim, 'GET', '/api/v0/instances/1/');
    const burst = await Promise.all([show(), show(), show()]);
    expect(burst.map((r) => r.status).sort()).toEqual([200, 200, 429]);
    expect(burst.find((r) => r.status === 429)!.body).toEqual({ detail: 'API requests too frequent endpoint threshold=2.0' });
    await sleep(550);
    expect((await show()).status).toBe(200);
    // Another key has its own bucket.
    expect((await call(sim, 'GET', '/api/v0/instances/1/', undefined, sim.addKey())).status).toBe(200);
    expect(sim.stats().rate_limited['GET /api/v0/instances/{id}/']).toBe(1);
  });

  test('thresholds per group: create 4.5, search 10 per minute, secrets 5.0, destroy in its own form', async () => {
    const sim = await fresh({ config: { rate_limits: { enabled: true } } });
    const count = (rs: Array<{ status: number }>, status: number) => rs.filter((r) => r.status === status).length;
    // Requests of a burst go out together so that a slow machine cannot refill a bucket between them.
    const offers = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 10 })).body.offers;
    const creates = await Promise.all(offers.slice(0, 5).map((o: any) => call(sim, 'PUT', `/api/v0/asks/${o.id}/`, { image: 'x' })));
    expect(count(creates, 200)).toBe(4);
    expect(creates.find((r) => r.status === 429)!.body.detail).toBe('API requests too frequent endpoint threshold=4.5');

    const searches = await Promise.all(Array.from({ length: 10 }, () => call(sim, 'POST', '/api/v0/bundles/', { limit: 1 })));
    expect(count(searches, 200)).toBe(9); // one was spent above
    expect(searches.find((r) => r.status === 429)!.body.detail).toBe('API requests too frequent endpoint threshold=0.167');

    const secrets = await Promise.all(Array.from({ length: 6 }, () => call(sim, 'GET', '/api/v0/secrets')));
    expect(count(secrets, 200)).toBe(5);

    const made = creates.filter((r) => r.status === 200).map((r) => r.body.new_contract as number);
    const destroys = await Promise.all(made.map((id) => call(sim, 'DELETE', `/api/v0/instances/${id}/`)));
    expect(count(destroys, 429)).toBe(1);
    expect(destroys.find((r) => r.status === 429)!.body).toEqual({
      success: false,
      error: 'rate_limit_exceeded',
      msg: 'API requests too frequent endpoint threshold=3.0',
    });
  });

  test('plain-text 429 and configurable or disabled groups', async () => {
    const sim = await fresh({ config: { rate_limits: { enabled: true, plain_text: true, groups: { show: { per_s: 1 }, list_v0: null } } } });
    await call(sim, 'GET', '/api/v0/instances/1/');
    const r = await call(sim, 'GET', '/api/v0/instances/1/');
    expect(r.status).toBe(429);
    expect(r.text).toBe('API requests too frequent');
    for (let i = 0; i < 20; i++) expect((await call(sim, 'GET', '/api/v0/instances/')).status).toBe(200);
  });
});

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
    const t = Date.now();
    await call(sim, 'GET', '/api/v0/users/current/');
    expect(Date.now() - t).toBeGreaterThanOrEqual(115);
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
