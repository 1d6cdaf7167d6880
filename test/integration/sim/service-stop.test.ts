// Conditions a task's end meets on the service, playable by config and at run time: the service
// stopping an instance as when the account's credit runs out (billing.mdx: "Your instances are
// stopped automatically ... you will continue to be billed for disk storage"), slow log uploads
// and a tight logs rate.
import { afterAll, describe, expect, test } from 'vitest';
import type { RunningSimulator, SimConfigInput } from '../../../src/sim/index.js';
import { call, rent, startTestSim, waitFor } from './helpers.js';

const sims: RunningSimulator[] = [];
afterAll(() => Promise.all(sims.map((s) => s.close())));

/** Manual clock at time scale 1 (sim second 0 is the start); an instance runs 30 s after its create. */
async function fresh(config: SimConfigInput = {}) {
  const clock = { now: 1_000_000 };
  const sim = await startTestSim({
    timeScale: 1,
    now: () => clock.now,
    config: { lifecycle: { provision_s: 10, boot_s: { min: 20, max: 20 }, restart_s: 15 }, ...config },
  });
  sims.push(sim);
  const at = (simS: number) => (clock.now = 1_000_000 + simS * 1000);
  const record = async (id: number) => (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
  const statuses = (id: number) =>
    sim
      .history()
      .find((h) => h.id === id)!
      .statuses.map((s) => [s.status, s.at.sim_s]);
  return { sim, at, record, statuses };
}

const STOPPED_BY_SERVICE = {
  actual_status: 'stopped',
  intended_status: 'stopped',
  status_msg: 'Instance stopped: the account balance reached zero',
};

describe('the service stops an instance', () => {
  test('by the admin route, after_s sim seconds from now: intended and actual stopped, its script killed, only disk billed', async () => {
    const { sim, at, record, statuses } = await fresh({ onstart_exec: { enabled: true, timeout_s: 30 } });
    const { instanceId: id } = await rent(sim, { image: 'x', onstart: 'echo task; sleep 60' });
    at(40);
    expect((await record(id)).actual_status).toBe('running');
    const asked = await call(sim, 'POST', `/_sim/instances/${id}/service-stop`, { after_s: 60 });
    expect(asked.body).toEqual({ success: true, stop_at_sim_s: 100 });
    at(99);
    expect((await record(id)).actual_status).toBe('running');
    at(130);
    expect(await record(id)).toMatchObject(STOPPED_BY_SERVICE);
    expect(statuses(id).at(-1)).toEqual(['stopped', 100]);
    const result = await waitFor(() => sim.history().find((h) => h.id === id)!.onstart ?? undefined, 5000, 'the killed script');
    expect(result).toMatchObject({ signal: 'SIGKILL', stdout: 'task\n' });
    const e = sim.ledger().instances[0]!;
    const computeAt130 = e.compute_usd;
    at(1000);
    const later = sim.ledger().instances[0]!;
    expect(later.compute_usd).toBe(computeAt130); // no compute after the stop...
    expect(later.disk_usd).toBeGreaterThan(e.disk_usd); // ...but the disk bills on
    expect(sim.webhookDeliveries().length).toBe(0); // no webhook configured: nothing sent
    // Unknown instance: 400; a negative after_s: 400.
    expect((await call(sim, 'POST', '/_sim/instances/1/service-stop', {})).status).toBe(400);
    expect((await call(sim, 'POST', `/_sim/instances/${id}/service-stop`, { after_s: -1 })).status).toBe(400);
  });

  test('by the fault service_stop_after_s: each start runs that long, then is stopped; set at run time it never stops in the past', async () => {
    const { sim, at, record, statuses } = await fresh({ faults: { service_stop_after_s: 100 } });
    const { instanceId: id } = await rent(sim, { image: 'x' });
    at(500);
    expect(await record(id)).toMatchObject(STOPPED_BY_SERVICE);
    expect(statuses(id).slice(-2)).toEqual([
      ['running', 30],
      ['stopped', 130],
    ]);
    // A start (credit topped up) runs again, and is stopped again 100 s after its running.
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' })).status).toBe(200);
    at(800);
    expect(statuses(id).slice(-3)).toEqual([
      ['loading', 500],
      ['running', 515],
      ['stopped', 615],
    ]);

    // Off at run time: a start runs for good.
    expect((await call(sim, 'PUT', '/_sim/faults', { service_stop_after_s: null })).body.faults.service_stop_after_s).toBeNull();
    await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'running' });
    at(2000);
    expect((await record(id)).actual_status).toBe('running');
    // On again while it has run 1,185 s: stopped now, not 100 s after its start.
    sim.setFaults({ service_stop_after_s: 100 });
    at(2001);
    expect(statuses(id).at(-1)).toEqual(['stopped', 2000]);
  });

  test('serviceStop() in process does the same', async () => {
    const { sim, at, record } = await fresh();
    const { instanceId: id } = await rent(sim, { image: 'x' });
    at(40);
    expect(sim.serviceStop(id)).toBe(true);
    expect(await record(id)).toMatchObject(STOPPED_BY_SERVICE);
    expect(sim.serviceStop(1)).toBe(false);
  });
});

describe('log uploads and the logs rate at run time', () => {
  test('PUT /_sim/logs makes uploads slow from the next request; bad values are 400 naming the field', async () => {
    const { sim, at } = await fresh({ logs: { upload_delay_s: 0 } });
    const { instanceId: id } = await rent(sim, { image: 'x' });
    at(40);
    expect((await call(sim, 'PUT', '/_sim/logs', { upload_delay_s: 30 })).body).toEqual({
      success: true,
      logs: { upload_delay_s: 30, url_ttl_s: 3600 },
    });
    expect((await call(sim, 'GET', '/_sim/logs')).body).toEqual({ upload_delay_s: 30, url_ttl_s: 3600 });
    const url = (await call(sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, {})).body.result_url as string;
    at(69);
    expect((await fetch(url)).status).toBe(403);
    at(70);
    expect((await fetch(url)).status).toBe(200);
    const bad = await call(sim, 'PUT', '/_sim/logs', { upload_delay_s: -1 });
    expect([bad.status, bad.body.msg]).toEqual([400, expect.stringContaining('upload_delay_s')]);
    expect((await call(sim, 'PUT', '/_sim/logs', { upload_delay: 1 })).status).toBe(400);
  });

  test('PUT /_sim/rate-limits tightens the logs group at run time; the same by config', async () => {
    const { sim, at } = await fresh({ logs: { upload_delay_s: 0 } });
    const { instanceId: id } = await rent(sim, { image: 'x' });
    const logs = () => call(sim, 'PUT', `/api/v0/instances/request_logs/${id}/`, {});
    expect((await logs()).status).toBe(200);
    expect((await logs()).status).toBe(200); // limits off, as the test helper starts it
    const set = await call(sim, 'PUT', '/_sim/rate-limits', { enabled: true, groups: { logs: { per_s: 0.5 } } });
    expect(set.body.rate_limits.groups.logs).toMatchObject({ per_s: 0.5, burst: 1 });
    expect((await call(sim, 'GET', '/_sim/rate-limits')).body.enabled).toBe(true);
    at(100);
    expect((await logs()).status).toBe(200);
    at(101);
    const refused = await logs();
    expect([refused.status, refused.text]).toEqual([429, 'API requests too frequent: endpoint threshold=0.5']);
    at(104);
    expect((await logs()).status).toBe(200);
    expect((await call(sim, 'PUT', '/_sim/rate-limits', { groups: { nope: null } })).status).toBe(400);
    expect((await call(sim, 'PUT', '/_sim/rate-limits', { groups: { logs: { per_s: -1 } } })).status).toBe(400);

    const byConfig = await fresh({ logs: { upload_delay_s: 0 }, rate_limits: { enabled: true, groups: { logs: { per_s: 0.5 } } } });
    expect((await call(byConfig.sim, 'GET', '/_sim/rate-limits')).body.groups.logs).toMatchObject({ per_s: 0.5 });
  });
});
