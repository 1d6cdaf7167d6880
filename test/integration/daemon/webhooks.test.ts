// The daemon's webhook listener against real HTTP: deliveries signed as the service signs them act
// (instance_offline fails that instance's run over at once; outbid follows on_outbid at once;
// low_credit holds creates; the host's machine_offline does nothing), a bad signature or a stale
// timestamp is refused and changes nothing, and a repeated event is answered 200 without acting
// twice, also after a restart. The simulator's own deliveries are verified and acted on too.
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

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });

describe('webhook listener', () => {
  it('acts on a signed instance_offline at once, ignores the host event machine_offline, refuses a bad signature or a stale timestamp, and answers a repeat 200 without acting twice (also after a restart)', async () => {
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
    const unchangedSince = async (want: RunView[]) => {
      await new Promise((r) => setTimeout(r, 300));
      const now = await Promise.all(want.map(async (r) => (await world!.api<RunView>('GET', `/v1/runs/${r.id}`)).body));
      expect(now.map((r) => [r.state, r.attempts.length, r.instance?.id])).toEqual(
        want.map((r) => [r.state, r.attempts.length, r.instance!.id]),
      );
    };

    // The host's event about the machine: a renter is never sent it, and berth does not act on it.
    const host = signed({
      event_id: 'evt-host-1',
      user_id: 424242,
      notif_type: 'machine_offline',
      subject: `Machine ${shared} is offline`,
      message: `Machine ${shared} went offline.`,
      timestamp: Date.now() / 1000,
    });
    expect(await deliver(url(), host)).toMatchObject({ status: 200, body: { accepted: true, acted: 'none' } });
    await unchangedSince(before);

    const [target, bystander] = before as [RunView, RunView];
    const event = {
      event_id: 'evt-offline-1',
      user_id: 424242,
      notif_type: 'instance_offline',
      subject: `Instance ${target.instance!.id} is offline`,
      message: 'Your instance went down because of a problem on the host machine.',
      timestamp: Date.now() / 1000,
    };
    // Refused: a signature made with another secret, a tampered body, a delivery from 10 minutes ago, no signature.
    expect((await deliver(url(), signed(event, undefined, 'whsec_wrong'))).status).toBe(401);
    const good = signed(event);
    expect((await deliver(url(), { ...good, body: good.body.replace('offline-1', 'offline-2') })).status).toBe(401);
    expect((await deliver(url(), signed(event, Math.floor(Date.now() / 1000) - 600))).status).toBe(401);
    expect((await deliver(url(), { ...good, signature: '' })).status).toBe(401);
    await unchangedSince(before);

    // Acted on: the run holding that instance fails over at once (the simulator never showed it offline); the other stays.
    const acted = await deliver(url(), good);
    expect(acted).toMatchObject({
      status: 200,
      body: { accepted: true, acted: 'failover', instance_id: target.instance!.id, run: target.id },
    });
    const after = await world.waitFor(target.id, (v) => running(v) && v.attempt === 2);
    expect(after.instance!.machine_id).toBe(others[0]);
    // A running instance that fails is `lost` (SPEC section 4), its machine blocked for the run.
    expect(after.attempts[0]).toMatchObject({ outcome: 'lost' });
    expect(after.attempts[0]!.detail).toMatch(new RegExp(`instance ${target.instance!.id} offline \\(client:instance_offline webhook\\)`));
    const events = (await world.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${target.id}/events`)).body;
    expect(events.filter((e) => e.type === 'webhook').map((e) => e.message)).toEqual([
      `the service reports instance ${target.instance!.id} offline (client:instance_offline webhook)`,
    ]);
    await unchangedSince([bystander]);
    expect(
      world.sim
        .billingNow()
        .map((h) => h.id)
        .sort(),
    ).toEqual([after.instance!.id, bystander.instance!.id].sort());

    // The same event again, as the service's retry sends it (signed anew, a later timestamp) or a
    // replay would: answered 200 so the sender stops, and not acted on. Also after a restart.
    const retry = signed(event, Math.floor(Date.now() / 1000) + 1);
    expect(await deliver(url(), good)).toMatchObject({ status: 200, body: { duplicate: true, acted: 'none' } });
    expect(await deliver(url(), retry)).toMatchObject({ status: 200, body: { duplicate: true, acted: 'none' } });
    await world.restartDaemon();
    expect(await deliver(url(), retry)).toMatchObject({ status: 200, body: { duplicate: true, acted: 'none' } });
    await unchangedSince([after, bystander]);
  });

  it("follows on_outbid at once on the simulator's client:outbid, long before the next list", async () => {
    const port = await freePort();
    world = await startWorld({
      sim: {
        webhooks: {
          initial: [
            { name: 'berth', webhook_url: `http://127.0.0.1:${port}/vast`, event_types: ['client:outbid'], webhook_secret: SECRET },
          ],
        },
      },
      config: { webhooks: { listen: `127.0.0.1:${port}`, secret_file: secretFile() } },
    });
    const spec = jobSpec({
      search: { type: 'bid', filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
      bid_price: 'min',
      max_price_per_hour: 1,
      on_outbid: 'failover',
    });
    const run = (await world.api<RunView>('POST', '/v1/runs', spec)).body;
    const first = (await world.waitFor(run.id, running, 20_000)).instance!.id;
    // From now on a list every 120 s: only the webhook can tell the run in time.
    const lists = () =>
      Object.entries(world!.sim.stats().requests)
        .filter(([route]) => /^GET \/api\/v[01]\/instances\/$/.test(route))
        .reduce((n, [, count]) => n + count, 0);
    const beforeRestart = lists();
    await world.restartDaemon({ polling: { interval_s: 120 } });
    await expect.poll(lists).toBeGreaterThan(beforeRestart); // the list at start
    await new Promise((r) => setTimeout(r, 500)); // and its round done
    const listsAtOutbid = lists();
    const machine = world.sim.history().find((h) => h.id === first)!.machine_id;
    expect(world.sim.raiseMinBid(machine, 30).outbid).toEqual([first]);
    // The run goes to destroying its outbid instance at once (on_outbid "failover"), with no list
    // between; the destroy is confirmed by a list later.
    await world.waitFor(run.id, (r) => r.state === 'destroying', 10_000);
    expect(lists()).toBe(listsAtOutbid);
    const until = Date.now() + 5_000;
    while (Date.now() < until && world.sim.billingNow().some((h) => h.id === first)) await new Promise((r) => setTimeout(r, 50));
    expect(world.sim.history().find((h) => h.id === first)!.destroyed_at).not.toBeNull();
    const delivered = world.sim.webhookDeliveries().filter((d) => d.event_type === 'client:outbid');
    expect(delivered.map((d) => [d.status, JSON.parse(d.body).notif_type])).toEqual([[200, 'outbid']]);
    const events = (await world.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${run.id}/events`)).body;
    expect(events.filter((e) => e.type === 'webhook').map((e) => e.message)).toEqual([
      `the service reports instance ${first} outbid (client:outbid webhook)`,
    ]);
  });

  it("verifies and acts on the simulator's own deliveries: low_credit holds new creates at once", async () => {
    // The listener's port is chosen first: the simulator's webhook points at it from its start.
    const port = await freePort();
    world = await startWorld({
      sim: {
        account: { credit: 50, low_credit_threshold: 10, ssh_keys: [SSH_KEY] },
        webhooks: {
          initial: [
            {
              name: 'berth',
              webhook_url: `http://127.0.0.1:${port}/vast`,
              event_types: ['client:low_credit', 'client:instance_offline'],
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
