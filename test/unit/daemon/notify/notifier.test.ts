// The notifier on a real SQLite store, fake time and a real HTTP receiver: signed POSTs of exactly
// what the outbox holds, retries with backoff until `retry_for_s`, then dead; timeouts; bounded
// concurrency per target; nothing sent for an event whose transaction did not commit.
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Config, NotifyTargetConfig } from '../../../../src/config/schema.js';
import { Notifier, type DeliveryResult, type NotifierOptions } from '../../../../src/daemon/notify/notifier.js';
import { silentLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { NotificationBodySchema } from '../../../../src/wire/control-api.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  res: ServerResponse;
}

const SECRET = 'whsec-test-0123456789';
const SETTINGS: Config['notifications'] = { timeout_s: 10, retry_for_s: 86_400, max_delay_s: 3600, max_concurrent: 2 };

let dir: string | undefined;
let store: Store | undefined;
let server: Server | undefined;
let notifier: Notifier | undefined;
afterEach(async () => {
  await notifier?.stop();
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  notifier = undefined;
  server = undefined;
});

/** A receiver that hands each request to `answer` (which may leave it hanging). */
async function receiver(answer: (r: Received) => void): Promise<{ url: string; got: Received[] }> {
  const got: Received[] = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), res };
      got.push(r);
      answer(r);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/secret-path`, got };
}

function setup(targets: NotifyTargetConfig[], settings = SETTINGS, more: Pick<NotifierOptions, 'delivers'> = {}) {
  dir = mkdtempSync(join(tmpdir(), 'berth-notify-'));
  store = openStore({ home: dir });
  const clock = new FakeClock();
  const results: DeliveryResult[] = [];
  notifier = new Notifier({
    store,
    clock,
    log: silentLogger(),
    targets,
    secrets: { HOOK_SECRET: SECRET },
    settings,
    userAgent: 'berth/test',
    onResult: (r) => results.push(r),
    random: () => 1, // no jitter: the backoff is exactly 1 s, 2 s, 4 s, ...
    ...more,
  });
  notifier.start();
  const s = store;
  const n = notifier;
  const notify = (runId: string, message: string) =>
    s.transaction(() => {
      const logId = s.events.append({ runId, at: clock.now(), type: 'run.failed', message });
      return n.enqueue({ id: runId, name: `job-${runId}`, state: 'failed' }, 'run.failed', { logId, message, data: { k: 1 } }, clock.now());
    });
  return { store: s, clock, results, notify, targets, settings };
}

const rows = (s: Store) => s.outbox.list(1000).reverse();

describe('Notifier', () => {
  it('POSTs the stored body signed with HMAC-SHA256 of "<t>.<body>", with the notification id, and marks it delivered', async () => {
    const rx = await receiver((r) => r.res.writeHead(200).end());
    const { store: s, clock, notify, results } = setup([{ url: rx.url, format: 'json', secret_env: 'HOOK_SECRET' }]);
    const id = notify('r1', 'run failed (no_offers): nothing matched');
    await clock.advance(0);
    await vi.waitFor(() => expect(rows(s)[0]!.state).toBe('delivered'));

    expect(rx.got).toHaveLength(1);
    const { headers, body } = rx.got[0]!;
    const parsed = NotificationBodySchema.parse(JSON.parse(body));
    expect(parsed).toMatchObject({
      id,
      type: 'run.failed',
      run: { id: 'r1', name: 'job-r1', state: 'failed' },
      message: 'run failed (no_offers): nothing matched',
      data: { k: 1 },
    });
    expect(body).toBe(rows(s)[0]!.body);
    expect(headers['berth-event-id']).toBe(id);
    expect(headers['berth-delivery-attempt']).toBe('1');
    expect(headers['content-type']).toBe('application/json');
    // The receiver's check (README: Notifications).
    const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(headers['berth-signature']))!;
    expect(Number(m[1])).toBe(Math.floor(clock.now() / 1000));
    expect(m[2]).toBe(createHmac('sha256', SECRET).update(`${m[1]}.${body}`).digest('hex'));
    expect(results).toEqual(['delivered']);
  });

  it('on a shared store, posts only while it leads, and finds rows another daemon stored without being woken', async () => {
    const rx = await receiver((r) => r.res.writeHead(200).end());
    let leads = false;
    const { store: s, clock, targets, settings } = setup([{ url: rx.url, format: 'json' }], SETTINGS, { delivers: () => leads });
    // Another daemon on the same store: it stores notifications, and its wake reaches only itself.
    const other = new Notifier({ store: s, clock, log: silentLogger(), targets, secrets: {}, settings, userAgent: 'berth/test' });
    const byOther = (runId: string) =>
      s.transaction(() =>
        other.enqueue({ id: runId, name: runId, state: 'failed' }, 'run.failed', { logId: null, message: 'm', data: {} }, clock.now()),
      );
    byOther('r1');
    await clock.advance(5000);
    expect(rx.got).toHaveLength(0);
    leads = true;
    await clock.advance(2000);
    await vi.waitFor(() => expect(rows(s)[0]!.state).toBe('delivered'));
    // Idle now, with nothing due: a row the other daemon stores is still found within a couple of seconds.
    byOther('r2');
    await clock.advance(2000);
    await vi.waitFor(() => expect(rows(s).map((r) => r.state)).toEqual(['delivered', 'delivered']));
    await other.stop();
  });

  it('sends a Slack-compatible {text} body for format "slack", unsigned without secret_env', async () => {
    const rx = await receiver((r) => r.res.writeHead(200).end('ok'));
    const { store: s, clock, notify } = setup([{ url: rx.url, format: 'slack' }]);
    notify('r2', 'run failed (auth): check BERTH_API_KEY');
    await clock.advance(0);
    await vi.waitFor(() => expect(rows(s)[0]!.state).toBe('delivered'));
    expect(JSON.parse(rx.got[0]!.body)).toEqual({ text: 'berth: run job-r2 (r2) run.failed: run failed (auth): check BERTH_API_KEY' });
    expect(rx.got[0]!.headers['berth-signature']).toBeUndefined();
  });

  /** Moves time to each retry until the notification is dead; returns the waits between tries. */
  async function untilDead(s: Store, clock: FakeClock, results: DeliveryResult[]): Promise<number[]> {
    const waits: number[] = [];
    for (let tries = 1; ; tries++) {
      await clock.advance(Math.max(0, (rows(s)[0]!.next_at ?? clock.now()) - clock.now()));
      // Each POST's result is recorded before it is reported.
      await vi.waitFor(() => expect(results).toHaveLength(tries));
      const row = rows(s)[0]!;
      if (row.state === 'dead') return waits;
      waits.push(row.next_at! - clock.now());
      expect(tries).toBeLessThan(100);
    }
  }

  it('retries a failing receiver with doubling waits (same id, attempt counted) and marks it dead once retry_for_s has passed', async () => {
    const rx = await receiver((r) => r.res.writeHead(503).end());
    const { store: s, clock, notify, results } = setup([{ url: rx.url, format: 'json' }], { ...SETTINGS, retry_for_s: 60 });
    const id = notify('r3', 'x');
    const made = clock.now();
    const waits = await untilDead(s, clock, results);
    const dead = rows(s)[0]!;
    expect(dead).toMatchObject({ state: 'dead', last_error: 'HTTP 503' });
    // 1, 2, 4, 8, 16 s, then the last try at the end of the 60 s.
    expect(waits).toEqual([1000, 2000, 4000, 8000, 16_000, 60_000 - 31_000]);
    expect(dead.finished_at).toBe(made + 60_000);
    expect(rx.got.map((r) => r.headers['berth-event-id'])).toEqual(Array(7).fill(id));
    expect(rx.got.map((r) => r.headers['berth-delivery-attempt'])).toEqual(['1', '2', '3', '4', '5', '6', '7']);
    expect(results).toEqual([...Array(6).fill('failed'), 'dead']);
  });

  it('with the defaults, tries a receiver that is down for 24 h, at most an hour apart, then marks it dead', async () => {
    const rx = await receiver((r) => r.res.destroy()); // the connection drops: no answer at all
    const defaults: Config['notifications'] = { timeout_s: 10, retry_for_s: 86_400, max_delay_s: 3600, max_concurrent: 4 };
    const { store: s, clock, notify, results } = setup([{ url: rx.url, format: 'json' }], defaults);
    notify('r4', 'x');
    const made = clock.now();
    const waits = await untilDead(s, clock, results);
    expect(Math.max(...waits)).toBe(3_600_000);
    expect(waits.slice(0, 12)).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048].map((x) => x * 1000));
    expect(rows(s)[0]).toMatchObject({ state: 'dead', finished_at: made + 86_400_000 });
    expect(rx.got.length).toBe(waits.length + 1);
  });

  it('gives a receiver that does not answer timeout_s, and never more than max_concurrent POSTs at once per target', async () => {
    const rx = await receiver(() => undefined); // never answers
    const { store: s, clock, notify } = setup([{ url: rx.url, format: 'json' }]);
    for (let i = 0; i < 5; i++) notify(`r${i}`, `event ${i}`);
    await clock.advance(0);
    await vi.waitFor(() => expect(rx.got).toHaveLength(2));
    await clock.advance(9_000);
    expect(rx.got).toHaveLength(2);
    await clock.advance(1_000);
    // The two timed out (retried later); the next two go.
    await vi.waitFor(() => expect(rx.got).toHaveLength(4));
    expect(rows(s).filter((r) => r.last_error === 'TIMEOUT')).toHaveLength(2);
    expect(rows(s).every((r) => r.state === 'pending')).toBe(true);
  });

  it('sends nothing for an event whose transaction did not commit', async () => {
    const rx = await receiver((r) => r.res.writeHead(200).end());
    const { store: s, clock, notify } = setup([{ url: rx.url, format: 'json' }]);
    expect(() =>
      s.transaction(() => {
        notify('r9', 'never stored');
        throw new Error('rolled back');
      }),
    ).toThrow('rolled back');
    await clock.advance(5_000);
    expect(rows(s)).toEqual([]);
    expect(rx.got).toEqual([]);
  });
});
