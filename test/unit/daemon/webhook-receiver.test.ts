// The webhook signature check and the machine id of a machine_offline event, on their own.
import { describe, expect, it } from 'vitest';
import { machineIdOf, verifyDelivery } from '../../../src/daemon/inbound/webhook-receiver.js';
import { signWebhook } from '../../../src/sim/index.js';

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

describe('machineIdOf', () => {
  it('reads the machine from the subject, else the message', () => {
    expect(machineIdOf('Machine 10566 is offline', 'x')).toBe(10566);
    expect(machineIdOf('Host alert', 'Instance 5 (berth:a:b:1) on machine 77 is offline: the host disconnected.')).toBe(77);
    expect(machineIdOf('Host alert', 'nothing here')).toBeNull();
    expect(machineIdOf(undefined, 42)).toBeNull();
  });
});
