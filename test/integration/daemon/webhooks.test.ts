// The daemon's webhook listener against real HTTP: deliveries signed as the service signs them act
// (machine_offline fails over every run on that machine at once; low_credit holds creates), and a
// bad signature, a stale timestamp or a replayed event is refused and changes nothing, also after a
// restart. The simulator's own deliveries are verified and acted on too.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { signWebhook, type SimOffer } from '../../../src/sim/index.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

const SECRET = 'whsec_test_0123456789abcdef0123456789abcdef';
const SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0bS9mb3ItdGVzdHMtb25seQ user@host';

let world: World | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await world?.close();
  world = undefined;
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

function secretFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-whsec-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'secret'), SECRET, { mode: 0o600 });
  return join(dir, 'secret');
}

interface Delivery {
  body: string;
  timestamp: number;
  signature: string;
}

function signed(payload: Record<string, unknown>, timestamp = Math.floor(Date.now() / 1000), secret = SECRET): Delivery {
  const body = JSON.stringify(payload);
  return { body, timestamp, signature: signWebhook(secret, timestamp, body) };
}

async function deliver(url: string, d: Delivery): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-vast-timestamp': String(d.timestamp),
      'x-vast-signature-256': d.signature,
      'x-vast-event-id': 'header-is-not-signed',
    },
    body: d.body,
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

const billed = (o: SimOffer) => o.dph_base + (o.storage_cost * 20) / 720;
const eligible = (o: SimOffer) => o.rentable && o.verified && o.direct_port_count >= 1 && billed(o) <= 5;

/** A machine with two eligible offers, and two machines with a higher id that have one each. */
function machines(offers: readonly SimOffer[]): { shared: number; others: [number, number] } {
  const byMachine = new Map<number, SimOffer[]>();
  for (const o of offers.filter(eligible)) byMachine.set(o.machine_id, [...(byMachine.get(o.machine_id) ?? []), o]);
  const ids = [...byMachine.keys()].sort((a, b) => a - b);
  const shared = ids.find((m) => byMachine.get(m)!.length >= 2)!;
  const higher = ids.filter((m) => m > shared);
  return { shared, others: [higher[0]!, higher[1]!] };
}

const running = (r: RunView) => r.state === 'running';

describe('webhook listener', () => {
  it('acts on a signed machine_offline at once, and refuses a bad signature, a stale timestamp and a replay (also after a restart)', async () => {
    world = await startWorld({ config: { webhooks: { listen: '127.0.0.1:0', secret_file: secretFile() } } });
    const url = () => `${world!.daemon.webhookUrl}/vast/webhooks`;
    const { shared, others } = machines(world.sim.offers());
    // Each run may use the shared machine (tried first: lowest id) or one other of its own.
    const spec = (other: number, name: string) =>
      jobSpec({
        name,
        search: {
          filters: { machine_id: { in: [shared, other] }, rented: { in: [true, false] }, direct_port_count: { gte: 1 } },
          order: [['machine_id', 'asc']],
          limit: 16,
        },
      });
    const runs = await Promise.all(others.map(async (m, i) => (await world!.api<RunView>('POST', '/v1/runs', spec(m, `wh-${i}`))).body));
    const before = await Promise.all(runs.map((r) => world!.waitFor(r.id, running)));
    expect(before.map((r) => r.instance!.machine_id)).toEqual([shared, shared]);

    const event = {
      event_id: 'evt-offline-1',
      user_id: 424242,
      notif_type: 'machine_offline',
      subject: `Machine ${shared} is offline`,
      message: `Machine ${shared} went offline.`,
      timestamp: Date.now() / 1000,
    };
    // Refused: a signature made with another secret, a tampered body, a delivery from 10 minutes ago, no signature.
    expect((await deliver(url(), signed(event, undefined, 'whsec_wrong'))).status).toBe(401);
    const good = signed(event);
    expect((await deliver(url(), { ...good, body: good.body.replace('offline-1', 'offline-2') })).status).toBe(401);
    expect((await deliver(url(), signed(event, Math.floor(Date.now() / 1000) - 600))).status).toBe(401);
    expect((await deliver(url(), { ...good, signature: '' })).status).toBe(401);
    await new Promise((r) => setTimeout(r, 300));
    const unchanged = await Promise.all(runs.map(async (r) => (await world!.api<RunView>('GET', `/v1/runs/${r.id}`)).body));
    expect(unchanged.map((r) => [r.state, r.attempts.length, r.instance?.id])).toEqual(before.map((r) => ['running', 1, r.instance!.id]));

    // Acted on: both runs on that machine fail over at once (the simulator never showed them offline).
    const acted = await deliver(url(), good);
    expect(acted.status).toBe(200);
    expect(acted.body).toMatchObject({ accepted: true, acted: 'failover', machine_id: shared });
    expect((acted.body['runs'] as string[]).sort()).toEqual(runs.map((r) => r.id).sort());
    const after = await Promise.all(runs.map((r) => world!.waitFor(r.id, (v) => running(v) && v.attempt === 2)));
    expect(after.map((r) => r.instance!.machine_id)).toEqual(others);
    for (const r of after) {
      // A running instance that fails is `lost` (SPEC section 4), its machine blocked for the run.
      expect(r.attempts[0]).toMatchObject({ outcome: 'lost' });
      expect(r.attempts[0]!.detail).toMatch(new RegExp(`machine ${shared} offline \\(host:machine_offline\\)`));
    }
    expect(
      world.sim
        .billingNow()
        .map((h) => h.id)
        .sort(),
    ).toEqual(after.map((r) => r.instance!.id).sort());

    // The same delivery again, as a replay would send it: refused, nothing moves. Also after a restart.
    expect(await deliver(url(), good)).toMatchObject({ status: 409, body: { error: { kind: 'replayed' } } });
    await world.restartDaemon();
    expect((await deliver(url(), good)).status).toBe(409);
    const still = await Promise.all(runs.map(async (r) => (await world!.api<RunView>('GET', `/v1/runs/${r.id}`)).body));
    expect(still.map((r) => [r.attempt, r.instance?.id])).toEqual(after.map((r) => [2, r.instance!.id]));
  });

  it("verifies and acts on the simulator's own deliveries: low_credit holds new creates at once", async () => {
    // The listener's port is chosen first: the simulator's webhook points at it from its start.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    world = await startWorld({
      sim: {
        account: { credit: 50, low_credit_threshold: 10, ssh_keys: [SSH_KEY] },
        webhooks: {
          initial: [
            {
              name: 'berth',
              webhook_url: `http://127.0.0.1:${port}/vast`,
              event_types: ['client:low_credit', 'host:machine_offline'],
              webhook_secret: SECRET,
            },
          ],
        },
      },
      // The credit is read at start and then only every 5 minutes: what the daemon learns sooner, the webhook told it.
      config: {
        webhooks: { listen: `127.0.0.1:${port}`, secret_file: secretFile() },
        account: { min_credit_usd: 10, check_interval_s: 300 },
      },
    });
    await world.daemon.checked;
    world.sim.addCredit(-45);
    const until = Date.now() + 10_000;
    while (Date.now() < until && !world.sim.webhookDeliveries().some((d) => d.event_type === 'client:low_credit' && d.status === 200)) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(
      world.sim
        .webhookDeliveries()
        .filter((d) => d.event_type === 'client:low_credit')
        .map((d) => [d.status, d.outcome]),
    ).toEqual([[200, 'delivered']]);
    await new Promise((r) => setTimeout(r, 300)); // the credit read it asked for
    const run = (await world.api<RunView>('POST', '/v1/runs', jobSpec())).body;
    await world.waitFor(run.id, (r) => r.state === 'creating');
    await new Promise((r) => setTimeout(r, 500));
    const events = (await world.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${run.id}/events`)).body;
    expect(events.filter((e) => e.type === 'create.waiting').map((e) => e.message)).toEqual([
      expect.stringMatching(/the account credit \(\$5\.00\) is below account\.min_credit_usd \(\$10\.00\)/),
    ]);
    expect(world.sim.history()).toEqual([]);
  });
});
