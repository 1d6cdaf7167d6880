import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { ClientEvent } from '../../../src/client/events.js';
import { AmbiguousCreateError, AuthError, BerthError, OfferGoneError, OfferRefusedError, PermissionError } from '../../../src/errors.js';
import { INSTANCE_COLUMNS } from '../../../src/client/marketplace-client.js';
import { json, startFakeServer, testConfig, type FakeServer } from './fake-server.js';
import { FakeClock } from '../../helpers/fake-clock.js';

const API_KEY = 'sk-unit-test-key-0123456789';
const offer = (id: number) => ({
  id,
  machine_id: id * 10,
  gpu_name: 'RTX 4090',
  num_gpus: 1,
  gpu_ram: 24564,
  dph_total: 0.4,
  extra: 'kept',
});
const instance = (id: number) => ({ id, label: `berth:s:r:${id}`, machine_id: 7, actual_status: 'running', ssh_host: 'h', ssh_port: 22 });
const createReq = { image: 'pytorch/pytorch', disk: 20, label: 'berth:store:run1:1', env: { HF_TOKEN: 'hf_env_secret' } };

let server: FakeServer;
let client: MarketplaceClient;
let events: ClientEvent[];

function makeClient(config = testConfig(), url = server.url, clock?: FakeClock): MarketplaceClient {
  return createMarketClient({ baseUrl: url, apiKey: API_KEY, config, onEvent: (e) => events.push(e), ...(clock ? { clock } : {}) });
}

/** Lets the real sockets of the fake server and the client turn, without moving any clock. */
async function ioTurns(n = 50): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** Turns the event loop until `ok` holds (real I/O: the fake server's answers), time standing still. */
async function untilTrue(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; !ok(); i++) {
    if (i > 20_000) throw new Error(`never: ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

beforeEach(async () => {
  events = [];
  server = await startFakeServer();
  client = makeClient();
});
afterEach(async () => {
  await client.close();
  await server.close();
});

describe('requests', () => {
  it('sends the key only as a bearer header, with a JSON content type', async () => {
    server.setHandler((_q, res) => json(res, 200, { offers: [offer(1)] }));
    const offers = await client.searchOffers({ gpu_name: { eq: 'RTX 4090' }, limit: 5 });
    expect(offers).toEqual([offer(1)]);
    const [req] = server.requests;
    expect(req!.method).toBe('POST');
    expect(req!.url).toBe('/api/v0/bundles/');
    expect(req!.url).not.toContain(API_KEY);
    expect(req!.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.body).toEqual({ gpu_name: { eq: 'RTX 4090' }, limit: 5 });
  });

  it('sends the create body the service expects and returns the new contract', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: true, new_contract: 7835610, instance_api_key: 'ik-secret' }));
    const created = await client.createInstance(123, createReq);
    expect(created).toEqual({ instanceId: 7835610, instanceApiKey: 'ik-secret' });
    expect(server.requests[0]!.method).toBe('PUT');
    expect(server.requests[0]!.url).toBe('/api/v0/asks/123/');
    expect(server.requests[0]!.body).toEqual({ client_id: 'me', ...createReq, price: null, runtype: 'ssh' });
  });

  it('rejects an answer of the wrong shape with bad_response naming the problem', async () => {
    server.setHandler((_q, res) => json(res, 200, { offers: { 1: offer(1) } }));
    const err = await client.searchOffers({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BerthError);
    expect((err as BerthError).code).toBe('bad_response');
    expect((err as BerthError).message).toContain('offers: ');
  });
});

describe('one bad record among good ones (issue #18 item 5)', () => {
  const malformed = () => events.filter((e) => e.type === 'malformed_records');

  it.each([
    ['dph_total as a string', { ...offer(2), dph_total: '0.5' }],
    ['no dph_total', (({ dph_total: _d, ...o }) => o)(offer(2))],
    ['no gpu_ram', (({ gpu_ram: _g, ...o }) => o)(offer(2))],
    ['an id that is not a number', { ...offer(2), id: 'x' }],
    ['not a record', 'offer 2'],
  ])('a search leaves out an offer with %s, keeps the others, and reports it', async (_what, bad) => {
    server.setHandler((_q, res) => json(res, 200, { offers: [offer(1), bad, offer(3)] }));
    const offers = await client.searchOffers({});
    expect(offers.map((o) => o.id)).toEqual([1, 3]);
    expect(malformed()).toEqual([
      {
        type: 'malformed_records',
        op: 'search',
        group: 'search',
        dropped: 1,
        repaired: 0,
        issues: [expect.stringMatching(/^offers\[1\]/)],
      },
    ]);
    // Paths and types, never the values the service sent.
    expect(JSON.stringify(malformed())).not.toContain('0.5');
  });

  it('reports nothing when every offer is readable', async () => {
    server.setHandler((_q, res) => json(res, 200, { offers: [offer(1), offer(2)] }));
    expect(await client.searchOffers({})).toHaveLength(2);
    expect(malformed()).toEqual([]);
  });

  it('keeps an instance record whose fields cannot be read, with those fields set to null, so its run still sees it', async () => {
    const odd = { ...instance(2), actual_status: 5, dph_total: '0.5', ports: 'none' };
    server.setHandler((_q, res) => json(res, 200, { success: true, next_token: null, instances: [instance(1), odd, instance(3)] }));
    const listed = await client.listInstances();
    expect(listed.map((i) => i.id)).toEqual([1, 2, 3]);
    expect(listed[1]).toMatchObject({ id: 2, label: 'berth:s:r:2', actual_status: null, dph_total: null, ports: null });
    expect(malformed()).toEqual([
      {
        type: 'malformed_records',
        op: 'list',
        group: 'list',
        dropped: 0,
        repaired: 1,
        issues: [expect.stringContaining('instances[1] (id 2)')],
      },
    ]);
  });

  it('leaves out an instance record without a readable id, and keeps the page', async () => {
    const { id: _id, ...noId } = instance(2);
    server.setHandler((_q, res) => json(res, 200, { success: true, next_token: null, instances: [instance(1), noId, 'x', instance(3)] }));
    const page = await client.listInstancePage({});
    expect(page.instances.map((i) => i.id)).toEqual([1, 3]);
    expect(malformed()).toMatchObject([{ op: 'list', dropped: 2, repaired: 0 }]);
  });

  it('still refuses a list answer that is malformed itself', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: true, next_token: null, instances: 'none' }));
    const err = await client.listInstancePage({}).catch((e: unknown) => e);
    expect((err as BerthError).code).toBe('bad_response');
  });

  it('show: repairs the record, and refuses one without a readable id (that is the whole answer)', async () => {
    server.setHandler((_q, res) => json(res, 200, { instances: { ...instance(4), ssh_port: '22' } }));
    expect(await client.showInstance(4)).toMatchObject({ id: 4, ssh_port: null, actual_status: 'running' });
    expect(malformed()).toMatchObject([{ op: 'show', repaired: 1 }]);
    server.setHandler((_q, res) => json(res, 200, { instances: { ...instance(4), id: '4x' } }));
    const err = await client.showInstance(4).catch((e: unknown) => e);
    expect((err as BerthError).code).toBe('bad_response');
    server.setHandler((_q, res) => json(res, 200, { instances: null }));
    expect(await client.showInstance(4)).toBeNull();
    server.setHandler((_q, res) => json(res, 200, { something: 'else' }));
    expect(((await client.showInstance(4).catch((e: unknown) => e)) as BerthError).code).toBe('bad_response');
  });

  it('charges and SSH keys: a bad item is left out, the rest counted', async () => {
    server.setHandler((q, res) =>
      q.url.startsWith('/api/v0/ssh/')
        ? json(res, 200, [{ id: 1 }, { key: 'ssh-ed25519 AAAA' }, { id: 3 }])
        : json(res, 200, {
            results: [
              { source: 'instance-1', amount: 0.5 },
              { source: 'instance-2', amount: '0.7' },
            ],
            next_token: null,
          }),
    );
    expect(await client.countSshKeys()).toBe(2);
    expect(await client.charges({ fromS: 0, toS: 86_400 })).toEqual([{ source: 'instance-1', amount: 0.5 }]);
    expect(malformed().map((e) => [e.type === 'malformed_records' && e.op, e.type === 'malformed_records' && e.dropped])).toEqual([
      ['ssh_keys', 1],
      ['charges', 1],
    ]);
  });
});

describe('retries', () => {
  it('retries 5xx and dropped connections to success and reports each retry', async () => {
    let n = 0;
    server.setHandler((_q, res) => {
      n++;
      if (n === 1) return json(res, 503, { success: false, error: 'unavailable', msg: 'try later' });
      if (n === 2) return res.socket?.destroy();
      return json(res, 200, { success: true, instances_found: 1, next_token: null, instances: [instance(1)] });
    });
    expect(await client.listInstances()).toHaveLength(1);
    expect(server.requests).toHaveLength(3);
    expect(events.filter((e) => e.type === 'retry').map((e) => (e as { code: string }).code)).toEqual(['server_error', 'network']);
    expect(client.stats().retries).toBe(2);
  });

  it('fails at once on 401 with a message about BERTH_API_KEY', async () => {
    server.setHandler((_q, res) => json(res, 401, { success: false, error: 'auth_error', msg: 'Invalid user key' }));
    const err = await client.currentUser().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect((err as Error).message).toContain('BERTH_API_KEY');
    expect((err as Error).message).not.toContain(API_KEY);
    expect(server.requests).toHaveLength(1);
  });

  it('a revoked key answered 404 auth_error on search fails at once as an auth error (not backed off)', async () => {
    server.setHandler((_q, res) => json(res, 404, { error: 'auth_error', msg: 'Invalid user key' }));
    const err = await client.searchOffers({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect(err).toMatchObject({ code: 'auth', status: 404 });
    expect((err as Error).message).toContain('BERTH_API_KEY');
    expect(server.requests).toHaveLength(1);
  });

  it('a 403 about one offer is OfferRefusedError, not a permission failure', async () => {
    server.setHandler((_q, res) =>
      json(res, 403, {
        success: false,
        error: 'invalid_args',
        msg: 'error 403/3586: Offer 31 is not your own. Hosts can only rent their own machines.',
        ask_id: 31,
      }),
    );
    const err = await client.createInstance(31, createReq).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OfferRefusedError);
    expect(err).toMatchObject({ code: 'offer_refused', offerId: 31, retryable: false });
    expect(server.requests).toHaveLength(1);
  });

  it('fails at once on 403 naming the missing permission', async () => {
    server.setHandler((_q, res) => json(res, 403, { success: false, error: 'forbidden', msg: 'requires permission instance_write' }));
    const err = await client.destroyInstance(5).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermissionError);
    expect((err as PermissionError).category).toBe('instance_write');
    expect(server.requests).toHaveLength(1);
  });

  it('a 429 pauses the group for about 1/threshold s, then the call succeeds', async () => {
    await client.close();
    const clock = new FakeClock(0, { timeoutTurns: 20 });
    client = makeClient(testConfig({ retry: { max_delay_s: 2 } }), server.url, clock);
    let n = 0;
    server.setHandler((_q, res) => {
      if (++n === 1) return json(res, 429, { detail: 'API requests too frequent endpoint threshold=4.0' });
      return json(res, 200, { instances: instance(9) });
    });
    const got = client.showInstance(9);
    await untilTrue('the 429', () => events.some((e) => e.type === 'rate_limited'));
    const rl = events.find((e) => e.type === 'rate_limited');
    expect(rl).toMatchObject({ type: 'rate_limited', group: 'show', threshold: 4, consecutive: 1 });
    // 1/threshold s: 250 ms (jittered up to 1.25x), on the fake clock.
    const pause = (rl as { pauseMs: number }).pauseMs;
    expect(pause).toBeGreaterThanOrEqual(250);
    await clock.advance(pause - 1);
    await ioTurns();
    expect(server.requests).toHaveLength(1);
    await clock.advance(1);
    expect(await got).toMatchObject({ id: 9 });
    expect(server.requests).toHaveLength(2);
    expect(events.some((e) => e.type === 'resumed' && e.group === 'show')).toBe(true);
    expect(client.stats().groups.show.rateLimited).toBe(1);
  });

  it('a share of the rate limits (daemons on one key) spaces the calls at that fraction, reported in stats', async () => {
    await client.close();
    const clock = new FakeClock(0, { timeoutTurns: 20 });
    client = makeClient(testConfig({ rate: { show: { per_s: 20, burst: 1 } } }), server.url, clock);
    server.setHandler((_q, res) => json(res, 200, { instances: instance(9) }));
    client.setRateShare(1 / 4);
    expect(client.stats()).toMatchObject({ rateShare: 0.25, groups: { show: { perS: 5, burst: 1 } } });
    const all = Promise.all([1, 2, 3].map(() => client.showInstance(9)));
    // 200 ms between calls at 5/s, on the fake clock (the configured 20/s would space them 50 ms).
    await untilTrue('the first call', () => server.requests.length === 1);
    for (const sent of [1, 2]) {
      await clock.advance(199);
      await ioTurns();
      expect(server.requests).toHaveLength(sent);
      await clock.advance(1);
      await untilTrue(`call ${sent + 1}`, () => server.requests.length === sent + 1);
    }
    await all;
    client.setRateShare(1);
    expect(client.stats()).toMatchObject({ rateShare: 1, groups: { show: { perS: 20 } } });
  });

  it('a 429 on create pauses the create group for at least its penalty, whatever the threshold says', async () => {
    await client.close();
    const clock = new FakeClock(0, { timeoutTurns: 20 });
    client = makeClient(
      testConfig({ rate: { create: { per_s: 100, burst: 1, penalty_s: 0.4 } }, retry: { max_delay_s: 2 } }),
      server.url,
      clock,
    );
    let n = 0;
    server.setHandler((_q, res) =>
      ++n === 1
        ? json(res, 429, { detail: 'API requests too frequent endpoint threshold=50' })
        : json(res, 200, { success: true, new_contract: 9 }),
    );
    const made = client.createInstance(1, createReq);
    await untilTrue('the 429', () => events.some((e) => e.type === 'rate_limited'));
    expect(events.find((e) => e.type === 'rate_limited')).toMatchObject({ group: 'create', pauseMs: 400 });
    // Not sent again before the penalty is over, on the fake clock (the threshold alone says 20 ms).
    await clock.advance(399);
    await ioTurns();
    expect(server.requests).toHaveLength(1);
    await clock.advance(1);
    expect(await made).toEqual({ instanceId: 9 });
    expect(server.requests).toHaveLength(2);
  });

  it('a plain-text 429 still pauses and retries', async () => {
    let n = 0;
    server.setHandler((_q, res) => {
      if (++n === 1) {
        res.writeHead(429, { 'content-type': 'text/plain' });
        return res.end('API requests too frequent');
      }
      return json(res, 200, { success: true });
    });
    await client.setInstanceState(3, 'stopped');
    expect(server.requests.map((r) => r.body)).toEqual([{ state: 'stopped' }, { state: 'stopped' }]);
  });

  it('gives up when the retry time is spent, with the last typed error', async () => {
    await client.close();
    client = makeClient(testConfig({ retry: { max_retry_time_s: 0.3 } }));
    server.setHandler((_q, res) => json(res, 500, { success: false, error: 'oops', msg: 'x' }));
    await expect(client.currentUser()).rejects.toMatchObject({ code: 'server_error', status: 500 });
    expect(server.requests.length).toBeGreaterThan(1);
  });

  it('cancels a call waiting for a retry', async () => {
    await client.close();
    // On a fake clock that never moves: the 5 s pause cannot end, so only the abort ends the call.
    client = makeClient(testConfig(), server.url, new FakeClock(0));
    server.setHandler((_q, res) => json(res, 429, { detail: 'threshold=0.2' })); // 5 s pause
    const ac = new AbortController();
    const listed = client.listInstances(undefined, { signal: ac.signal });
    await untilTrue('the 429', () => events.some((e) => e.type === 'rate_limited'));
    ac.abort();
    await expect(listed).rejects.toMatchObject({ code: 'aborted' });
    expect(server.requests).toHaveLength(1);
  });
});

describe('create is never retried blindly', () => {
  it('retries a create the service answered with 503 or 429', async () => {
    let n = 0;
    server.setHandler((_q, res) => {
      n++;
      if (n === 1) return json(res, 503, { success: false, error: 'busy', msg: '' });
      if (n === 2) return json(res, 429, { detail: 'API requests too frequent endpoint threshold=50' });
      return json(res, 200, { success: true, new_contract: 42 });
    });
    expect(await client.createInstance(1, createReq)).toEqual({ instanceId: 42 });
    expect(server.requests).toHaveLength(3);
  });

  it('a connection dropped after sending is ambiguous and not repeated', async () => {
    server.setHandler((_q, res) => res.socket?.destroy());
    const err = await client.createInstance(77, createReq).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousCreateError);
    expect(err).toMatchObject({ code: 'ambiguous', offerId: 77, label: createReq.label });
    expect(server.requests).toHaveLength(1);
    expect(events).toContainEqual({ type: 'ambiguous_create', offerId: 77, label: createReq.label, code: 'network' });
    expect(client.stats().ambiguousCreates).toBe(1);
  });

  it('a headers timeout is ambiguous and not repeated', async () => {
    await client.close();
    client = makeClient(testConfig({ service: { timeout_s: 0.2 } }));
    server.setHandler(() => undefined); // never answers
    await expect(client.createInstance(5, createReq)).rejects.toBeInstanceOf(AmbiguousCreateError);
    expect(server.requests).toHaveLength(1);
  });

  it.each([500, 502, 504])('a %i on create is ambiguous and not repeated (the service may have acted)', async (status) => {
    server.setHandler((_q, res) => json(res, status, { success: false, error: 'gateway', msg: '' }));
    await expect(client.createInstance(5, createReq)).rejects.toBeInstanceOf(AmbiguousCreateError);
    expect(server.requests).toHaveLength(1);
  });

  it('a 2xx without new_contract is ambiguous (an instance may exist)', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: true }));
    await expect(client.createInstance(5, createReq)).rejects.toBeInstanceOf(AmbiguousCreateError);
  });

  it('a refused connection is retried (the request never left)', async () => {
    const dead = await startFakeServer();
    const deadUrl = dead.url;
    await dead.close();
    await client.close();
    client = makeClient(testConfig({ retry: { max_retry_time_s: 0.3 } }), deadUrl);
    const err = await client.createInstance(5, createReq).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(AmbiguousCreateError);
    expect(err).toMatchObject({ code: 'network' });
    expect(events.filter((e) => e.type === 'retry').length).toBeGreaterThan(0);
  });

  it('a taken offer is OfferGoneError naming the offer', async () => {
    server.setHandler((_q, res) =>
      json(res, 404, {
        success: false,
        error: 'invalid_args',
        msg: 'error 404/3603: no_such_ask Instance type by id 88 is not available.',
        ask_id: 88,
      }),
    );
    await expect(client.createInstance(88, createReq)).rejects.toSatisfy((e) => e instanceof OfferGoneError && e.offerId === 88);
    expect(server.requests).toHaveLength(1);
  });
});

describe('instances', () => {
  it('walks the v1 list page by page, 25 at a time, asking only for the columns berth reads', async () => {
    const all = Array.from({ length: 60 }, (_, i) => instance(i + 1));
    server.setHandler((q, res) => {
      const u = new URL(q.url, 'http://x');
      if (u.pathname !== '/api/v1/instances/') return json(res, 404, { success: false, error: 'not_found', msg: '' });
      const after = Number(u.searchParams.get('after_token') ?? 0);
      const limit = Number(u.searchParams.get('limit'));
      const page = all.slice(after, after + limit);
      const next = after + limit < all.length ? String(after + limit) : null;
      return json(res, 200, {
        success: true,
        instances_found: page.length,
        total_instances: all.length,
        next_token: next,
        instances: page,
      });
    });
    const listed = await client.listInstances();
    expect(listed.map((i) => i.id)).toEqual(all.map((i) => i.id));
    expect(server.requests).toHaveLength(3);
    const first = new URL(server.requests[0]!.url, 'http://x');
    expect(first.pathname).toBe('/api/v1/instances/');
    expect(first.searchParams.get('limit')).toBe('25');
    expect(JSON.parse(first.searchParams.get('order_by')!)).toEqual([{ col: 'id', dir: 'asc' }]);
    expect(JSON.parse(first.searchParams.get('select_cols')!)).toEqual([...INSTANCE_COLUMNS]);
    expect(JSON.parse(first.searchParams.get('select_cols')!)).not.toContain('extra_env');
    expect(first.searchParams.has('select_filters')).toBe(false);
    expect(server.requests.some((r) => r.url.startsWith('/api/v0/instances'))).toBe(false);
  });

  it('sends select_filters as JSON and returns one page with its token and total', async () => {
    server.setHandler((_q, res) =>
      json(res, 200, {
        success: true,
        instances_found: 1,
        total_instances: 3,
        label_counts: { '': 3 },
        next_token: 'tok2',
        instances: [instance(5)],
      }),
    );
    const page = await client.listInstancePage({ filters: { id: { in: [5, 6] } }, afterToken: 'tok1' });
    expect(page).toEqual({ instances: [instance(5)], nextToken: 'tok2', total: 3 });
    const u = new URL(server.requests[0]!.url, 'http://x');
    expect(JSON.parse(u.searchParams.get('select_filters')!)).toEqual({ id: { in: [5, 6] } });
    expect(u.searchParams.get('after_token')).toBe('tok1');
  });

  it('reads `instances: null` as an empty page', async () => {
    server.setHandler((_q, res) =>
      json(res, 200, { success: true, instances_found: 0, total_instances: 0, next_token: null, instances: null }),
    );
    expect(await client.listInstances()).toEqual([]);
  });

  it('a list answered 200 `success: false` is a failure, tried again, never an empty list', async () => {
    let n = 0;
    server.setHandler((_q, res) =>
      ++n === 1
        ? json(res, 200, { success: false, error: 'internal', msg: 'try later' })
        : json(res, 200, { success: true, next_token: null, instances: [instance(1)] }),
    );
    expect(await client.listInstances()).toHaveLength(1);
    expect(server.requests).toHaveLength(2);
  });

  it('validates instance records and tolerates extra fields and nulls', async () => {
    server.setHandler((_q, res) =>
      json(res, 200, {
        success: true,
        next_token: null,
        instances: [{ id: 1, label: null, machine_id: null, actual_status: null, extra_env: [['A', 'b']] }],
      }),
    );
    expect(await client.listInstances()).toEqual([{ id: 1, label: null, machine_id: null, actual_status: null, extra_env: [['A', 'b']] }]);
  });

  it('show returns null for `instances: null` and for 404', async () => {
    server.setHandler((q, res) =>
      q.url.includes('/1/') ? json(res, 200, { instances: null }) : json(res, 404, { success: false, error: 'no_such_instance', msg: '' }),
    );
    expect(await client.showInstance(1)).toBeNull();
    expect(await client.showInstance(2)).toBeNull();
  });

  it('destroy is idempotent: 404 means gone', async () => {
    server.setHandler((q, res) =>
      q.url.includes('/1/') ? json(res, 200, { success: true }) : json(res, 404, { success: false, error: 'no_such_instance', msg: '' }),
    );
    expect(await client.destroyInstance(1)).toBe('destroyed');
    expect(await client.destroyInstance(2)).toBe('gone');
  });

  it('a destroy answered 200 `success: false` is not destroyed: it is tried again', async () => {
    let n = 0;
    server.setHandler((_q, res) =>
      ++n === 1
        ? json(res, 200, { success: false, error: 'busy', msg: 'Instance is transitioning' })
        : json(res, 200, { success: true, msg: 'destroyed' }),
    );
    expect(await client.destroyInstance(1)).toBe('destroyed');
    expect(server.requests).toHaveLength(2);
  });

  it('a destroy that keeps answering `success: false` fails; it never counts as destroyed', async () => {
    await client.close();
    client = makeClient(testConfig({ retry: { max_retry_time_s: 0.2 } }));
    server.setHandler((_q, res) => json(res, 200, { success: false, error: 'busy', msg: 'no' }));
    await expect(client.destroyInstance(1)).rejects.toMatchObject({ code: 'unsuccessful' });
  });

  it('a stop or label answered 200 `success: false` fails at once', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: false, error: 'label_too_long', msg: 'label too long' }));
    await expect(client.setInstanceLabel(1, 'x')).rejects.toMatchObject({ code: 'unsuccessful', retryable: false });
    await expect(client.setInstanceState(1, 'stopped')).rejects.toMatchObject({ code: 'unsuccessful' });
    expect(server.requests).toHaveLength(2);
  });

  it('a start the service queues, a bid change, and SSH-key calls answered 200 `success: false` fail at once, typed, never retried', async () => {
    server.setHandler((q, res) =>
      json(res, 200, {
        success: false,
        error: q.url.includes('/ssh/') ? 'invalid_id' : 'resources_unavailable',
        msg: q.url.includes('/ssh/') ? 'no such instance' : 'state change queued',
      }),
    );
    await expect(client.setInstanceState(1, 'running')).rejects.toMatchObject({ code: 'unsuccessful', retryable: false });
    await expect(client.changeBid(1, 0.3)).rejects.toMatchObject({ code: 'unsuccessful', retryable: false });
    await expect(client.addSshKey('ssh-ed25519 AAAA k')).rejects.toMatchObject({ code: 'unsuccessful', retryable: false });
    await expect(client.attachSshKey(1, 'ssh-ed25519 AAAA k')).rejects.toMatchObject({ code: 'unsuccessful', retryable: false });
    expect(server.requests).toHaveLength(4);
  });

  it('an attach answered `success: false` because the key is already attached is done', async () => {
    server.setHandler((_q, res) => json(res, 200, { success: false, error: 'invalid_args', msg: 'ssh key already attached to instance' }));
    await expect(client.attachSshKey(1, 'ssh-ed25519 AAAA k')).resolves.toBeUndefined();
    expect(server.requests).toHaveLength(1);
  });

  it('destroy is retried on transient faults', async () => {
    let n = 0;
    server.setHandler((_q, res) => (++n === 1 ? res.socket?.destroy() : json(res, 200, { success: true })));
    expect(await client.destroyInstance(1)).toBe('destroyed');
    expect(server.requests).toHaveLength(2);
  });
});

describe('other endpoints', () => {
  it('secrets, template delete by numeric id, webhook rotation, API keys', async () => {
    server.setHandler((q, res) => {
      if (q.url === '/api/v0/secrets/') return json(res, 200, { success: true, secrets: { HF_TOKEN: '****' } });
      if (q.url === '/api/v0/template/') return json(res, 200, { success: true });
      if (q.url === '/api/v0/webhooks/4/rotate-secret')
        return json(res, 200, { success: true, webhook: { id: 4, webhook_secret: 'whsec' } });
      if (q.url === '/api/v0/auth/apikeys/' && q.method === 'POST') return json(res, 200, { success: true, id: 12, key: 'newkey' });
      if (q.url === '/api/v0/auth/apikeys/12/') return json(res, 200, { success: true });
      return json(res, 404, { success: false, error: 'not_found', msg: '' });
    });
    expect(await client.listSecrets()).toEqual({ HF_TOKEN: '****' });
    expect(await client.deleteTemplate(31)).toBe('deleted');
    expect(server.requests.at(-1)).toMatchObject({ method: 'DELETE', body: { template_id: 31 } });
    expect(await client.rotateWebhookSecret(4)).toMatchObject({ id: 4, webhook_secret: 'whsec' });
    expect(await client.createApiKey({ name: 'ci', permissions: { api: { instance_read: {} } } })).toMatchObject({ id: 12 });
    expect(await client.deleteApiKey(12)).toBe('deleted');
    expect(await client.deleteApiKey(13)).toBe('gone');
  });

  it('an API key creation that may have gone through is not repeated', async () => {
    server.setHandler((_q, res) => res.socket?.destroy());
    await expect(client.createApiKey({ permissions: {} })).rejects.toMatchObject({ code: 'ambiguous' });
    expect(server.requests).toHaveLength(1);
  });
});
