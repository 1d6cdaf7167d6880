// Interruptible instances against competing bids: a machine's market raises its minimum bid at a
// sim time or a rate (or by hand), a running bid below it is outbid (stopped, intended running,
// client:outbid, disk still billed) and resumes, loading then running, when its bid wins again; a
// bid below the minimum at create time is created stopped, waiting.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator, SimConfigInput } from '../../../src/sim/index.js';
import { call, startTestSim } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

/** Manual clock at time scale 1 (sim second 0 is the start); a bid instance runs 30 s after its create. */
async function fresh(config: SimConfigInput = {}, seed = 1) {
  const clock = { now: 1_000_000 };
  const sim = await startTestSim({
    seed,
    timeScale: 1,
    now: () => clock.now,
    config: {
      lifecycle: { provision_s: 10, boot_s: { min: 20, max: 20 }, restart_s: 15 },
      // Deliveries are recorded whether or not anyone listens: nothing listens on port 9.
      webhooks: {
        initial: [{ webhook_url: 'http://127.0.0.1:9/hook', event_types: ['client:outbid', 'client:instance_stopped'] }],
        retry_delays_s: [],
      },
      ...config,
    },
  });
  sims.push(sim);
  const at = (simS: number) => (clock.now = 1_000_000 + simS * 1000);
  const record = async (id: number) => (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
  const statuses = (id: number) =>
    sim
      .history()
      .find((h) => h.id === id)!
      .statuses.map((s) => [s.status, s.at.sim_s]);
  return { sim, clock, at, record, statuses };
}

/** The best bid offer (its machine has no other offer on this account's instances). */
const bidOffer = async (sim: RunningSimulator) => (await call(sim, 'POST', '/api/v0/bundles/', { type: 'bid', limit: 1 })).body.offers[0];
const bid = async (sim: RunningSimulator, offerId: number, price: number, extra: Record<string, unknown> = {}) =>
  call(sim, 'PUT', `/api/v0/asks/${offerId}/`, { image: 'x', disk: 10, price, ...extra });
const changeBid = (sim: RunningSimulator, id: number, price: number) =>
  call(sim, 'PUT', `/api/v0/instances/bid_price/${id}/`, { client_id: 'me', price });
const outbidEvents = (sim: RunningSimulator) => sim.webhookDeliveries().filter((d) => d.event_type === 'client:outbid');

describe('a machine market', () => {
  test('a raise at a sim time outbids a running bid at that moment; disk keeps billing; a winning bid resumes it', async () => {
    const probe = await fresh();
    const offer = await bidOffer(probe.sim);
    const { sim, at, record, statuses } = await fresh({ bids: { markets: { [offer.machine_id]: { at_s: 600, raise_pct: 50 } } } });
    const id = (await bid(sim, offer.id, offer.min_bid)).body.new_contract as number;
    at(599);
    expect((await record(id)).actual_status).toBe('running');
    at(700);
    const out = await record(id);
    expect(out).toMatchObject({
      actual_status: 'stopped',
      intended_status: 'running',
      cur_state: 'stopped',
      next_state: 'running',
      status_msg: expect.stringContaining('Outbid'),
    });
    const raised = Math.min(offer.dph_base, Math.round(offer.min_bid * 1.5 * 1e4) / 1e4);
    expect(out.min_bid).toBeCloseTo(raised, 9);
    expect(statuses(id)).toEqual([
      [null, 0],
      ['loading', 10],
      ['running', 30],
      ['stopped', 600],
    ]);
    expect((await bidOffer(sim)).id).not.toBe(offer.id); // rented; the machine's other offers show the new minimum
    expect(outbidEvents(sim).map((d) => JSON.parse(d.body).subject)).toEqual([`Instance ${id} was outbid`]);
    expect(sim.webhookDeliveries().some((d) => d.event_type === 'client:instance_stopped')).toBe(false);

    // Compute (loading and running, from 10 s) stopped at 600 s; disk is billed to now.
    const e = sim.ledger().instances[0]!;
    expect(e.compute_usd).toBeCloseTo((590 / 3600) * offer.min_bid, 9);
    expect(e.disk_usd).toBeCloseTo((700 / 3600) * e.disk_dph, 9);
    expect(e.billing_now).toBe(true);

    // A start does not help; a bid at the new minimum does: loading for restart_s, then running.
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' })).body.msg).toContain('stays stopped');
    expect((await changeBid(sim, id, raised)).body).toEqual({ success: true });
    expect((await record(id)).actual_status).toBe('loading');
    at(715);
    expect((await record(id)).actual_status).toBe('running');
    expect(statuses(id).slice(-2)).toEqual([
      ['loading', 700],
      ['running', 715],
    ]);
  });

  test('a rising rate outbids step by step; every step is exact, and the minimum never passes the on-demand price', async () => {
    const probe = await fresh();
    const offer = await bidOffer(probe.sim);
    const { sim, at, record, statuses } = await fresh({
      bids: { markets: { [offer.machine_id]: { at_s: 100, raise_pct: 10, every_s: 100 } } },
    });
    const id = (await bid(sim, offer.id, offer.min_bid * 1.25)).body.new_contract as number;
    at(250); // two raises: 1.21 × min_bid, still under the bid
    expect((await record(id)).actual_status).toBe('running');
    at(1000); // the third raise (1.331×) at 300 s outbids it
    expect(statuses(id).at(-1)).toEqual(['stopped', 300]);
    at(100_000);
    expect((await record(id)).min_bid).toBe(offer.dph_base);
  });

  test("by hand: the admin route raises a machine's minimum, outbidding; a fall lets the instance resume by itself", async () => {
    const { sim, at, record, statuses } = await fresh();
    const offer = await bidOffer(sim);
    const id = (await bid(sim, offer.id, offer.min_bid)).body.new_contract as number;
    at(100);
    await bidOffer(sim); // a search brings the catalog up to this very moment first
    const up = await call(sim, 'POST', `/_sim/machines/${offer.machine_id}/min-bid`, { raise_pct: 20 });
    expect(up.body).toMatchObject({ success: true, outbid: [id] });
    expect(up.body.offers.find((o: any) => o.id === offer.id).min_bid).toBeCloseTo(Math.round(offer.min_bid * 1.2 * 1e4) / 1e4, 9);
    expect((await record(id)).actual_status).toBe('stopped');
    expect(sim.raiseMinBid(offer.machine_id, -50).outbid).toEqual([]);
    expect((await record(id)).actual_status).toBe('loading');
    at(115);
    expect((await record(id)).actual_status).toBe('running');
    expect(statuses(id).slice(-3)).toEqual([
      ['stopped', 100],
      ['loading', 100],
      ['running', 115],
    ]);
    expect((await call(sim, 'POST', `/_sim/machines/${offer.machine_id}/min-bid`, { raise_pct: -100 })).body.error).toBe('invalid_args');
  });

  test('a user stop is not undone by the market; a start while the bid loses waits for it to win', async () => {
    const { sim, at, record } = await fresh();
    const offer = await bidOffer(sim);
    const id = (await bid(sim, offer.id, offer.min_bid)).body.new_contract as number;
    at(50);
    await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    sim.raiseMinBid(offer.machine_id, 50);
    sim.raiseMinBid(offer.machine_id, -40); // 0.9×: the bid wins, but the user stopped it
    expect(await record(id)).toMatchObject({ actual_status: 'stopped', intended_status: 'stopped' });
    sim.raiseMinBid(offer.machine_id, 50); // 1.35×: loses
    const start = await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' });
    expect(start.body.msg).toContain('stays stopped until its bid wins');
    expect(await record(id)).toMatchObject({
      actual_status: 'stopped',
      intended_status: 'running',
      status_msg: expect.stringContaining('Outbid'),
    });
    expect((await call(sim, 'PUT', `/api/v0/instances/reboot/${id}/`, {})).body.error).toBe('invalid_args');
    sim.raiseMinBid(offer.machine_id, -30);
    expect((await record(id)).actual_status).toBe('loading');
  });

  test('a default market moves every machine, each at its own seeded moment, the same for one seed', async () => {
    const market = { bids: { default_market: { at_s: 0, raise_pct: 25, every_s: 1000 } } };
    const a = await fresh(market, 3);
    const b = await fresh(market, 3);
    a.at(500);
    b.at(500);
    const minBids = async (w: Awaited<ReturnType<typeof fresh>>) =>
      (await call(w.sim, 'POST', '/api/v0/bundles/', { type: 'bid', limit: 200, order: [['id', 'asc']] })).body.offers.map(
        (o: any) => o.min_bid,
      );
    const [ma, mb] = [await minBids(a), await minBids(b)];
    expect(ma).toEqual(mb);
    const base = (await fresh({}, 3)).sim.offers().slice();
    const byId = new Map(base.map((o) => [o.id, o.min_bid]));
    const offers = (await call(a.sim, 'POST', '/api/v0/bundles/', { type: 'bid', limit: 200, order: [['id', 'asc']] })).body
      .offers as any[];
    const moved = offers.filter((o) => o.min_bid > byId.get(o.id)!).length;
    expect(moved).toBeGreaterThan(40); // about half have had their first raise by 500 s
    expect(moved).toBeLessThan(160);
  });
});

describe('a bid below the minimum at create time', () => {
  test('is created stopped, waiting, billing its disk only, with client:outbid; a winning bid starts it', async () => {
    const { sim, at, record, statuses } = await fresh();
    const offer = await bidOffer(sim);
    const r = await bid(sim, offer.id, offer.min_bid / 2);
    expect(r.status).toBe(200);
    const id = r.body.new_contract as number;
    expect(await record(id)).toMatchObject({
      actual_status: 'stopped',
      intended_status: 'running',
      status_msg: expect.stringContaining('Waiting: the bid is below'),
      is_bid: true,
    });
    expect(outbidEvents(sim)).toHaveLength(1);
    at(3600);
    const e = sim.ledger().instances[0]!;
    expect(e.compute_usd).toBe(0);
    expect(e.disk_usd).toBeCloseTo(e.disk_dph, 9);
    await changeBid(sim, id, offer.min_bid);
    at(3615);
    expect(statuses(id)).toEqual([
      ['stopped', 0],
      ['loading', 3600],
      ['running', 3615],
    ]);
  });

  test('is 410 no_such_ask with cancel_unavail true, and creates nothing', async () => {
    const { sim } = await fresh();
    const offer = await bidOffer(sim);
    const r = await bid(sim, offer.id, offer.min_bid - 0.0001, { cancel_unavail: true });
    expect(r).toMatchObject({ status: 410, body: { error: 'no_such_ask', ask_id: offer.id } });
    expect(sim.history()).toEqual([]);
  });
});
