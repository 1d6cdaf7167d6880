// Notifications from a real daemon process: a burst of run events with the daemon SIGKILLed in the
// middle of it, then restarted. The receiver must get every notification the stored events call
// for, signed, duplicates only under the same id; and receivers that hang or refuse end `dead`
// without holding up any run.
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningSimulator } from '../../src/sim/index.js';
import { NotificationBodySchema, type Notification, type NotificationBody, type Run, type RunEvent } from '../../src/wire/control-api.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

const SECRET = 'e2e-signing-key-4f1c2b';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;
let home: string | undefined;
const servers: Server[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  sim = daemon = home = undefined;
});
// Registered after the hook above, so run before it (vitest runs after-hooks as a stack): the daemon ends before its receivers.
const world = useSpawnedWorld();

interface Delivery {
  body: NotificationBody;
  raw: string;
  signed: boolean;
}

/** A receiver that checks each signature and answers 200 after `delayMs`. */
async function receiver(delayMs: number): Promise<{ url: string; got: Delivery[] }> {
  const got: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(req.headers['berth-signature']));
      const signed = m !== null && createHmac('sha256', SECRET).update(`${m[1]}.${raw}`).digest('hex') === m[2];
      got.push({ body: NotificationBodySchema.parse(JSON.parse(raw)), raw, signed });
      setTimeout(() => res.writeHead(200).end(), delayMs);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/berth`, got };
}

async function start(notify: unknown[], notifications: Record<string, number> = {}) {
  sim = await world.sim({ seed: 13, config: FAST_SIM });
  home = world.home('berth-e2e-notify-');
  const setup = {
    home,
    simUrl: sim.url,
    apiKey: sim.apiKey,
    config: { ...FAST_CONFIG, notify, notifications: { timeout_s: 1, ...notifications } } as never,
    env: { HOOK_SECRET: SECRET },
  };
  daemon = await world.spawn(setup);
  return { restart: async () => (daemon = await world.spawn(setup)) };
}

/** What the stored events call for: (event-log id, notification type) pairs. */
function expectedFrom(events: RunEvent[]): string[] {
  const FAILED = new Set(['exited', 'unknown', 'offline', 'boot_timeout', 'unreachable', 'outbid', 'create_failed']);
  const out: string[] = [];
  for (const e of events) {
    const outcome = (e.data as { outcome?: string } | null)?.outcome;
    if (e.type === 'attempt.running') out.push(`${e.id} run.running`);
    if (e.type === 'attempt.ended' && outcome === 'lost') out.push(`${e.id} instance.lost`);
    if (e.type === 'attempt.ended' && outcome && FAILED.has(outcome)) out.push(`${e.id} attempt.failed`);
    if (e.type === 'run.failed' || e.type === 'run.cancelled' || e.type === 'run.expired') out.push(`${e.id} ${e.type}`);
  }
  return out;
}

async function outbox(): Promise<Notification[]> {
  return (await daemon!.api<Notification[]>('GET', '/v1/notifications?limit=10000')).body;
}

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`${what} did not happen; last: ${JSON.stringify(v).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('notifications (real daemon process)', () => {
  it('arrive signed, exactly the stored events, after a SIGKILL in the middle of a burst: none lost, repeats only under the same id', async () => {
    const rx = await receiver(40);
    const { restart } = await start([{ url: rx.url, secret_env: 'HOOK_SECRET' }]);
    const specs = [
      ...Array.from({ length: 6 }, (_, i) => jobSpec({ name: `ok-${i}` })), // run.running
      ...Array.from({ length: 6 }, (_, i) => jobSpec({ name: `never-${i}`, max_price_per_hour: 0.001 })), // run.failed at once
      ...Array.from({ length: 4 }, (_, i) => jobSpec({ name: `slow-${i}`, boot_timeout_s: 0.05, max_attempts: 2 })), // attempt.failed ×2, run.failed
    ];
    const ids: string[] = [];
    for (const spec of specs) ids.push((await daemon!.api<Run>('POST', '/v1/runs', spec)).body.id);
    // Killed once the burst is under way: some notifications sent, others stored and waiting, some on the wire.
    await until(
      'a few deliveries',
      async () => rx.got.length,
      (n) => n >= 4,
    );
    await daemon!.kill9();
    const beforeKill = rx.got.length;
    await restart();

    const settled = (r: Run) => r.state === 'running' || r.state === 'failed';
    for (const id of ids) await daemon!.waitFor(id, settled, 60_000);
    for (const id of ids) {
      const r = (await daemon!.api<Run>('GET', `/v1/runs/${id}`)).body;
      if (r.state === 'running') await daemon!.api('POST', `/v1/runs/${id}/cancel`);
    }
    for (const id of ids) await daemon!.waitFor(id, (r) => r.state === 'failed' || r.state === 'cancelled', 60_000);
    const rows = await until('every delivery done', outbox, (all) => all.length > 0 && all.every((n) => n.state === 'delivered'), 60_000);

    const events = (await Promise.all(ids.map(async (id) => (await daemon!.api<RunEvent[]>('GET', `/v1/runs/${id}/events`)).body))).flat();
    const expected = expectedFrom(events).sort();
    // The six ok-* runs; a slow-* run whose instance the boot deadline's last look (#18) finds running
    // is kept and runs too, which a loaded machine makes likelier: the deliveries below must match either way.
    expect(expected.filter((e) => e.endsWith('run.running')).length).toBeGreaterThanOrEqual(6);
    expect(expected.filter((e) => e.endsWith('attempt.failed')).length).toBeGreaterThanOrEqual(4);
    // Every POST was signed; repeats of an id carry the same body.
    expect(rx.got.every((d) => d.signed)).toBe(true);
    const byId = new Map<string, Delivery[]>();
    for (const d of rx.got) byId.set(d.body.id, [...(byId.get(d.body.id) ?? []), d]);
    for (const same of byId.values()) expect(new Set(same.map((d) => d.raw)).size).toBe(1);
    // Exactly the stored events: none lost, none invented.
    const received = [...byId.values()].map(([d]) => `${d!.body.log_id} ${d!.body.type}`).sort();
    expect(received).toEqual(expected);
    expect(rows.map((n) => n.id).sort()).toEqual([...byId.keys()].sort());
    expect(rx.got.length).toBeGreaterThan(beforeKill);

    // `berth notifications --json` shows the same deliveries, and /metrics counts them.
    const cli = await berth(['notifications', '--json'], userEnv(home!));
    expect(cli.code, cli.stderr).toBe(0);
    expect((JSON.parse(cli.stdout) as Notification[]).map((n) => n.state)).toEqual(rows.map(() => 'delivered'));
    const metrics = parsePrometheus(await fetch(`${daemon!.url}/metrics`).then((r) => r.text()));
    expect(sampleValue(metrics, 'berth_notifications', { state: 'delivered' })).toBe(rows.length);
  });

  it('receivers that hang or refuse end dead without holding up any run', async () => {
    // Holds every POST unanswered until the test lets go; then drops each at once.
    const hung: Array<() => void> = [];
    let letGo = false;
    const hanging = createServer((req) => {
      req.resume();
      if (letGo) req.socket.destroy();
      else hung.push(() => req.socket.destroy());
    });
    servers.push(hanging);
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
    const refused = createServer();
    await new Promise<void>((r) => refused.listen(0, '127.0.0.1', r));
    const refusedPort = (refused.address() as AddressInfo).port;
    await new Promise((r) => refused.close(r)); // nothing listens there now

    await start(
      [
        { url: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/slow-secret-path`, events: ['run.running', 'run.cancelled'] },
        { url: `http://127.0.0.1:${refusedPort}/down`, format: 'slack' },
      ],
      // A POST may hang 30 s, one at a time: a run that waited on one would not be running for minutes.
      { timeout_s: 30, retry_for_s: 3, max_concurrent: 1 },
    );
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await daemon!.api<Run>('POST', '/v1/runs', jobSpec({ name: `busy-${i}` }))).body.id);
    for (const id of ids) await daemon!.waitFor(id, (r) => r.state === 'running', 25_000);
    // Every run is running while the hanging receiver holds the one POST it got, unanswered.
    expect(hung).toHaveLength(1);
    expect((await outbox()).filter((n) => n.type === 'run.running')).toHaveLength(12);

    letGo = true;
    for (const h of hung) h();
    const rows = await until('every delivery dead', outbox, (all) => all.length === 12 && all.every((n) => n.state === 'dead'), 30_000);
    expect(new Set(rows.filter((n) => n.target === 0).map((n) => n.last_error)).size).toBeGreaterThanOrEqual(1);
    expect(rows.filter((n) => n.target === 1).map((n) => n.last_error)).toEqual(Array(6).fill('ECONNREFUSED'));
    // A target is shown by its origin, never its path.
    expect(JSON.stringify(rows)).not.toContain('slow-secret-path');
    const cli = await berth(['notifications'], userEnv(home!));
    expect(cli.stdout).toMatch(/^0 pending, 0 delivered, 12 dead$/m);
    const metrics = parsePrometheus(await fetch(`${daemon!.url}/metrics`).then((r) => r.text()));
    expect(sampleValue(metrics, 'berth_notifications', { state: 'dead' })).toBe(12);
    expect(sampleValue(metrics, 'berth_notification_posts_total', { result: 'dead' })).toBe(12);
  });
});
