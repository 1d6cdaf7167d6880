// Webhook deliveries in the scheme of notification-webhooks.mdx: payload, X-Vast-* headers and the
// sha256 HMAC of "<timestamp>.<body>", retries on 408/429/5xx/timeouts with the same event id,
// permanent failures, the test endpoint, and the limits on webhooks (4 per user, https).
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { signWebhook, type RunningSimulator, type SimConfigInput } from '../../../src/sim/index.js';
import { call, startTestSim, waitFor } from './helpers.js';

interface Received {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const SECRET = 'whsec_test_secret_value';
let receiver: Server;
let received: Received[] = [];
/** Status answers per path, consumed in order; the last one repeats. */
let script: Record<string, number[]> = {};
/** Answers to deliveries on /held, which wait until the test sends them. */
const release: Array<() => void> = [];
let base: string;
const sims: RunningSimulator[] = [];

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body });
      if (path === '/slow') return void setTimeout(() => res.writeHead(204).end(), 400);
      if (path === '/held') return void release.push(() => res.writeHead(204).end());
      const plan = script[path] ?? [204];
      const status = plan.length > 1 ? plan.shift()! : plan[0]!;
      res.writeHead(status, status === 302 ? { location: `${base}/hook` } : {}).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});
beforeEach(() => {
  received = [];
  script = {};
});
afterAll(async () => {
  release.splice(0).forEach((answer) => answer());
  await Promise.all(sims.map((s) => s.close()));
  await new Promise((r) => receiver.close(r));
});

async function fresh(config: SimConfigInput = {}) {
  const sim = await startTestSim({ config: { webhooks: { retry_delays_s: [5, 5, 5], delivery_timeout_ms: 200 }, ...config } });
  sims.push(sim);
  return sim;
}

/** The receiver's check, as the guide's Python example does it. */
function verify(r: Received, secret: string): boolean {
  const t = String(r.headers['x-vast-timestamp']);
  const expected = createHmac('sha256', secret).update(`${t}.${r.body}`).digest('hex');
  return r.headers['x-vast-signature-256'] === `sha256=${expected}`;
}

const events = (path: string) => received.filter((r) => r.path === path);

describe('deliveries', () => {
  test('client:low_credit: the documented payload, headers and signature, delivered once', async () => {
    const sentAfterS = Math.floor(Date.now() / 1000);
    await fresh({
      account: { credit: 5, low_credit_threshold: 10 },
      webhooks: { initial: [{ name: 'ops', webhook_url: `${base}/hook`, event_types: ['client:low_credit'], webhook_secret: SECRET }] },
    });
    const got = await waitFor(() => events('/hook')[0], 3000, 'low credit');
    const body = JSON.parse(got.body);
    expect(body).toEqual({
      event_id: expect.stringMatching(/^[0-9a-f]{32}$/),
      user_id: 424242,
      notif_type: 'low_credit',
      subject: 'Warning - Your Vast.ai Credit Balance Is Getting Low',
      message: expect.stringContaining('below your configured threshold'),
      timestamp: expect.any(Number),
    });
    expect(got.headers).toMatchObject({
      'content-type': 'application/json',
      'x-vast-event-id': body.event_id,
      'x-vast-delivery-attempt': '1',
      'x-vast-timestamp': expect.stringMatching(/^\d+$/),
      'x-vast-signature-256': expect.stringMatching(/^sha256=[0-9a-f]{64}$/),
    });
    // The time of sending: after the simulator started, before the delivery was read here.
    expect(Number(got.headers['x-vast-timestamp'])).toBeGreaterThanOrEqual(sentAfterS);
    expect(Number(got.headers['x-vast-timestamp'])).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    expect(verify(got, SECRET)).toBe(true);
    expect(verify(got, 'another secret')).toBe(false);
    expect(got.headers['x-vast-signature-256']).toBe(signWebhook(SECRET, Number(got.headers['x-vast-timestamp']), got.body));
    await new Promise((r) => setTimeout(r, 150));
    expect(events('/hook')).toHaveLength(1);
  });

  test('client:low_credit when billing draws the credit below the threshold, and again after a top-up and a new fall', async () => {
    // A manual clock at time scale 1 makes the bill exact.
    let now = 1_000_000;
    const manual = await startTestSim({
      timeScale: 1,
      now: () => now,
      config: {
        account: { credit: 12, low_credit_threshold: 10 },
        lifecycle: { provision_s: 0, boot_s: { min: 0, max: 0 } },
        webhooks: { initial: [{ webhook_url: `${base}/low`, event_types: ['client:low_credit'] }] },
      },
    });
    sims.push(manual);
    const offer = manual.offers().find((o) => o.dph_base > 0.5)!;
    await call(manual, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' });
    await new Promise((r) => setTimeout(r, 150));
    expect(events('/low')).toHaveLength(0);
    now += Math.ceil(2.5 / offer.dph_base) * 3600_000; // more than $2.5 billed: below $10
    const first = await waitFor(() => events('/low')[0], 3000, 'low credit');
    expect(JSON.parse(first.body).notif_type).toBe('low_credit');
    manual.addCredit(100);
    await new Promise((r) => setTimeout(r, 150)); // a few ticks above the threshold
    expect(events('/low')).toHaveLength(1);
    manual.addCredit(-100);
    await waitFor(() => events('/low')[1], 3000, 'the second low credit');
    await new Promise((r) => setTimeout(r, 150));
    expect(events('/low')).toHaveLength(2);
  });

  test('client:instance_offline (never the host event host:machine_offline) is signed with the rotated secret; instance events name the instance', async () => {
    const sim = await fresh({
      webhooks: {
        initial: [
          {
            name: 'ops',
            webhook_url: `${base}/hook`,
            event_types: ['host:machine_offline', 'client:instance_offline', 'client:instance_created', 'client:instance_started'],
            webhook_secret: SECRET,
          },
        ],
      },
    });
    const id = (await call(sim, 'GET', '/api/v0/webhooks/')).body.webhooks[0].id;
    const rotated = (await call(sim, 'POST', `/api/v0/webhooks/${id}/rotate-secret/`)).body.webhook.webhook_secret;
    const offer = sim.offers()[0]!;
    sim.setOfferProfile(offer.id, 'offline');
    const instanceId = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', label: 'wh' })).body.new_contract;
    const offline = await waitFor(
      () => events('/hook').find((r) => JSON.parse(r.body).notif_type === 'instance_offline'),
      3000,
      'offline event',
    );
    // The documented payload: the slug without its `client:` prefix, the instance named in the subject.
    expect(JSON.parse(offline.body)).toMatchObject({ notif_type: 'instance_offline', subject: `Instance ${instanceId} is offline` });
    expect(Object.keys(JSON.parse(offline.body)).sort()).toEqual(['event_id', 'message', 'notif_type', 'subject', 'timestamp', 'user_id']);
    expect(JSON.parse(offline.body).message).toContain(`Instance ${instanceId} (wh) on machine ${offer.machine_id}`);
    // A renter is never sent the host's event, even when subscribed to it.
    expect(events('/hook').map((r) => JSON.parse(r.body).notif_type)).not.toContain('machine_offline');
    expect(verify(offline, rotated)).toBe(true);
    expect(verify(offline, SECRET)).toBe(false);
    expect(events('/hook').map((r) => JSON.parse(r.body).notif_type)).toContain('instance_created');
  });

  test('client:outbid when a bid change loses', async () => {
    const sim = await fresh({ webhooks: { initial: [{ webhook_url: `${base}/hook`, event_types: ['client:outbid'] }] } });
    const offer = (await call(sim, 'POST', '/api/v0/bundles/', { type: 'bid', limit: 1 })).body.offers[0];
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', price: offer.min_bid })).body.new_contract;
    await call(sim, 'PUT', `/api/v0/instances/bid_price/${id}/`, { client_id: 'me', price: offer.min_bid / 2 });
    const got = await waitFor(() => events('/hook')[0], 3000, 'outbid');
    expect(JSON.parse(got.body)).toMatchObject({ notif_type: 'outbid', subject: `Instance ${id} was outbid` });
  });
});

/**
 * How long a test waits for a chain of retries to play out: the delays are sim seconds on the
 * world's tick and the timeouts wall ms, so a loaded machine stretches them (a wait, not a claim on speed).
 */
const RETRIES_WAIT_MS = 15_000;

describe('retries', () => {
  test('408, 429 and 5xx are retried with the same event id and body, each attempt signed anew', async () => {
    const sim = await fresh({
      webhooks: {
        initial: [{ webhook_url: `${base}/flaky`, event_types: ['client:instance_created'], webhook_secret: SECRET }],
        retry_delays_s: [5, 5, 5],
      },
    });
    script['/flaky'] = [503, 408, 429, 204];
    await call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x' });
    // The receiver sees the 4th request before the simulator has read its answer: wait for both.
    await waitFor(
      () => (events('/flaky').length === 4 && sim.webhookDeliveries().at(-1)?.outcome === 'delivered' ? true : undefined),
      RETRIES_WAIT_MS,
      'four attempts',
    );
    const got = events('/flaky');
    expect(got.map((r) => r.headers['x-vast-delivery-attempt'])).toEqual(['1', '2', '3', '4']);
    expect(new Set(got.map((r) => r.headers['x-vast-event-id'])).size).toBe(1);
    expect(new Set(got.map((r) => r.body)).size).toBe(1);
    expect(got.every((r) => verify(r, SECRET))).toBe(true);
    const outcomes = sim.webhookDeliveries().map((d) => [d.attempt, d.status, d.outcome]);
    expect(outcomes).toEqual([
      [1, 503, 'retry'],
      [2, 408, 'retry'],
      [3, 429, 'retry'],
      [4, 204, 'delivered'],
    ]);
  });

  test('a timeout (10 s by default) is retried; retries stop when the delays run out', async () => {
    const sim = await fresh({
      webhooks: {
        initial: [{ webhook_url: `${base}/slow`, event_types: ['client:instance_created'] }],
        retry_delays_s: [5, 5],
        delivery_timeout_ms: 100,
      },
    });
    await call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x' });
    await waitFor(() => (sim.webhookDeliveries().at(-1)?.outcome === 'failed' ? true : undefined), RETRIES_WAIT_MS, 'the last attempt');
    expect(sim.webhookDeliveries().map((d) => [d.attempt, d.status, d.outcome])).toEqual([
      [1, null, 'retry'],
      [2, null, 'retry'],
      [3, null, 'failed'],
    ]);
    expect(sim.webhookDeliveries()[0]!.error).toMatch(/Timeout|abort/i);
  });

  test('3xx (not followed) and 4xx other than 408/429 fail at once; a private network target is refused', async () => {
    const sim = await fresh({
      webhooks: {
        initial: [
          { webhook_url: `${base}/redirect`, event_types: ['client:instance_created'] },
          { webhook_url: `${base}/bad`, event_types: ['client:instance_created'] },
          { webhook_url: 'https://10.1.2.3/hook', event_types: ['client:instance_created'] },
        ],
      },
    });
    script['/redirect'] = [302];
    script['/bad'] = [400];
    await call(sim, 'PUT', `/api/v0/asks/${sim.offers()[0]!.id}/`, { image: 'x' });
    await waitFor(
      () => (sim.webhookDeliveries().every((d) => d.outcome === 'failed') && sim.webhookDeliveries().length === 3 ? true : undefined),
      3000,
      'three failures',
    );
    await new Promise((r) => setTimeout(r, 100));
    expect(received.map((r) => r.path).sort()).toEqual(['/bad', '/redirect']); // no redirect followed, no retry
    expect(sim.webhookDeliveries().find((d) => d.url.includes('10.1.2.3'))!.error).toContain('private network');
  });

  test('the test endpoint sends webhook_test once, never retried', async () => {
    const sim = await fresh();
    script['/down'] = [500];
    const w = (await call(sim, 'POST', '/api/v0/webhooks/', { webhook_url: `${base}/down`, event_types: ['client:low_credit'] })).body
      .webhook;
    expect((await call(sim, 'POST', `/api/v0/webhooks/${w.id}/test/`)).body).toEqual({ success: true, msg: 'Test webhook delivered' });
    const got = await waitFor(() => events('/down')[0], 3000, 'test delivery');
    expect(JSON.parse(got.body).notif_type).toBe('webhook_test');
    expect(verify(got, w.webhook_secret)).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(events('/down')).toHaveLength(1);
    expect((await call(sim, 'POST', '/api/v0/webhooks/999/test/')).status).toBe(404);
  });

  test('failed deliveries are recorded, not thrown, and do not slow requests', async () => {
    const sim = await fresh({ webhooks: { retry_delays_s: [5, 5, 5], delivery_timeout_ms: 60_000 } });
    await call(sim, 'POST', '/api/v0/webhooks/', { webhook_url: 'http://127.0.0.1:1/closed', event_types: ['client:instance_offline'] });
    await call(sim, 'POST', '/api/v0/webhooks/', { webhook_url: `${base}/held`, event_types: ['client:instance_offline'] });
    const offer = sim.offers()[1]!;
    await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' });
    sim.takeMachineOffline(offer.machine_id);
    // While the receiver holds a delivery unanswered, a request is answered: no request waits on one.
    await waitFor(() => events('/held')[0], 3000, 'the held delivery');
    expect((await call(sim, 'GET', '/api/v0/users/current/')).status).toBe(200);
    expect(sim.webhookDeliveries().find((d) => d.url.endsWith('/held'))!.outcome).toBe('pending');
    release.splice(0).forEach((answer) => answer());
    const failed = await waitFor(
      () => sim.webhookDeliveries().find((d) => d.url.endsWith('/closed') && d.error !== null),
      3000,
      'failed delivery',
    );
    expect(failed.status).toBeNull();
  });
});

describe('webhook limits', () => {
  test('at most 4 per user; https only (http to loopback only); 2048-character URLs; 120-character names', async () => {
    const sim = await fresh();
    const create = (body: Record<string, unknown>) =>
      call(sim, 'POST', '/api/v0/webhooks/', { event_types: ['client:low_credit'], ...body });
    for (const body of [
      { webhook_url: 'http://example.com/hook' },
      { webhook_url: 'ftp://example.com/hook' },
      { webhook_url: 'https:///nohost' },
      { webhook_url: `https://example.com/${'x'.repeat(2030)}` },
      { webhook_url: 'https://example.com/', name: 'n'.repeat(121) },
      { webhook_url: 'https://example.com/', name: 'bad\nname' },
      { webhook_url: 'https://example.com/', event_types: [] },
      { webhook_url: 'https://example.com/', event_types: ['instance_created'] },
    ]) {
      const r = await create(body);
      expect([r.status, r.body.error], JSON.stringify(body).slice(0, 80)).toEqual([400, 'invalid_args']);
    }
    for (const u of ['https://example.com/a', 'http://127.0.0.1:9/b', 'http://localhost:9/c', 'http://[::1]:9/d']) {
      const r = await create({ webhook_url: u, name: 'n'.repeat(120) });
      expect(r.status, u).toBe(200);
      expect(r.body.enabled_notification_preferences).toEqual(['client:low_credit']);
    }
    const fifth = await create({ webhook_url: 'https://example.com/e' });
    expect([fifth.status, fifth.body.error]).toEqual([400, 'invalid_args']);
    expect(fifth.body.msg).toContain('at most 4 webhooks');
  });
});
