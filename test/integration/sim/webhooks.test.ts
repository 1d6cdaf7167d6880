// Webhook deliveries: low credit and machine offline events, POSTed to a local receiver and signed
// with the webhook's secret (rotation changes the signing secret).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { signWebhook, type RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim, waitFor } from './helpers.js';

interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const SECRET = 'whsec_test_secret_value';
let receiver: Server;
let received: Received[] = [];
let sim: RunningSimulator;
let hookUrl: string;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  sim = await startTestSim({
    config: {
      account: { credit: 5, low_credit_threshold: 10 },
      webhooks: { initial: [{ name: 'ops', webhook_url: hookUrl, event_types: ['client:low_credit', 'host:machine_offline'], webhook_secret: SECRET }] },
    },
  });
});
afterAll(async () => {
  await sim.close();
  await new Promise((r) => receiver.close(r));
});

function verify(r: Received, secret: string): boolean {
  const sig = String(r.headers['x-webhook-signature']);
  const t = Number(/t=(\d+)/.exec(sig)![1]);
  return sig === signWebhook(secret, t, r.body);
}

test('client:low_credit is delivered once, signed', async () => {
  const got = await waitFor(() => received.find((r) => JSON.parse(r.body).event_type === 'client:low_credit'), 3000, 'low credit');
  const body = JSON.parse(got.body);
  expect(body).toMatchObject({ event_type: 'client:low_credit', created_at: expect.any(Number), data: { credit: 5, threshold: 10 } });
  expect(got.headers['content-type']).toBe('application/json');
  expect(verify(got, SECRET)).toBe(true);
  expect(verify(got, 'another secret')).toBe(false);
  await new Promise((r) => setTimeout(r, 150));
  expect(received.filter((r) => JSON.parse(r.body).event_type === 'client:low_credit')).toHaveLength(1);
});

test('host:machine_offline is delivered when an instance goes offline, signed with the rotated secret', async () => {
  const id = (await call(sim, 'GET', '/api/v0/webhooks/')).body.webhooks[0].id;
  const rotated = (await call(sim, 'POST', `/api/v0/webhooks/${id}/rotate-secret`)).body.webhook.webhook_secret;
  received = [];
  const offer = sim.offers()[0]!;
  sim.setOfferProfile(offer.id, 'offline');
  const instanceId = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', label: 'wh' })).body.new_contract;
  const got = await waitFor(() => received.find((r) => JSON.parse(r.body).event_type === 'host:machine_offline'), 3000, 'offline event');
  expect(JSON.parse(got.body).data).toEqual({ instance_id: instanceId, machine_id: offer.machine_id, label: 'wh' });
  expect(verify(got, rotated)).toBe(true);
  expect(verify(got, SECRET)).toBe(false);
});

test('failed deliveries are recorded, not thrown, and do not slow requests', async () => {
  await call(sim, 'POST', '/api/v0/webhooks/', { webhook_url: 'http://127.0.0.1:1/closed', event_types: ['host:machine_offline'] });
  const offer = sim.offers()[1]!;
  await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' });
  const t = Date.now();
  sim.takeMachineOffline(offer.machine_id);
  expect((await call(sim, 'GET', '/api/v0/users/current/')).status).toBe(200);
  expect(Date.now() - t).toBeLessThan(500);
  const failed = await waitFor(() => sim.webhookDeliveries().find((d) => d.url.endsWith('/closed') && d.error !== null), 3000, 'failed delivery');
  expect(failed.status).toBeNull();
});
