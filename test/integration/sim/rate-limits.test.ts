// Rate limits as rate-limits-and-errors.mdx and each yaml's x-rate-limit describe them: a minimum
// interval per endpoint and identity (bearer + api_key param + client address), no bursts, a
// refused request counting as a request, create's 12 s penalty, search's 10 per minute, the 429
// body each endpoint documents, and no Retry-After. Wall time is a manual clock.
import { request } from 'node:http';
import { afterAll, describe, expect, test } from 'vitest';
import { parseSimConfig, type RunningSimulator, type SimConfigInput } from '../../../src/sim/index.js';
import { call, startTestSim, type Reply } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

/** A simulator with the documented limits on and a wall clock the test moves. */
async function limited(config: SimConfigInput = {}) {
  const clock = { now: 5_000_000 };
  const sim = await startTestSim({ timeScale: 1, now: () => clock.now, config: { rate_limits: {}, ...config } });
  sims.push(sim);
  return { sim, clock };
}

const at = async <T>(clock: { now: number }, ms: number, f: () => Promise<T>): Promise<T> => {
  clock.now = 5_000_000 + ms;
  return f();
};

/** GET from a chosen local address (127.0.0.x are all loopback on Linux). */
function getFrom(url: string, key: string, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('minimum interval per endpoint and identity', () => {
  test('one request per 1/threshold s, no bursts; a refused request restarts the interval; no Retry-After', async () => {
    const { sim, clock } = await limited();
    const show = () => call(sim, 'GET', '/api/v0/instances/1/');
    expect((await at(clock, 0, show)).status).toBe(200);
    const refused = await at(clock, 0, show);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ detail: 'API requests too frequent endpoint threshold=2.0' });
    const res = await fetch(`${sim.url}/api/v0/instances/1/`, { headers: { authorization: `Bearer ${sim.apiKey}` } });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBeNull();
    expect((await at(clock, 500, show)).status).toBe(200); // 500 ms after the last request, refused or not
    expect((await at(clock, 900, show)).status).toBe(429);
    expect((await at(clock, 1300, show)).status).toBe(429); // 400 ms after the refused one
    expect((await at(clock, 1800, show)).status).toBe(200);
    expect(sim.stats().rate_limited['GET /api/v0/instances/{id}/']).toBe(4);
  });

  test('count_refused: false counts accepted requests only', async () => {
    const { sim, clock } = await limited({ rate_limits: { count_refused: false } });
    const show = () => call(sim, 'GET', '/api/v0/instances/1/');
    expect((await at(clock, 0, show)).status).toBe(200);
    expect((await at(clock, 400, show)).status).toBe(429);
    expect((await at(clock, 500, show)).status).toBe(200);
  });

  test('each endpoint, key, api_key parameter and client address has its own interval', async () => {
    const { sim, clock } = await limited();
    await at(clock, 0, () => call(sim, 'GET', '/api/v0/instances/1/'));
    // Other endpoints on the same path, and other paths, are not held up.
    expect((await call(sim, 'DELETE', '/api/v0/instances/1/')).status).toBe(404);
    expect((await call(sim, 'PUT', '/api/v0/instances/1/', { label: 'x' })).status).toBe(404);
    expect((await call(sim, 'GET', '/api/v0/instances/2/')).status).toBe(429); // same endpoint, other id
    const other = sim.addKey();
    expect((await call(sim, 'GET', '/api/v0/instances/1/', undefined, other)).status).toBe(200);
    const viaParam = await fetch(`${sim.url}/api/v0/instances/1/?api_key=${sim.apiKey}`);
    expect(viaParam.status).toBe(200);
    const both = await fetch(`${sim.url}/api/v0/instances/1/?api_key=${sim.apiKey}`, {
      headers: { authorization: `Bearer ${sim.apiKey}` },
    });
    expect(both.status).toBe(200);
    const url = `${sim.url}/api/v0/users/current/`;
    expect(await getFrom(url, sim.apiKey, '127.0.0.1')).toBe(200);
    expect(await getFrom(url, sim.apiKey, '127.0.0.1')).toBe(429);
    expect(await getFrom(url, sim.apiKey, '127.0.0.2')).toBe(200);
  });

  test('requests with a bad key are limited too (the identity does not need a valid key)', async () => {
    const { sim } = await limited();
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, 'not-a-key')).status).toBe(401);
    expect((await call(sim, 'GET', '/api/v0/users/current/', undefined, 'not-a-key')).status).toBe(429);
  });
});

describe('create penalty and search window', () => {
  test('a 429 on create refuses creates for 12 s, and each refusal restarts the 12 s', async () => {
    const { sim, clock } = await limited();
    const offers = sim.offers().slice(0, 3);
    const create = (i: number) => () => call(sim, 'PUT', `/api/v0/asks/${offers[i]!.id}/`, { image: 'x' });
    expect((await at(clock, 0, create(0))).status).toBe(200);
    const refused = await at(clock, 100, create(1));
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ detail: 'API requests too frequent endpoint threshold=4.5' });
    expect((await at(clock, 11_000, create(1))).status).toBe(429); // 10.9 s after: still in the penalty
    expect((await at(clock, 22_900, create(1))).status).toBe(429); // 11.9 s after the last refusal
    expect((await at(clock, 35_000, create(1))).status).toBe(200);
    expect(sim.history()).toHaveLength(2);
  });

  test('search: at most 10 in any 60 s, no interval, 429 in plain text; refused searches count', async () => {
    const { sim, clock } = await limited();
    const search = () => call(sim, 'POST', '/api/v0/bundles/', { limit: 1 });
    for (let i = 0; i < 10; i++) expect((await at(clock, i * 1000, search)).status).toBe(200);
    const refused = await at(clock, 10_000, search);
    expect(refused.status).toBe(429);
    expect(refused.text).toBe('API requests too frequent');
    expect((await at(clock, 60_500, search)).status).toBe(429); // 1..9 s and the refusal at 10 s are in the window
    expect((await at(clock, 71_000, search)).status).toBe(200);
  });
});

describe('documented thresholds and bodies', () => {
  // [method, path, body, threshold in the 429, body form]
  const table: Array<[string, string, unknown, string, 'detail' | 'success_error' | 'plain']> = [
    ['PUT', '/api/v0/asks/{offer}/', { image: 'x' }, '4.5', 'detail'],
    ['GET', '/api/v1/instances/', undefined, '1.0', 'detail'],
    ['GET', '/api/v0/instances/1/', undefined, '2.0', 'detail'],
    ['PUT', '/api/v0/instances/1/', { state: 'stopped' }, '1.0', 'detail'],
    ['PUT', '/api/v0/instances/reboot/1/', {}, '1.0', 'detail'],
    ['PUT', '/api/v0/instances/bid_price/1/', { client_id: 'me', price: 1 }, '5.5', 'detail'],
    ['DELETE', '/api/v0/instances/1/', undefined, '3.0', 'success_error'],
    // The official client's bulk destroy has no yaml: the strictest documented 1.0, destroy's 429 body.
    ['DELETE', '/api/v0/instances/', { instance_ids: [1] }, '1.0', 'success_error'],
    ['GET', '/api/v0/secrets/', undefined, '5.0', 'detail'],
    ['POST', '/api/v0/secrets/', { key: 'A', value: 'b' }, '3.0', 'detail'],
    ['GET', '/api/v0/auth/apikeys/', undefined, '1.0', 'detail'],
    ['POST', '/api/v0/auth/apikeys/', { name: 'k' }, '2.0', 'detail'],
    ['GET', '/api/v0/template/', undefined, '3.0', 'detail'],
    ['POST', '/api/v0/ssh/', { ssh_key: 'ssh-ed25519 AAAA x@y' }, '1.0', 'detail'],
    ['GET', '/api/v0/charges/?select_filters={"day":{"gte":0,"lte":1}}', undefined, '1.0', 'detail'],
    // Endpoints whose yaml gives no threshold: 1.0, answered in the rate-limit page's plain text.
    ['GET', '/api/v0/users/current/', undefined, '1.0', 'plain'],
    ['GET', '/api/v0/webhooks/', undefined, '1.0', 'plain'],
    ['GET', '/api/v0/gpu_names/unique/', undefined, '1.0', 'plain'],
    ['PUT', '/api/v0/instances/request_logs/1/', {}, '1.0', 'plain'],
  ];

  test.each(table)('%s %s: threshold %s', async (method, path, body, threshold, form) => {
    const { sim } = await limited();
    const p = path.replace('{offer}', String(sim.offers()[0]!.id));
    await call(sim, method, p, body);
    const r: Reply = await call(sim, method, p, body);
    expect(r.status).toBe(429);
    const text = `API requests too frequent endpoint threshold=${threshold}`;
    if (form === 'detail') expect(r.body).toEqual({ detail: text });
    if (form === 'success_error') expect(r.body).toEqual({ success: false, error: 'rate_limit_exceeded', msg: text });
    if (form === 'plain') expect(r.text).toBe(`API requests too frequent: endpoint threshold=${threshold}`);
  });

  test('every group has a documented limit; none is unlimited by default', () => {
    const groups = parseSimConfig({}).rate_limits.groups;
    for (const [group, spec] of Object.entries(groups)) {
      expect(spec, group).not.toBeNull();
      expect(spec!.burst, group).toBe(1);
    }
    expect(groups.search).toMatchObject({ max_calls: { requests: 10, window_s: 60 } });
    expect(groups.create).toMatchObject({ per_s: 4.5, penalty_s: 12 });
    expect(groups.destroy).toMatchObject({ per_s: 3 });
    expect(groups.change_bid).toMatchObject({ per_s: 5.5 });
  });

  test('config: plain_text everywhere, a group raised or turned off, everything off', async () => {
    const { sim } = await limited({ rate_limits: { plain_text: true, groups: { show: { per_s: 1, burst: 3 }, list_v1: null } } });
    const shows = await Promise.all([1, 2, 3, 4].map(() => call(sim, 'GET', '/api/v0/instances/1/')));
    expect(shows.map((r) => r.status).sort()).toEqual([200, 200, 200, 429]);
    expect(shows.find((r) => r.status === 429)!.text).toBe('API requests too frequent');
    for (let i = 0; i < 5; i++) expect((await call(sim, 'GET', '/api/v1/instances/')).status).toBe(200);
    const off = await limited({ rate_limits: { enabled: false } });
    for (let i = 0; i < 5; i++) expect((await call(off.sim, 'GET', '/api/v0/instances/1/')).status).toBe(200);
  });
});
