// Recycle (recycle_instance.yaml; the preview spec's 200 `invalid_id`) and update_template (the
// preview spec, vast-cli `update_instance`): answers, refusals, rate limits, the `recycling` →
// loading → running life of the same instance, a fresh container (the onstart again, in an empty
// directory, a new log), the pending template, and each machine's image cache.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunningSimulator } from '../../../src/sim/index.js';
import type { SimInstanceHistory } from '../../../src/sim/instances.js';
import { chargesBetween } from '../../../src/sim/ledger.js';
import { call, rent, startTestSim, statusOf, waitFor } from './helpers.js';

// Sim seconds at 1000×: recycling lasts 0.3 wall s, long enough to be seen.
const lifecycle = { provision_s: 1, boot_s: { min: 20, max: 20 }, restart_s: 5, reboot_s: 5, recycle_s: 300 };
const sims: RunningSimulator[] = [];
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startTestSim({
    config: { lifecycle, logs: { upload_delay_s: 0 }, onstart_exec: { enabled: true, timeout_s: 20 } },
  });
  sims.push(sim);
});
afterAll(() => Promise.all(sims.map((s) => s.close())));

async function extraSim(config: Record<string, unknown>): Promise<RunningSimulator> {
  const s = await startTestSim({ config: { lifecycle, ...config } });
  sims.push(s);
  return s;
}

const histOf = (s: RunningSimulator, id: number): SimInstanceHistory => s.history().find((h) => h.id === id)!;
const running = (s: RunningSimulator, id: number) =>
  waitFor(async () => ((await statusOf(s, id)) === 'running' ? true : undefined), 5000, `instance ${id} running`);
const statusesOf = (s: RunningSimulator, id: number) => histOf(s, id).statuses.map((x) => x.status);

/** Sim seconds from the last `loading` to the `running` after it. */
function lastLoadS(h: SimInstanceHistory): number {
  const i = h.statuses.map((s) => s.status).lastIndexOf('loading');
  const run = h.statuses.slice(i).find((s) => s.status === 'running')!;
  return run.at.sim_s - h.statuses[i]!.at.sim_s;
}

async function logOf(s: RunningSimulator, id: number): Promise<string[]> {
  const asked = await call(s, 'PUT', `/api/v0/instances/request_logs/${id}/`, { tail: '1000' });
  expect(asked.status).toBe(200);
  const text = await waitFor(async () => {
    const r = await fetch(asked.body.result_url as string);
    return r.status === 200 ? r.text() : undefined;
  });
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

async function logWhen(s: RunningSimulator, id: number, check: (lines: string[]) => boolean, what: string): Promise<string[]> {
  return waitFor(
    async () => {
      const lines = await logOf(s, id);
      return check(lines) ? lines : undefined;
    },
    10_000,
    what,
  );
}

describe('recycle', () => {
  test('answers {success: true}; the same instance goes recycling, loading, running, keeping its id, machine, price and ports', async () => {
    const { instanceId: id } = await rent(sim);
    await running(sim, id);
    const before = (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
    expect(await call(sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).toMatchObject({ status: 200, body: { success: true } });
    expect(await statusOf(sim, id)).toBe('recycling');
    await running(sim, id);
    const after = (await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances;
    for (const field of ['id', 'machine_id', 'dph_total', 'ssh_host', 'ssh_port', 'public_ipaddr', 'image_uuid', 'start_date']) {
      expect(after[field], field).toEqual(before[field]);
    }
    expect(statusesOf(sim, id)).toEqual([null, 'loading', 'running', 'recycling', 'loading', 'running']);
    const h = histOf(sim, id);
    const recycling = h.statuses[3]!;
    expect(h.statuses[4]!.at.sim_s - recycling.at.sim_s).toBeCloseTo(300, 6);
    expect(lastLoadS(h)).toBeCloseTo(20, 6); // no cache configured: the drawn boot_s
    // Billed as a reboot: the GPU is held while recycling (the docs say nothing of it).
    const during = chargesBetween(h, recycling.at.sim_s, h.statuses[4]!.at.sim_s);
    expect(during.compute_h).toBeCloseTo(300 / 3600, 6);
  });

  test('a missing or destroyed instance: 200 {success: false, error: "invalid_id"} (the preview spec); 400 with the quirk (the yaml)', async () => {
    const missing = { success: false, error: 'invalid_id', msg: 'Invalid instance id.' };
    expect(await call(sim, 'PUT', '/api/v0/instances/recycle/1/', {})).toMatchObject({ status: 200, body: missing });
    const { instanceId: id } = await rent(sim);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${id}/`)).status).toBe(200);
    expect(await call(sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).toMatchObject({ status: 200, body: missing });
    const strict = await extraSim({ quirks: { recycle_refused_status: 400 } });
    expect(await call(strict, 'PUT', '/api/v0/instances/recycle/1/', {})).toMatchObject({ status: 400, body: missing });
  });

  test('a stopped instance is refused and stays stopped; the instance key may not recycle', async () => {
    const { instanceId: id, instanceKey } = await rent(sim);
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' })).status).toBe(200);
    const r = await call(sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {});
    expect(r).toMatchObject({ status: 200, body: { success: false, error: 'invalid_args' } });
    expect(await statusOf(sim, id)).toBe('stopped');
    const { instanceId: other, instanceKey: otherKey } = await rent(sim);
    expect((await call(sim, 'PUT', `/api/v0/instances/recycle/${other}/`, {}, otherKey)).status).toBe(403);
    expect(instanceKey).not.toBe(otherKey);
  });

  test('the unsuccessful_200 fault answers {success: false} and does nothing', async () => {
    const s = await extraSim({ faults: { unsuccessful_200_rate: 1 } });
    const { instanceId: id } = await rent(s);
    await running(s, id);
    const r = await call(s, 'PUT', `/api/v0/instances/recycle/${id}/`, {});
    expect(r).toMatchObject({ status: 200, body: { success: false, error: 'request_failed' } });
    const u = await call(s, 'PUT', `/api/v0/instances/update_template/${id}/`, { image: 'other/image:1', recycle: true });
    expect(u).toMatchObject({ status: 200, body: { success: false, error: 'request_failed' } });
    expect(await statusOf(s, id)).toBe('running');
    expect(statusesOf(s, id)).not.toContain('recycling');
  });

  test('rate limits: recycle 1.0/s with a {detail} 429, update_template one call in 2 s with a plain-text 429', async () => {
    const s = await extraSim({ rate_limits: { enabled: true } });
    // Not waited for running: the polls would spend show's budget. A loading instance may be recycled.
    const { instanceId: id } = await rent(s);
    expect((await call(s, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).status).toBe(200);
    expect(await call(s, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).toMatchObject({
      status: 429,
      body: { detail: 'API requests too frequent endpoint threshold=1.0' },
    });
    // Its own endpoint and budget.
    expect((await call(s, 'PUT', `/api/v0/instances/update_template/${id}/`, { onstart: 'true' })).status).toBe(200);
    const again = await call(s, 'PUT', `/api/v0/instances/update_template/${id}/`, { onstart: 'true' });
    expect(again.status).toBe(429);
    expect(again.text).toContain('API requests too frequent');
    expect(again.text).toContain('threshold=0.5');
  });
});

describe('a fresh container', () => {
  test("the onstart runs again in an empty directory; the old container's files and log lines are gone", async () => {
    const { instanceId: id } = await rent(sim, {
      image: 'x',
      onstart: 'echo "files=$(ls -A | wc -l) run=$(date +%s%N)"; touch left-behind; sleep 60',
    });
    const runs = (lines: string[]) => lines.filter((l) => l.startsWith('files='));
    const first = await logWhen(sim, id, (l) => runs(l).length === 1, 'the first run');
    expect(runs(first)[0]).toMatch(/^files=0 /);
    expect((await call(sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).body).toEqual({ success: true });
    const second = await logWhen(sim, id, (l) => runs(l).length === 1 && histOf(sim, id).onstart_runs === 2, 'the run after the recycle');
    // Its directory is new and empty (the file the first run wrote is gone), and the log is the new container's alone.
    expect(runs(second)[0]).toMatch(/^files=0 /);
    expect(runs(second)[0]).not.toBe(runs(first)[0]);
    expect(second.filter((l) => l.endsWith('started'))).toHaveLength(1);
  });

  test('while recycling, the container log is docker\'s "No such container"', async () => {
    const { instanceId: id } = await rent(sim, { image: 'x', onstart: 'echo hello; sleep 60' });
    await logWhen(sim, id, (l) => l.includes('hello'), 'the first run');
    expect((await call(sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).status).toBe(200);
    expect(await logOf(sim, id)).toEqual([`Error response from daemon: No such container: C.${id}`]);
  });
});

describe('update_template', () => {
  test('with recycle: the new image and onstart run in the fresh container; env is not applied by default', async () => {
    const { instanceId: id } = await rent(sim, { image: 'x', env: { FOO: 'old' }, onstart: 'echo "one FOO=$FOO"; sleep 60' });
    await logWhen(sim, id, (l) => l.includes('one FOO=old'), 'the first onstart');
    const r = await call(sim, 'PUT', `/api/v0/instances/update_template/${id}/`, {
      id,
      image: 'y/image:2',
      onstart: 'echo "two FOO=$FOO"; sleep 60',
      env: { FOO: 'new' },
      recycle: true,
    });
    expect(r).toMatchObject({ status: 200, body: { success: true } });
    expect(await statusOf(sim, id)).toBe('recycling');
    const lines = await logWhen(sim, id, (l) => l.some((x) => x.startsWith('two ')), 'the new onstart');
    expect(lines).toContain('two FOO=old');
    expect(lines.join('\n')).not.toContain('one FOO');
    expect((await call(sim, 'GET', `/api/v0/instances/${id}/`)).body.instances.image_uuid).toBe('y/image:2');
    expect(histOf(sim, id).image).toBe('y/image:2');
  });

  test('with quirks.update_env_applies the new env reaches the recycled container', async () => {
    const s = await extraSim({ quirks: { update_env_applies: true }, logs: { upload_delay_s: 0 }, onstart_exec: { enabled: true } });
    const { instanceId: id } = await rent(s, { image: 'x', env: { FOO: 'old' }, onstart: 'echo "FOO=$FOO"; sleep 60' });
    await logWhen(s, id, (l) => l.includes('FOO=old'), 'the first onstart');
    expect((await call(s, 'PUT', `/api/v0/instances/update_template/${id}/`, { env: { FOO: 'new' }, recycle: true })).body).toEqual({
      success: true,
    });
    await logWhen(s, id, (l) => l.includes('FOO=new'), 'the new env');
  });

  test('without recycle nothing changes until the next recycle (a reboot keeps the container)', async () => {
    const { instanceId: id } = await rent(sim, { image: 'x', onstart: 'echo first-script; sleep 60' });
    await logWhen(sim, id, (l) => l.includes('first-script'), 'the first onstart');
    expect((await call(sim, 'PUT', `/api/v0/instances/update_template/${id}/`, { onstart: 'echo second-script; sleep 60' })).body).toEqual({
      success: true,
    });
    expect(await statusOf(sim, id)).toBe('running');
    expect((await call(sim, 'PUT', `/api/v0/instances/reboot/${id}/`, {})).status).toBe(200);
    await logWhen(sim, id, (l) => l.filter((x) => x === 'first-script').length === 2, 'the run after the reboot');
    expect((await call(sim, 'PUT', `/api/v0/instances/recycle/${id}/`, {})).status).toBe(200);
    const after = await logWhen(sim, id, (l) => l.includes('second-script'), 'the pending onstart after the recycle');
    expect(after).not.toContain('first-script');
  });

  test('a template by hash id gives its image and onstart', async () => {
    const tpl = await call(sim, 'POST', '/api/v0/template/', {
      name: 't',
      image: 'tpl/image',
      tag: '3',
      onstart: 'echo from-template; sleep 60',
    });
    expect(tpl.status).toBe(200);
    const hash = (tpl.body.template?.hash_id ?? tpl.body.hash_id) as string;
    const { instanceId: id } = await rent(sim, { image: 'x', onstart: 'sleep 60' });
    await running(sim, id);
    expect((await call(sim, 'PUT', `/api/v0/instances/update_template/${id}/`, { template_hash_id: hash, recycle: true })).body).toEqual({
      success: true,
    });
    await logWhen(sim, id, (l) => l.includes('from-template'), 'the template onstart');
    expect(histOf(sim, id).image).toBe('tpl/image:3');
  });

  test('refusals: 404 not_found for a missing instance, 200 {success: false} for an unknown template, 400 for bad fields, the recycle refusal after the update', async () => {
    expect(await call(sim, 'PUT', '/api/v0/instances/update_template/1/', { image: 'a' })).toMatchObject({
      status: 404,
      body: { success: false, error: 'not_found', msg: "Instance not found or you don't have permission to modify it" },
    });
    const { instanceId: id } = await rent(sim);
    expect(await call(sim, 'PUT', `/api/v0/instances/update_template/${id}/`, { template_hash_id: 'nope' })).toMatchObject({
      status: 200,
      body: { success: false, error: 'invalid_args' },
    });
    for (const body of [
      { disk: 4 },
      { image: 7 },
      { onstart: 'x'.repeat(4049) },
      { env: { A: 'x'.repeat(257) } },
      { recycle: 'yes' },
      { args: 5 },
    ]) {
      const r = await call(sim, 'PUT', `/api/v0/instances/update_template/${id}/`, body);
      expect([r.status, r.body.error], JSON.stringify(body).slice(0, 60)).toEqual([400, 'invalid_args']);
    }
    expect((await call(sim, 'PUT', `/api/v0/instances/${id}/`, { state: 'stopped' })).status).toBe(200);
    const r = await call(sim, 'PUT', `/api/v0/instances/update_template/${id}/`, { image: 'z/kept', recycle: true });
    expect(r).toMatchObject({ status: 200, body: { success: false, error: 'invalid_args' } });
    expect(await statusOf(sim, id)).toBe('stopped');
  });
});

describe('the image cache of each machine', () => {
  test('a first pull is slow, the same image again on that machine is fast, another machine or image pulls slowly', async () => {
    const s = await extraSim({ lifecycle: { ...lifecycle, first_pull_s: 600, cached_boot_s: 7 } });
    const offers = (await call(s, 'POST', '/api/v0/bundles/', { limit: 20, order: [['dph_total', 'asc']] })).body.offers as Array<{
      id: number;
      machine_id: number;
    }>;
    const a = offers[0]!;
    const b = offers.find((o) => o.machine_id !== a.machine_id)!;
    const create = async (offerId: number, image: string) => {
      const r = await call(s, 'PUT', `/api/v0/asks/${offerId}/`, { image, disk: 20 });
      expect(r.status, r.text).toBe(200);
      return r.body.new_contract as number;
    };
    const first = await create(a.id, 'big/image:1');
    await running(s, first);
    expect(lastLoadS(histOf(s, first))).toBeCloseTo(620, 6); // boot_s 20 + first_pull_s 600
    expect((await call(s, 'DELETE', `/api/v0/instances/${first}/`)).status).toBe(200);

    const again = await create(a.id, 'big/image:1');
    await running(s, again);
    expect(lastLoadS(histOf(s, again))).toBeCloseTo(7, 6);
    const elsewhere = await create(b.id, 'big/image:1');
    // A recycle of an image its machine has: fast.
    expect((await call(s, 'PUT', `/api/v0/instances/recycle/${again}/`, {})).status).toBe(200);
    await running(s, again);
    expect(lastLoadS(histOf(s, again))).toBeCloseTo(7, 6);
    // An update to an image the machine never pulled: slow, the first time.
    expect((await call(s, 'PUT', `/api/v0/instances/update_template/${again}/`, { image: 'big/image:2', recycle: true })).status).toBe(200);
    await running(s, again);
    expect(lastLoadS(histOf(s, again))).toBeCloseTo(620, 6);
    await running(s, elsewhere);
    expect(lastLoadS(histOf(s, elsewhere))).toBeCloseTo(620, 6);
  });

  test('by default (no cache configured) every load takes the drawn boot_s, as before', async () => {
    const { instanceId: one, offerId } = await rent(sim);
    await running(sim, one);
    expect((await call(sim, 'DELETE', `/api/v0/instances/${one}/`)).status).toBe(200);
    const two = (await call(sim, 'PUT', `/api/v0/asks/${offerId}/`, { image: 'pytorch/pytorch:latest', disk: 20 })).body
      .new_contract as number;
    await running(sim, two);
    expect(lastLoadS(histOf(sim, one))).toBeCloseTo(20, 6);
    expect(lastLoadS(histOf(sim, two))).toBeCloseTo(20, 6);
  });
});
