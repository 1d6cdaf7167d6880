// The webhook signature check, the instance and time an instance event names, and the receiver on
// a real socket, a real store and fake time: which events it acts on, and that a repeated event is
// answered 200 and acted on once, for as long as the service may retry it, across a restart.
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createWebhookReceiver,
  eventTimeMs,
  instanceIdOf,
  verifyDelivery,
  type InstanceNotice,
} from '../../../../src/daemon/inbound/webhook-receiver.js';
import { silentLogger } from '../../../../src/logger.js';
import { signWebhook } from '../../../../src/sim/index.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const SECRET = 'whsec_unit';
const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const T = Math.floor(NOW / 1000);
const body = Buffer.from('{"event_id":"e1","notif_type":"low_credit"}');
const check = (timestamp: string | undefined, signature: string | undefined, raw = body, now = NOW) =>
  verifyDelivery({ timestamp, signature }, raw, SECRET, now, 300);

describe('verifyDelivery', () => {
  it('accepts the documented signature of the raw body within the tolerance', () => {
    expect(check(String(T), signWebhook(SECRET, T, body.toString()))).toEqual({ ok: true });
    expect(check(String(T - 300), signWebhook(SECRET, T - 300, body.toString()))).toEqual({ ok: true });
  });

  it('refuses another secret, another body, another timestamp, a stale or future one, and malformed headers', () => {
    const good = signWebhook(SECRET, T, body.toString());
    expect(check(String(T), signWebhook('other', T, body.toString()))).toMatchObject({ ok: false, why: 'the signature does not match' });
    expect(check(String(T), good, Buffer.from(`${body.toString()} `))).toMatchObject({ ok: false });
    expect(check(String(T + 1), good)).toMatchObject({ ok: false, why: 'the signature does not match' });
    expect(check(String(T - 301), signWebhook(SECRET, T - 301, body.toString()))).toMatchObject({
      ok: false,
      why: 'the timestamp is more than 300 s from now',
    });
    expect(check(String(T + 301), signWebhook(SECRET, T + 301, body.toString()))).toMatchObject({ ok: false });
    expect(check(undefined, good)).toMatchObject({ ok: false, why: 'X-Vast-Timestamp is missing or not an integer' });
    expect(check(`${T}.5`, good)).toMatchObject({ ok: false });
    expect(check(String(T), good.slice(7))).toMatchObject({ ok: false, why: 'X-Vast-Signature-256 is missing or not sha256=<hex>' });
    expect(check(String(T), `${good}00`)).toMatchObject({ ok: false });
  });
});

describe('instanceIdOf and eventTimeMs', () => {
  it('reads the instance from the subject, else the message, and the event time from the payload', () => {
    expect(instanceIdOf('Instance 10566 was outbid', 'x')).toBe(10566);
    expect(instanceIdOf('Outbid', 'Your interruptible instance #77 (berth:a:b:1) on machine 9 was outbid and paused.')).toBe(77);
    expect(instanceIdOf('Your interruptible instance was outbid', 'Machine 12 is offline')).toBeNull();
    expect(instanceIdOf(undefined, 42)).toBeNull();
    expect(eventTimeMs(1772490000.123)).toBe(1772490000123);
    expect([eventTimeMs('1772490000'), eventTimeMs(null), eventTimeMs(-1), eventTimeMs(Number.NaN)]).toEqual([null, null, null, null]);
  });
});

describe('the receiver', () => {
  const dirs: string[] = [];
  const servers: Server[] = [];
  const stores: Store[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
    stores.splice(0).forEach((s) => s.close());
    dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
  });

  const clock = new FakeClock(NOW);
  async function receiver(home: string) {
    const store = openStore({ home });
    stores.push(store);
    const told: Array<[string, InstanceNotice | null]> = [];
    const server = createWebhookReceiver({
      secret: SECRET,
      toleranceS: 300,
      store,
      clock,
      log: silentLogger(),
      onLowCredit: () => void told.push(['low_credit', null]),
      onOutbid: (n) => (told.push(['outbid', n]), n.instanceId === 5 ? 'run-a' : null),
      onInstanceOffline: (n) => (told.push(['offline', n]), 'run-b'),
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const post = async (payload: Record<string, unknown>) => {
      const raw = JSON.stringify(payload);
      const t = Math.floor(clock.now() / 1000); // each attempt is signed anew, as the service's retries are
      const res = await request(url, {
        method: 'POST',
        headers: { 'x-vast-timestamp': String(t), 'x-vast-signature-256': signWebhook(SECRET, t, raw) },
        body: raw,
      });
      return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
    };
    return { post, told, store };
  }
  const home = () => {
    const d = mkdtempSync(join(tmpdir(), 'berth-wh-'));
    dirs.push(d);
    return d;
  };
  const payload = (event_id: string, notif_type: string, subject: string, timestamp: unknown = clock.now() / 1000) => ({
    event_id,
    user_id: 1,
    notif_type,
    subject,
    message: 'x',
    timestamp,
  });

  it("acts on the renter's outbid and instance_offline with the instance and the event's time, not on the host's machine_offline", async () => {
    const r = await receiver(home());
    expect(await r.post(payload('e1', 'outbid', 'Instance 5 was outbid', 1772490000.5))).toEqual({
      status: 200,
      body: { accepted: true, event_id: 'e1', acted: 'on_outbid', instance_id: 5, run: 'run-a' },
    });
    expect(await r.post(payload('e2', 'instance_offline', 'Instance 6 is offline'))).toMatchObject({
      status: 200,
      body: { acted: 'failover', instance_id: 6, run: 'run-b' },
    });
    expect((await r.post(payload('e3', 'outbid', 'Instance 9 was outbid'))).body).toMatchObject({ acted: 'none', run: null });
    expect((await r.post(payload('e4', 'machine_offline', 'Machine 12 is offline'))).body).toMatchObject({ acted: 'none' });
    // No instance, or no event time to judge a late repeat by: the lists decide.
    expect((await r.post(payload('e5', 'outbid', 'Your instance was outbid'))).body).toMatchObject({ acted: 'none' });
    expect((await r.post(payload('e6', 'outbid', 'Instance 5 was outbid', 'yesterday'))).body).toMatchObject({ acted: 'none' });
    expect((await r.post(payload('e7', 'low_credit', 'Low'))).body).toMatchObject({ acted: 'credit_check' });
    expect(r.told).toEqual([
      ['outbid', { instanceId: 5, at: 1772490000500, eventId: 'e1', why: 'the service reports instance 5 outbid (client:outbid webhook)' }],
      [
        'offline',
        expect.objectContaining({ instanceId: 6, why: 'the service reports instance 6 offline (client:instance_offline webhook)' }),
      ],
      ['outbid', expect.objectContaining({ instanceId: 9 })],
      ['low_credit', null],
    ]);
  });

  it("answers a repeated event 200 and acts once, through the service's retries (hours) and a restart, and forgets it after a week", async () => {
    const dir = home();
    const first = await receiver(dir);
    const event = payload('evt-1', 'outbid', 'Instance 5 was outbid');
    expect((await first.post(event)).body).toMatchObject({ acted: 'on_outbid' });
    expect(await first.post(event)).toEqual({ status: 200, body: { accepted: true, event_id: 'evt-1', duplicate: true, acted: 'none' } });
    // A retry 3 h later, freshly signed: far past the timestamp tolerance, still remembered.
    await clock.advance(3 * 3_600_000);
    expect((await first.post(event)).body).toMatchObject({ duplicate: true });
    // A restart: the ids are in berth.db.
    await new Promise((r) => servers.pop()!.close(r));
    stores.pop()!.close();
    const second = await receiver(dir);
    expect((await second.post(event)).body).toMatchObject({ duplicate: true });
    expect([...first.told, ...second.told].filter(([k]) => k === 'outbid')).toHaveLength(1);
    // A week on, the row is purged by the next delivery.
    await clock.advance(7 * 86_400_000);
    await second.post(payload('evt-2', 'low_credit', 'Low'));
    expect(second.store.webhookEvents.firstTime('evt-1', clock.now(), 'outbid')).toBe(true);
  });
});
