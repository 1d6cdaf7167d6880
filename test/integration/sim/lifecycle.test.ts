// Instance life under each fault profile, stop/start/destroy, the billing ledger and the history.
import { afterAll, describe, expect, test } from 'vitest';
import type { FaultProfile, RunningSimulator } from '../../../src/sim/index.js';
import { call, startTestSim, statusOf, waitFor } from './helpers.js';

const fast = { provision_s: 2, boot_s: { min: 20, max: 40 }, fail_after_s: 10, lost_after_s: { min: 50, max: 60 }, restart_s: 5 };
const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

async function fresh(options: Parameters<typeof startTestSim>[0] = {}) {
  const sim = await startTestSim({ ...options, config: { lifecycle: fast, ...options.config } });
  sims.push(sim);
  return sim;
}

const statuses = (sim: RunningSimulator, id: number) =>
  sim
    .history()
    .find((h) => h.id === id)!
    .statuses.map((s) => s.status);

describe('fault profiles', () => {
  test('forcing the top offers of a search makes them exit, go unknown, offline and hang', async () => {
    const sim = await fresh();
    const top = (await call(sim, 'POST', '/api/v0/bundles/', { limit: 7 })).body.offers as Array<{ id: number; machine_id: number }>;
    const profiles: FaultProfile[] = ['exited', 'unknown', 'offline', 'stuck_loading', 'oci_failed', 'lost_after_running', 'healthy'];
    top.forEach((o, i) => sim.setOfferProfile(o.id, profiles[i]!));
    const ids: number[] = [];
    for (const o of top)
      ids.push((await call(sim, 'PUT', `/api/v0/asks/${o.id}/`, { image: 'x', label: `p${ids.length}` })).body.new_contract);

    // Its running spell lasts 50-60 ms of wall time: read it from the history, not by catching it live.
    await waitFor(() => (statuses(sim, ids[5]!).includes('running') ? true : undefined), 3000, 'lost_after_running to run');
    for (const [i, want] of ['exited', 'unknown', 'offline'].entries()) expect(await statusOf(sim, ids[i]!)).toBe(want);
    await waitFor(
      async () => (['offline', 'unknown', 'exited'].includes((await statusOf(sim, ids[5]!)) ?? '') ? true : undefined),
      3000,
      'loss',
    );

    expect(await statusOf(sim, ids[3]!)).toBe('loading');
    const oci = (await call(sim, 'GET', `/api/v0/instances/${ids[4]}/`)).body.instances;
    expect(oci.actual_status).toBe('created');
    expect(oci.status_msg).toContain('OCI runtime create failed');
    expect(await statusOf(sim, ids[6]!)).toBe('running');

    expect(statuses(sim, ids[0]!)).toEqual([null, 'loading', 'exited']);
    expect(statuses(sim, ids[5]!).slice(0, 3)).toEqual([null, 'loading', 'running']);
    expect(statuses(sim, ids[6]!)).toEqual([null, 'loading', 'running']);
    expect(sim.history().find((h) => h.id === ids[3])!.profile).toBe('stuck_loading');
  });

  test('a machine profile applies to every offer on the machine; rates assign profiles from the seed', async () => {
    const sim = await fresh();
    const offer = sim.offers()[10]!;
    sim.setMachineProfile(offer.machine_id, 'offline');
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' })).body.new_contract;
    expect(sim.history().find((h) => h.id === id)!.profile).toBe('offline');

    const a = await fresh({ seed: 5, config: { profile_rates: { exited: 0.3, unknown: 0.2 } } });
    const b = await fresh({ seed: 5, config: { profile_rates: { exited: 0.3, unknown: 0.2 } } });
    const profileMix = async (sim: RunningSimulator) => {
      const out: string[] = [];
      for (const o of sim.offers().slice(0, 40)) {
        const r = await call(sim, 'PUT', `/api/v0/asks/${o.id}/`, { image: 'x' });
        out.push(sim.history().find((h) => h.id === r.body.new_contract)!.profile);
      }
      return out;
    };
    const mixA = await profileMix(a);
    expect(mixA).toEqual(await profileMix(b));
    expect(new Set(mixA)).toEqual(new Set(['healthy', 'exited', 'unknown']));
  });

  test('taking a machine offline moves its running instances to offline', async () => {
    const sim = await fresh();
    const offer = sim.offers()[3]!;
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' })).body.new_contract;
    await waitFor(async () => ((await statusOf(sim, id)) === 'running' ? true : undefined));
    expect(sim.takeMachineOffline(offer.machine_id)).toEqual([id]);
    expect(await statusOf(sim, id)).toBe('offline');
  });

  test('a boot detour (faults.boot_detour) shows its statuses, in order, between provisioning and loading; then it runs', async () => {
    const sim = await fresh({
      config: {
        faults: {
          boot_detour: [
            // 1.5 wall s at this clock: long enough to be caught by a list.
            { status: 'stopped', s: 1500 },
            { status: 'frozen', s: 3 },
            { status: 'brand_new_status', s: 3 },
          ],
        },
      },
    });
    const offer = sim.offers()[5]!;
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' })).body.new_contract;
    await waitFor(async () => ((await statusOf(sim, id)) === 'stopped' ? true : undefined), 3000, 'the stopped blip');
    const rec = (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
    // A blip, not a stop: the service still means it to run.
    expect(rec.intended_status).toBe('running');
    await waitFor(async () => ((await statusOf(sim, id)) === 'running' ? true : undefined), 5000, 'running after the detour');
    expect(statuses(sim, id)).toEqual([null, 'stopped', 'frozen', 'brand_new_status', 'loading', 'running']);
    // Without the fault nothing changes; with a rate of 0 no create takes it.
    const plain = await fresh({ config: { faults: { boot_detour: [{ status: 'stopped', s: 3 }], boot_detour_rate: 0 } } });
    const other = (await call(plain, 'PUT', `/api/v0/asks/${plain.offers()[5]!.id}/`, { image: 'x' })).body.new_contract;
    await waitFor(async () => ((await statusOf(plain, other)) === 'running' ? true : undefined), 3000, 'running');
    expect(statuses(plain, other)).toEqual([null, 'loading', 'running']);
  });

  test('a double-bought offer (faults.double_buy_rate): the create is answered, its instance never runs, the offer stays taken', async () => {
    const sim = await fresh({ config: { faults: { double_buy_rate: 1 } } });
    const offer = sim.offers()[7]!;
    const res = await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    const id = res.body.new_contract as number;
    await waitFor(async () => ((await statusOf(sim, id)) === 'created' ? true : undefined), 3000, 'the port error');
    const rec = (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
    expect(rec.status_msg).toMatch(/port is already allocated/);
    expect(statuses(sim, id)).toEqual([null, 'loading', 'created']);
    expect(sim.stats().offers_double_bought).toBe(1);
    // Ours goes; the other account keeps the offer.
    await call(sim, 'DELETE', `/api/v0/instances/${id}/`);
    sim.setFaults({ double_buy_rate: 0 });
    expect((await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x' })).status).toBe(410);
    // Silent: it loads for ever.
    const silent = await fresh({ config: { faults: { double_buy_rate: 1, double_buy_sign: 'silent' } } });
    const other = (await call(silent, 'PUT', `/api/v0/asks/${silent.offers()[7]!.id}/`, { image: 'x' })).body.new_contract;
    await new Promise((r) => setTimeout(r, 500));
    expect(statuses(silent, other)).toEqual([null, 'loading']);
  });

  test('a boot detour through running is refused', async () => {
    const sim = await fresh();
    const res = await call(sim, 'PUT', '/_sim/faults', { boot_detour: [{ status: 'running', s: 1 }] });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toMatch(/boot_detour/);
  });
});

describe('billing ledger (manual clock)', () => {
  test('compute while loading/running, disk until destroy, nothing after', async () => {
    let now = 1_000_000;
    const sim = await fresh({
      timeScale: 1,
      now: () => now,
      config: { lifecycle: { provision_s: 0, boot_s: { min: 100, max: 100 }, restart_s: 15 } },
    });
    const offer = sim.offers()[0]!;
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', disk: 20, label: 'bill' })).body.new_contract;
    const diskDph = (20 * offer.storage_cost) / 720;
    const entry = () => sim.ledger().instances.find((e) => e.instance_id === id)!;

    now += 3600_000;
    expect(await statusOf(sim, id)).toBe('running');
    expect(entry().compute_usd).toBeCloseTo(offer.dph_base, 6);
    expect(entry().disk_usd).toBeCloseTo(diskDph, 6);

    await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' });
    expect(await statusOf(sim, id)).toBe('stopped');
    now += 3600_000;
    expect(entry().compute_usd).toBeCloseTo(offer.dph_base, 6);
    expect(entry().disk_usd).toBeCloseTo(2 * diskDph, 6);
    expect(sim.billingNow().map((h) => h.id)).toEqual([id]);

    await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' });
    expect(await statusOf(sim, id)).toBe('loading');
    now += 3600_000;
    expect(await statusOf(sim, id)).toBe('running');
    expect(entry().compute_usd).toBeCloseTo(2 * offer.dph_base, 6);

    await call(sim, 'DELETE', `/api/v0/instances/${id}/`);
    const final = entry().total_usd;
    now += 10 * 3600_000;
    expect(entry().total_usd).toBeCloseTo(final, 9);
    expect(entry().billing_now).toBe(false);
    expect(sim.billingNow()).toEqual([]);
    expect(sim.ledger().billing_now).toEqual([]);
    expect(final).toBeCloseTo(2 * offer.dph_base + 3 * diskDph, 6);

    const user = await call(sim, 'GET', '/api/v0/users/current/');
    expect(user.body.credit).toBeCloseTo(250 - final, 2);

    const h = sim.history().find((x) => x.id === id)!;
    expect(h.statuses.map((s) => s.status)).toEqual(['loading', 'running', 'stopped', 'loading', 'running']);
    expect(h.statuses[1]!.at.sim_s).toBe(100);
    expect(h.statuses[1]!.at.wall_ms).toBe(1_000_000 + 100_000);
    expect(h.destroyed_at?.sim_s).toBe(3 * 3600);
    expect(h).toMatchObject({ offer_id: offer.id, machine_id: offer.machine_id, label: 'bill' });
  });

  test('failed instances keep billing disk until destroyed', async () => {
    let now = 0;
    const sim = await fresh({ timeScale: 1, now: () => now });
    const offer = sim.offers()[1]!;
    sim.setOfferProfile(offer.id, 'exited');
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', disk: 100 })).body.new_contract;
    now += 3600_000;
    expect(await statusOf(sim, id)).toBe('exited');
    const e = sim.ledger().instances[0]!;
    expect(e.compute_usd).toBeCloseTo((fast.fail_after_s / 3600) * offer.dph_base, 6);
    expect(e.disk_usd).toBeCloseTo((100 * offer.storage_cost) / 720, 6);
    expect(sim.billingNow().map((h) => h.id)).toEqual([id]);
  });
});

describe('admin endpoints', () => {
  test('inspect instances, history, ledger, stats; set faults and profiles; reset', async () => {
    const sim = await fresh();
    const offer = sim.offers()[0]!;
    expect((await call(sim, 'PUT', `/_sim/offers/${offer.id}/profile`, { profile: 'exited' }, null)).status).toBe(200);
    expect((await call(sim, 'PUT', `/_sim/offers/${offer.id}/profile`, { profile: 'sad' }, null)).status).toBe(400);
    const id = (await call(sim, 'PUT', `/api/v0/asks/${offer.id}/`, { image: 'x', label: 'adm' })).body.new_contract;
    const live = (await call(sim, 'GET', '/_sim/instances', undefined, null)).body.instances;
    expect(live[0]).toMatchObject({ id, offer_id: offer.id, profile: 'exited' });
    expect((await call(sim, 'GET', '/_sim/history', undefined, null)).body.history[0].id).toBe(id);
    expect((await call(sim, 'GET', '/_sim/ledger', undefined, null)).body.billing_now).toEqual([id]);
    const stats = (await call(sim, 'GET', '/_sim/stats', undefined, null)).body;
    expect(stats.creates_received).toBe(1);
    expect(stats.creates_by_label).toEqual({ adm: 1 });
    expect(stats.requests['PUT /api/v0/asks/{offer_id}/']).toBe(1);
    const f = await call(sim, 'PUT', '/_sim/faults', { latency_ms: 1 }, null);
    expect(f.body.faults.latency_ms).toBe(1);
    expect((await call(sim, 'PUT', '/_sim/faults', { drop_rate: 2 }, null)).status).toBe(400);
    expect((await call(sim, 'PUT', `/_sim/machines/${offer.machine_id}/profile`, { profile: 'healthy' }, null)).status).toBe(200);
    expect((await call(sim, 'PUT', '/_sim/time-scale', { time_scale: 10 }, null)).body.time_scale).toBe(10);
    expect((await call(sim, 'POST', `/_sim/machines/${offer.machine_id}/offline`, undefined, null)).body.instance_ids).toEqual([id]);
    expect((await call(sim, 'POST', '/_sim/reset', undefined, null)).status).toBe(200);
    expect(sim.history()).toEqual([]);
    expect((await call(sim, 'GET', '/api/v0/instances/')).body.instances).toEqual([]);
  });
});
