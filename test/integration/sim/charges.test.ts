// GET /api/v0/charges/ as show_charges.yaml documents it, served from the ledger: whole UTC days
// whose key lies in the day range, amounts to 3 decimals, gpu and disk items, keyset pages,
// billing_read, and the yaml's 400/403/404 bodies.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim } from './helpers.js';

const H = 3600_000;
const DAY = 86_400;
/** 2026-01-10 00:00 UTC; the yaml's January example starts at 1767225600 (Jan 1). */
const JAN10 = 1767225600 + 9 * DAY;
const JANUARY = { day: { gte: 1767225600, lte: 1769903999 } };
const BILLING_KEY = 'billing-reader-key-0001';
const BERTH_KEY = 'scoped-four-categories-key';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

/** A simulator on a manual wall clock at Jan 10 12:00 UTC, time scale 1, instances running at once. */
async function world() {
  const clock = { now: (JAN10 + 12 * 3600) * 1000 };
  const sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: {
      lifecycle: { provision_s: 0, boot_s: { min: 0, max: 0 } },
      keys: [
        { key: BILLING_KEY, permissions: { api: { billing_read: {} } } },
        { key: BERTH_KEY, permissions: { api: { misc: {}, user_read: {}, instance_read: {}, instance_write: {} } } },
      ],
    },
  });
  sims.push(sim);
  return { sim, clock };
}

const charges = (sim: RunningSimulator, filters: unknown, extra = '', key: string | null = sim.apiKey) =>
  call(sim, 'GET', `/api/v0/charges/?select_filters=${encodeURIComponent(JSON.stringify(filters))}${extra}`, undefined, key);

async function create(sim: RunningSimulator, offerIndex: number, label: string | null = 'job') {
  const offer = sim.offers()[offerIndex]!;
  const r = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', disk: 20, label });
  expect(r.status).toBe(200);
  return r.body.new_contract as number;
}

describe('charges from the ledger', () => {
  test('a contract over three days: whole days, amount to 3 decimals, gpu and disk items that add up to the ledger', async () => {
    const { sim, clock } = await world();
    const id = await create(sim, 0);
    clock.now += 42 * H; // Jan 12 06:00
    const r = await charges(sim, JANUARY);
    expect(r.status).toBe(200);
    const ledger = sim.ledger().instances[0]!;
    expect(r.body).toMatchObject({ success: true, count: 1, total: 1, next_token: null });
    const c = r.body.results[0];
    expect(c).toMatchObject({
      start: JAN10,
      end: JAN10 + 2 * DAY,
      type: 'instance',
      source: `instance-${id}`,
      description: `Instance ${id} Charges - 3 days`,
      metadata: { label: 'job' },
    });
    expect(c.amount).toBe(Math.round(ledger.total_usd * 1000) / 1000);
    const [gpu, disk] = c.items;
    expect(gpu).toMatchObject({
      type: 'gpu',
      source: null,
      start: JAN10,
      end: JAN10 + 2 * DAY,
      description: `42.000 hours at $${ledger.compute_dph.toFixed(3)}/hour`,
    });
    expect(gpu.amount).toBe(Math.round(ledger.compute_usd * 1000) / 1000);
    expect(disk).toMatchObject({ type: 'disk', description: expect.stringMatching(/^42\.000 hours at \$/) });
    expect(disk.amount).toBe(Math.round(ledger.disk_usd * 1000) / 1000);
  });

  test('days are never cut: a range from mid-day leaves that day out, a range to mid-day takes it whole', async () => {
    const { sim, clock } = await world();
    await create(sim, 0);
    clock.now += 42 * H;
    const { total_usd } = sim.ledger().instances[0]!;
    const dph = total_usd / 42;
    // From Jan 10 12:00: Jan 10 (12 h of charges) is out, Jan 11 and Jan 12 (30 h) are in.
    const fromNoon = (await charges(sim, { day: { gte: JAN10 + 12 * 3600, lte: JANUARY.day.lte } })).body.results[0];
    expect(fromNoon).toMatchObject({ start: JAN10 + DAY, end: JAN10 + 2 * DAY, description: expect.stringContaining('2 days') });
    expect(fromNoon.amount).toBeCloseTo(30 * dph, 3);
    // To Jan 11 00:01: Jan 10 and all of Jan 11 (36 h).
    const toJan11 = (await charges(sim, { day: { gte: JAN10, lte: JAN10 + DAY + 60 } })).body.results[0];
    expect(toJan11).toMatchObject({ start: JAN10, end: JAN10 + DAY });
    expect(toJan11.amount).toBeCloseTo(36 * dph, 3);
    // A range with no day key inside it finds nothing.
    expect((await charges(sim, { day: { gte: JAN10 + 3600, lte: JAN10 + 7200 } })).body).toMatchObject({ count: 0, total: 0, results: [] });
  });

  test('a destroyed instance stops accruing; a stopped one keeps paying for its disk only', async () => {
    const { sim, clock } = await world();
    const gone = await create(sim, 0);
    const stopped = await create(sim, 1, null);
    clock.now += 2 * H;
    await call(sim, 'DELETE', `/api/v0/instances/${gone}/`);
    await call(sim, 'PUT', `/api/v0/instances/${stopped}/`, { state: 'stopped' });
    clock.now += 5 * H;
    const byId = Object.fromEntries((await charges(sim, JANUARY)).body.results.map((c: any) => [c.source, c]));
    const ledger = Object.fromEntries(sim.ledger().instances.map((e) => [`instance-${e.instance_id}`, e]));
    expect(byId[`instance-${gone}`].amount).toBe(Math.round(ledger[`instance-${gone}`]!.total_usd * 1000) / 1000);
    expect(byId[`instance-${gone}`].items.map((i: any) => i.description.split(' ')[0])).toEqual(['2.000', '2.000']);
    const s = byId[`instance-${stopped}`];
    expect(s.metadata).toEqual({});
    expect(s.items.map((i: any) => [i.type, i.description.split(' ')[0]])).toEqual([
      ['gpu', '2.000'],
      ['disk', '7.000'],
    ]);
  });

  test("pages: newest contract first by default, a keyset token in the yaml's shape, latest_first=false, limit at most 500", async () => {
    const { sim, clock } = await world();
    const ids = [await create(sim, 0), await create(sim, 1), await create(sim, 2)];
    clock.now += H;
    const first = (await charges(sim, JANUARY, '&limit=2')).body;
    expect(first).toMatchObject({ count: 2, total: 3 });
    expect(first.results.map((c: any) => c.source)).toEqual([`instance-${ids[2]}`, `instance-${ids[1]}`]);
    expect(JSON.parse(Buffer.from(first.next_token, 'base64').toString())).toEqual({ values: { id: ids[1] } });
    const second = (await charges(sim, JANUARY, `&limit=2&after_token=${encodeURIComponent(first.next_token)}`)).body;
    expect(second).toMatchObject({ count: 1, total: 3, next_token: null });
    expect(second.results[0].source).toBe(`instance-${ids[0]}`);
    const oldest = (await charges(sim, JANUARY, '&latest_first=false&limit=600&format=tree')).body;
    expect(oldest.results.map((c: any) => c.source)).toEqual(ids.map((i) => `instance-${i}`));
    expect((await charges(sim, { ...JANUARY, type: { in: ['volume', 'serverless'] } })).body).toMatchObject({ count: 0, total: 0 });
    expect((await charges(sim, { ...JANUARY, type: { in: ['instance'] } })).body.total).toBe(3);
  });

  test('the documented 400s: a missing day range, a bad token; other bad parameters are invalid_args', async () => {
    const { sim } = await world();
    const missing = { success: false, msg: "Must provide both 'day' gte and lte filters for instance charges" };
    expect(await charges(sim, {})).toMatchObject({ status: 400, body: missing });
    expect(await charges(sim, { day: { gte: 1 } })).toMatchObject({ status: 400, body: missing });
    expect(await call(sim, 'GET', '/api/v0/charges/')).toMatchObject({ status: 400, body: missing });
    expect(await charges(sim, JANUARY, '&after_token=not-a-token')).toMatchObject({
      status: 400,
      body: { success: false, error: 'invalid_token', msg: 'Invalid pagination token' },
    });
    for (const extra of ['&limit=0', '&format=csv', '&latest_first=maybe']) {
      expect((await charges(sim, JANUARY, extra)).body.error, extra).toBe('invalid_args');
    }
    expect((await charges(sim, { ...JANUARY, type: { in: ['gpu'] } })).body.error).toBe('invalid_args');
    expect((await charges(sim, { ...JANUARY, when: { gte: 0 } })).body.error).toBe('invalid_args');
  });

  test('billing_read: the four instance categories are not enough; no header is 403, a bad key 404', async () => {
    const { sim } = await world();
    expect((await charges(sim, JANUARY, '', BILLING_KEY)).status).toBe(200);
    const denied = await charges(sim, JANUARY, '', BERTH_KEY);
    expect(denied).toMatchObject({ status: 403, body: { success: false, error: 'permission_denied', permission: 'billing_read' } });
    expect(await charges(sim, JANUARY, '', null)).toMatchObject({
      status: 403,
      body: { success: false, error: 'auth_error', msg: 'This action requires login.' },
    });
    expect(await charges(sim, JANUARY, '', 'no-such-key')).toMatchObject({
      status: 404,
      body: { success: false, error: 'auth_error', msg: 'Invalid user key' },
    });
  });
});
