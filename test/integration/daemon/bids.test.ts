// Interruptible runs against the simulator's bid market: outbid instances (stopped by the market
// while berth wants them running) are rebid within the cap, failed over, or replaced by on-demand
// ones; every policy ends with the run running and nothing else billing, by the simulator's ledger.
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { isEnded, isRunning, jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** A bid run on single-GPU offers with a direct port, cheapest bid first. */
function bidSpec(changes: Record<string, unknown> = {}) {
  return jobSpec({
    search: { type: 'bid', filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
    bid_price: 'min',
    max_price_per_hour: 1,
    ...changes,
  });
}

async function start(w: World, spec: Record<string, unknown>): Promise<RunView> {
  const res = await w.api<RunView>('POST', '/v1/runs', spec);
  expect(res.status).toBe(201);
  return w.waitFor(res.body.id, isRunning, 20_000);
}

const machineOf = (w: World, instanceId: number) => w.sim.history().find((h) => h.id === instanceId)!.machine_id;

/** Nothing bills but the run's current instance; after a cancel, nothing at all. */
async function onlyCurrentBillsThenNothing(w: World, run: RunView): Promise<void> {
  expect(w.sim.ledger().billing_now).toEqual([run.instance!.id]);
  await w.api('POST', `/v1/runs/${run.id}/cancel`);
  expect((await w.waitFor(run.id, isEnded)).state).toBe('cancelled');
  expect(w.sim.ledger().billing_now).toEqual([]);
}

async function eventsOf(w: World, runId: string): Promise<string[]> {
  return (await w.api<Array<{ message: string }>>('GET', `/v1/runs/${runId}/events`)).body.map((e) => e.message);
}

describe('interruptible runs that are outbid', () => {
  it('on_outbid "rebid": raises the bid through change-bid and runs on the same instance again', async () => {
    world = await startWorld({ config: { runs: { rebid_wait_s: 1 } } });
    const running = await start(world, bidSpec({ bid_step_pct: 50, on_outbid: 'rebid' }));
    const id = running.instance!.id;
    const before = world.sim.history().find((h) => h.id === id)!.compute_dph;
    // Another bidder: the machine's minimum bid rises 20 % above berth's bid.
    expect(world.sim.raiseMinBid(machineOf(world, id), 20).outbid).toEqual([id]);
    // Ready again (a new SSH check after the restart), on the same instance.
    const again = await world.waitFor(running.id, (r) => isRunning(r) && r.instance!.ready!.at > running.instance!.ready!.at, 20_000);
    expect(again.instance!.id).toBe(id);
    const events = await eventsOf(world, running.id);
    expect(events).toEqual(expect.arrayContaining(['running → rebidding', 'rebidding → booting']));
    expect(again.attempts.map((a) => a.outcome)).toEqual(['running']);
    const hist = world.sim.history().find((h) => h.id === id)!;
    expect(hist.compute_dph).toBeCloseTo(Math.floor(before * 1.5 * 1000) / 1000, 6);
    expect(await eventsOf(world, running.id)).toContainEqual(
      expect.stringMatching(new RegExp(`outbid; bid for instance ${id} raised to \\$`)),
    );
    await onlyCurrentBillsThenNothing(world, again);
  });

  it('a raised bid passes budget.max_usd_per_hour like a create: refused, the run fails over instead of billing past the cap', async () => {
    world = await startWorld({ config: { runs: { rebid_wait_s: 1 }, budget: { max_usd_per_hour: 0.06 } } });
    const running = await start(world, bidSpec({ bid_step_pct: 100, on_outbid: 'rebid' }));
    const first = running.instance!.id;
    const billed = world.sim.history().find((h) => h.id === first)!;
    expect(billed.compute_dph + billed.disk_dph).toBeLessThan(0.06);
    world.sim.raiseMinBid(machineOf(world, first), 20);
    // Doubling the bid would bill past $0.06/h: the bid is not sent, and the run fails over.
    const next = await world.waitFor(running.id, (r) => isRunning(r) && r.instance?.id !== first, 20_000);
    expect(next.attempts[0]).toMatchObject({ outcome: 'outbid' });
    expect(next.attempts[0]!.detail).toMatch(
      /bid could not be raised \(a bid of \$[\d.]+\/h would bill \$[\d.]+\/h: budget\.max_usd_per_hour/,
    );
    for (const h of world.sim.history()) expect(h.compute_dph + h.disk_dph).toBeLessThanOrEqual(0.06 + 1e-9);
    expect(world.sim.history().find((h) => h.id === first)!.compute_dph).toBeCloseTo(billed.compute_dph, 9);
    await onlyCurrentBillsThenNothing(world, next);
  });

  it('on_outbid "failover": destroys the outbid instance and runs on the next offer', async () => {
    world = await startWorld();
    const running = await start(world, bidSpec({ on_outbid: 'failover' }));
    const first = running.instance!.id;
    world.sim.raiseMinBid(machineOf(world, first), 30);
    const next = await world.waitFor(running.id, (r) => isRunning(r) && r.instance?.id !== first, 20_000);
    expect(next.attempts.map((a) => a.outcome)).toEqual(['outbid', 'running']);
    expect(next.attempts[0]!.detail).toMatch(/was outbid at \$[\d.]+\/h: failing over to the next offer/);
    expect(next.attempts[1]!.offer_id).not.toBe(next.attempts[0]!.offer_id);
    expect(world.sim.history().find((h) => h.id === next.instance!.id)!.is_bid).toBe(true);
    await onlyCurrentBillsThenNothing(world, next);
  });

  it('on_outbid "on_demand": replaces the outbid instance with an on-demand one under the same cap', async () => {
    world = await startWorld();
    const running = await start(world, bidSpec({ on_outbid: 'on_demand' }));
    const first = running.instance!.id;
    world.sim.raiseMinBid(machineOf(world, first), 30);
    const next = await world.waitFor(running.id, (r) => isRunning(r) && r.instance?.id !== first, 20_000);
    expect(next.attempts.map((a) => a.outcome)).toEqual(['outbid', 'running']);
    expect(world.sim.history().find((h) => h.id === next.instance!.id)!.is_bid).toBe(false);
    expect(next.instance!.dph_total).toBeLessThanOrEqual(1);
    expect(await eventsOf(world, running.id)).toContain('outbid: searching on-demand offers from now on (on_outbid "on_demand")');
    await onlyCurrentBillsThenNothing(world, next);
  });

  it('destroys a bid create that comes back stopped (below the minimum bid) instead of leaving its disk billing', async () => {
    world = await startWorld();
    const res = await world.api<RunView>('POST', '/v1/runs', bidSpec({ bid_price: 0.001, on_outbid: 'failover', max_attempts: 2 }));
    const failed = await world.waitFor(res.body.id, isEnded, 20_000);
    expect(failed.state).toBe('failed');
    expect(failed.attempts.map((a) => a.outcome)).toEqual(['outbid', 'outbid']);
    expect(world.sim.history().filter((h) => h.label?.includes(res.body.id))).toHaveLength(2);
    expect(world.sim.ledger().billing_now).toEqual([]);
  });
});
