// A host raises the price of a running contract (the simulator's pending price increases): berth
// never lets that bill a run above its max_price_per_hour. By default every increase is rejected;
// with policy accept_within_cap one that fits is accepted and one that passes the cap rejected; and
// an increase that goes through anyway (unanswered until the host's cutover) fails the run over once
// a list shows the instance above the cap. Each decision is an event on the run.
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { isRunning, jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const CAP = 1;
const spec = () => jobSpec({ max_price_per_hour: CAP });
type Event = { type: string; message: string };
const eventsOf = async (w: World, runId: string) => (await w.api<Event[]>('GET', `/v1/runs/${runId}/events`)).body;
const computeDph = (w: World, id: number) => w.sim.history().find((h) => h.id === id)!.compute_dph;

async function running(w: World): Promise<RunView> {
  const res = await w.api<RunView>('POST', '/v1/runs', spec());
  return w.waitFor(res.body.id, isRunning, 20_000);
}

async function until<T>(what: string, get: () => Promise<T | undefined> | T | undefined, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The percent that takes the instance's compute price to `factor` × the cap. */
const pctTo = (w: World, id: number, factor: number) => Math.ceil(((factor * CAP) / computeDph(w, id) - 1) * 100);

describe('price increases on running instances', () => {
  it('rejects every increase by default, the price the run rented at stays', async () => {
    world = await startWorld({ config: { price_increases: { check_interval_s: 0.3 } } });
    const run = await running(world);
    const id = run.instance!.id;
    const before = computeDph(world, id);
    const row = world.sim.raisePrice(id, 10)!;
    const e = await until('the rejection', async () => (await eventsOf(world!, run.id)).find((x) => x.type.startsWith('price_increase')));
    expect(e.type).toBe('price_increase.rejected');
    expect(e.message).toMatch(
      new RegExp(`increase \\(${row.pending_price_increase_id}\\): rejecting it: .*price_increases.policy is "reject"`),
    );
    await new Promise((r) => setTimeout(r, 500));
    expect(computeDph(world, id)).toBe(before);
    expect((await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body).toMatchObject({ state: 'running', instance: { id } });
  });

  it('with accept_within_cap, accepts an increase that keeps the instance within max_price_per_hour and rejects one past it', async () => {
    world = await startWorld({ config: { price_increases: { policy: 'accept_within_cap', check_interval_s: 0.3 } } });
    const run = await running(world);
    const id = run.instance!.id;
    const before = computeDph(world, id);
    world.sim.raisePrice(id, 10);
    await until('the accept', async () => (await eventsOf(world!, run.id)).find((x) => x.type === 'price_increase.accepted'));
    await until('the new price', () => (Math.abs(computeDph(world!, id) - before * 1.1) < 1e-6 ? true : undefined));
    const past = world.sim.raisePrice(id, pctTo(world, id, 1.5))!;
    const rejected = await until('the rejection', async () =>
      (await eventsOf(world!, run.id)).find((x) => x.type === 'price_increase.rejected'),
    );
    expect(rejected.message).toMatch(
      new RegExp(`\\(${past.pending_price_increase_id}\\): rejecting it: .* would pass max_price_per_hour \\(\\$1/h\\)`),
    );
    await new Promise((r) => setTimeout(r, 500));
    expect(computeDph(world, id)).toBeCloseTo(before * 1.1, 6);
    expect((await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body.instance!.id).toBe(id);
  });

  it("with accept_within_cap, rejects an increase within the run's cap that would pass budget.max_usd_per_hour", async () => {
    world = await startWorld({ config: { price_increases: { policy: 'accept_within_cap', check_interval_s: 0.3 } } });
    const run = await running(world);
    const id = run.instance!.id;
    const billed = run.instance!.dph_total!;
    // The daemon-wide cap leaves room for this instance and no more.
    await world.restartDaemon({
      price_increases: { policy: 'accept_within_cap', check_interval_s: 0.3 },
      budget: { max_usd_per_hour: billed + 0.001 },
    });
    const before = computeDph(world, id);
    world.sim.raisePrice(id, 50);
    const rejected = await until('the rejection', async () =>
      (await eventsOf(world!, run.id)).find((x) => x.type === 'price_increase.rejected'),
    );
    expect(rejected.message).toMatch(/budget\.max_usd_per_hour \(\$[\d.]+\/h\) would be passed/);
    expect(computeDph(world, id)).toBe(before);
  });

  it('fails over when a listed price passes the cap anyway (an increase the host applied unanswered)', async () => {
    // Increases are read once an hour here: the host's cutover comes first.
    world = await startWorld({ config: { price_increases: { check_interval_s: 3600 } } });
    const run = await running(world);
    const first = run.instance!.id;
    world.sim.raisePrice(first, pctTo(world, first, 1.5), 0);
    const next = await world.waitFor(run.id, (r) => isRunning(r) && r.instance!.id !== first, 20_000);
    expect(next.attempts[0]).toMatchObject({ instance_id: first, outcome: 'price_over_cap' });
    expect(next.attempts[0]!.detail).toMatch(/above max_price_per_hour \(\$1\/h\): its host raised the price; failing over/);
    expect(world.sim.billingNow().map((h) => h.id)).toEqual([next.instance!.id]);
  });
});
