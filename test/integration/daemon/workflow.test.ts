// The provisioning workflow end to end in one process: the real simulator on a free port, the real
// daemon with a real SQLite file, talking over HTTP.
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { request } from 'undici';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import {
  cancelAndCheckNothingBills,
  isEnded,
  isRunning,
  jobSpec,
  offersInTryOrder,
  startWorld,
  submit,
  type World,
} from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('daemon workflow against the simulator', () => {
  it('fails over exited, unknown, offline and stuck-loading offers and runs on a good one', async () => {
    world = await startWorld();
    const spec = jobSpec();
    const order = await offersInTryOrder(world, spec);
    const profiles = ['exited', 'unknown', 'offline', 'stuck_loading'] as const;
    profiles.forEach((p, i) => world!.sim.setOfferProfile(order[i]!.id, p));

    const run = await submit(world, spec);
    const running = await world.waitFor(run.id, isRunning, 30_000);
    expect(running.attempts.map((a) => [a.offer_id, a.outcome])).toEqual([
      [order[0]!.id, 'exited'],
      [order[1]!.id, 'unknown'],
      [order[2]!.id, 'offline'],
      [order[3]!.id, 'boot_timeout'],
      [order[4]!.id, 'running'],
    ]);
    expect(running.instance).toMatchObject({ offer_id: order[4]!.id, actual_status: 'running' });
    expect(running.instance!.ssh_host).toBeTruthy();
    expect(running.instance!.ssh_port).toBeGreaterThan(0);
    // Each failed instance was destroyed; only the running one is left.
    const mine = world.sim.history().filter((h) => h.label?.includes(run.id));
    expect(mine).toHaveLength(5);
    expect(world.sim.billingNow().map((h) => h.id)).toEqual([running.instance!.id]);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('ends a run whose image does not exist after its first instance, saying what to fix, and leaves nothing billing', async () => {
    world = await startWorld();
    // The simulator's missing_images default: a tag that says it does not exist.
    const run = await submit(world, jobSpec({ image: 'pytorch/pytorch:no-such-tag', max_attempts: 5 }));
    const ended = await world.waitFor(run.id, isEnded, 30_000);
    expect(ended.state).toBe('failed');
    expect(ended.error).toMatchObject({ kind: 'image_unavailable' });
    expect(ended.error!.message).toContain('manifest for pytorch/pytorch:no-such-tag not found');
    expect(ended.error!.message).toContain('image_login');
    expect(ended.attempts.map((a) => a.outcome)).toEqual(['image_unavailable']);
    expect(world.sim.history().filter((h) => h.label?.includes(run.id))).toHaveLength(1);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('succeeds after one relax step when only unverified offers match', async () => {
    world = await startWorld();
    const unverified = world.sim
      .offers()
      .filter((o) => !o.verified && o.num_gpus === 1 && o.direct_port_count >= 1 && o.dph_total <= 5)
      .slice(0, 3)
      .map((o) => o.id);
    expect(unverified.length).toBeGreaterThan(0);
    const spec = jobSpec({
      search: { filters: { id: { in: unverified }, verified: { eq: true } }, limit: 16 },
      relax: [{ drop: ['verified'] }],
    });
    const run = await submit(world, spec);
    const running = await world.waitFor(run.id, isRunning);
    expect(running.relax_level).toBe(1);
    expect(unverified).toContain(running.instance!.offer_id);
    const events = (await world.api<Array<{ message: string }>>('GET', `/v1/runs/${run.id}/events`)).body;
    expect(events.map((e) => e.message)).toContain('no usable offer; relaxed the search: dropped filter verified');
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('fails an impossible spec with the relax ladder exhausted', async () => {
    world = await startWorld();
    const run = await submit(
      world,
      jobSpec({
        search: { filters: { gpu_name: { eq: 'H100 SXM' }, num_gpus: { eq: 64 } } },
        relax: [{ drop: ['num_gpus'] }],
        max_price_per_hour: 0.01,
      }),
    );
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.state).toBe('failed');
    expect(failed.error?.kind).toBe('no_offers');
    expect(failed.error?.message).toMatch(/after 1 of 1 relax steps/);
    expect(world.sim.history()).toEqual([]);
  });

  it('fails after max_attempts with every offer tried and why, leaving nothing billing', async () => {
    world = await startWorld();
    const spec = jobSpec({ max_attempts: 3 });
    const order = await offersInTryOrder(world, spec);
    order.slice(0, 3).forEach((o) => world!.sim.setOfferProfile(o.id, 'exited'));
    const run = await submit(world, spec);
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.error?.kind).toBe('attempts_exhausted');
    for (const o of order.slice(0, 3)) expect(failed.error?.message).toContain(`offer ${o.id} (machine ${o.machine_id}`);
    expect(failed.attempts.map((a) => a.outcome)).toEqual(['exited', 'exited', 'exited']);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('bounds the creates of a run whose offers all vanish by its searches, keeping its snapshot small', async () => {
    // Every create finds its offer just rented by someone else (410 no_such_ask). Gone offers do not
    // spend max_attempts, so without a per-search budget this run once made ~2,000 creates in 95 s.
    world = await startWorld({ sim: { faults: { offer_taken_rate: 1 } } });
    const run = await submit(world, jobSpec({ max_attempts: 3 }));
    await world.waitFor(run.id, (r) => r.attempts.length >= 12);
    const stats = world.sim.stats();
    const searches = stats.requests['POST /api/v0/bundles/'] ?? 0;
    expect(stats.creates_received).toBeGreaterThanOrEqual(11); // the 12th may still be on its way
    // runs.gone_offers_per_search (3) creates per search at most, however many offers each search returned.
    expect(stats.creates_received).toBeLessThanOrEqual(3 * searches);
    const now = (await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body;
    expect(['searching', 'creating']).toContain(now.state);
    expect(now.attempts.every((a) => a.outcome === 'offer_unavailable' || a.outcome === null)).toBe(true);
    // The attempts live in their table; the machine's snapshot stays small.
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(join(world.home, 'berth.db'), { readonly: true });
    const { size } = db.prepare('SELECT length(snapshot_json) AS size FROM runs WHERE id = ?').get(run.id) as { size: number };
    db.close();
    expect(size).toBeLessThan(20_000);
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    await world.waitFor(run.id, isEnded);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('runs a 5,000-character onstart in the simulator exactly as written', async () => {
    world = await startWorld({ sim: { onstart_exec: { enabled: true, timeout_s: 10 } } });
    const lines: string[] = [];
    for (let i = 0; lines.join('\n').length < 5000; i++) lines.push(`echo "line ${i}: berth runs what you wrote, \\$HOME stays literal"`);
    const script = lines.join('\n');
    expect(script.length).toBeGreaterThan(4048);
    const run = await submit(world, jobSpec({ onstart: script, env: { GREETING: 'hello' } }));
    const running = await world.waitFor(run.id, isRunning);
    const deadline = Date.now() + 10_000;
    let result = world.sim.history().find((h) => h.id === running.instance!.id)?.onstart;
    while (!result && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      result = world.sim.history().find((h) => h.id === running.instance!.id)?.onstart;
    }
    expect(result?.exit_code).toBe(0);
    const expected = lines.map((_, i) => `line ${i}: berth runs what you wrote, $HOME stays literal`).join('\n') + '\n';
    expect(result?.stdout).toBe(expected);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('fails the run at once with an auth error when the API key is wrong', async () => {
    world = await startWorld({ apiKey: 'not-a-valid-key-1234' });
    const run = await submit(world, jobSpec());
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.error?.kind).toBe('auth');
    expect(failed.error?.message).toContain('BERTH_API_KEY');
    expect(failed.error?.message).not.toContain('not-a-valid-key-1234');
  });

  it('fails the run naming the missing permission when the key cannot create instances', async () => {
    const key = 'scoped-read-only-key';
    world = await startWorld({
      sim: { keys: [{ key, permissions: { api: { misc: {}, user_read: {}, instance_read: {} } } }] },
      apiKey: key,
    });
    const run = await submit(world, jobSpec());
    const failed = await world.waitFor(run.id, isEnded);
    expect(failed.error?.kind).toBe('permission');
    expect(failed.error?.message).toContain('instance_write');
    expect(failed.attempts).toHaveLength(1);
    expect(world.sim.history()).toEqual([]);
  });

  it('resumes a booting run after a restart without creating its instance again', async () => {
    world = await startWorld({ sim: { lifecycle: { provision_s: 5, boot_s: { min: 150, max: 150 } } } });
    const run = await submit(world, jobSpec());
    await world.waitFor(run.id, (r) => r.state === 'booting');
    await world.restartDaemon();
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts, JSON.stringify(running.attempts)).toHaveLength(1);
    expect(world.sim.history().filter((h) => h.label?.includes(run.id))).toHaveLength(1);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('keeps runs beyond daemon.max_active_runs queued, first come first served, and admits one as a slot frees', async () => {
    world = await startWorld({ config: { daemon: { listen: '127.0.0.1:0', max_active_runs: 1 } } });
    const [a, b, c] = [
      await submit(world, jobSpec({ name: 'a' })),
      await submit(world, jobSpec({ name: 'b' })),
      await submit(world, jobSpec({ name: 'c' })),
    ];
    await world.waitFor(a!.id, isRunning);
    expect((await world.api<RunView>('GET', `/v1/runs/${b!.id}`)).body.state).toBe('queued');
    // Cancelling a queued run never admits it.
    await world.api('POST', `/v1/runs/${b!.id}/cancel`);
    expect((await world.waitFor(b!.id, isEnded)).attempts).toEqual([]);
    expect((await world.api<RunView>('GET', `/v1/runs/${c!.id}`)).body.state).toBe('queued');
    await cancelAndCheckNothingBills(world, a!.id, true);
    await world.waitFor(c!.id, isRunning);
    await cancelAndCheckNothingBills(world, c!.id);
  });

  it('keeps queued runs queued in order across a restart and admits them as slots free', async () => {
    world = await startWorld({ config: { daemon: { listen: '127.0.0.1:0', max_active_runs: 1 } } });
    const a = await submit(world, jobSpec({ name: 'a' }));
    await world.waitFor(a.id, isRunning);
    const [b, c] = [await submit(world, jobSpec({ name: 'b' })), await submit(world, jobSpec({ name: 'c' }))];
    await world.restartDaemon();
    expect((await world.waitFor(a.id, isRunning)).attempts).toHaveLength(1);
    for (const r of [b, c]) expect((await world.api<RunView>('GET', `/v1/runs/${r!.id}`)).body.state).toBe('queued');
    await cancelAndCheckNothingBills(world, a.id, true);
    await world.waitFor(b!.id, isRunning);
    expect((await world.api<RunView>('GET', `/v1/runs/${c!.id}`)).body.state).toBe('queued');
    await world.api('POST', `/v1/runs/${c!.id}/cancel`);
    expect((await world.waitFor(c!.id, isEnded)).attempts).toEqual([]);
    await cancelAndCheckNothingBills(world, b!.id);
  });

  it('uses only the documented v1 list among 300 other instances, shows the billed price and never touches the others', async () => {
    world = await startWorld();
    const populated = await request(`${world.sim.url}/_sim/instances/bulk`, { method: 'POST', body: JSON.stringify({ count: 300 }) });
    expect(populated.statusCode).toBe(200);
    await populated.body.dump();
    const runs = await Promise.all([submit(world, jobSpec({ name: 'v1-a' })), submit(world, jobSpec({ name: 'v1-b' }))]);
    for (const r of runs) {
      const running = await world.waitFor(r.id, isRunning, 20_000);
      // The billed price, from the instance record, not the search's quote.
      const record = world.sim.instances().find((i) => i.id === running.instance!.id)!;
      expect(running.instance!.dph_total).toBe(record['dph_total']);
    }
    const stats = world.sim.stats();
    expect(stats.requests['GET /api/v1/instances/']).toBeGreaterThan(0);
    expect(stats.requests['GET /api/v0/instances/']).toBeUndefined();
    expect(world.sim.billingNow()).toHaveLength(302); // the 300 foreign instances are never touched
    await world.api('POST', `/v1/runs/${runs[0]!.id}/cancel`);
    expect((await world.waitFor(runs[0]!.id, isEnded)).state).toBe('cancelled');
    await world.api('POST', `/v1/runs/${runs[1]!.id}/cancel`);
    expect((await world.waitFor(runs[1]!.id, isEnded)).state).toBe('cancelled');
    expect(world.sim.billingNow()).toHaveLength(300);
  });

  it('notices a running instance that disappears only from complete sweeps, and replaces it', async () => {
    world = await startWorld();
    const populated = await request(`${world.sim.url}/_sim/instances/bulk`, { method: 'POST', body: JSON.stringify({ count: 120 }) });
    await populated.body.dump();
    const run = await submit(world, jobSpec({ name: 'lost' }));
    const running = await world.waitFor(run.id, isRunning, 20_000);
    // Gone behind berth's back (another tool destroyed it): not in any list from now on.
    const res = await request(`${world.sim.url}/api/v0/instances/${running.instance!.id}/`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${world.sim.apiKey}` },
    });
    await res.body.dump();
    const again = await world.waitFor(run.id, (r) => r.attempts.length >= 2 && r.attempts[0]!.outcome === 'lost', 30_000);
    expect(again.attempts[0]).toMatchObject({ instance_id: running.instance!.id, outcome: 'lost' });
    await cancelAndCheckNothingBills(world, run.id, true);
  });

  it('destroys an instance with its label that no live run owns', async () => {
    world = await startWorld();
    const offer = (await offersInTryOrder(world, jobSpec()))[0]!;
    const label = `berth:${world.daemon.storeId}:nosuchrun:1`;
    const res = await request(`${world.sim.url}/api/v0/asks/${offer.id}/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${world.sim.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'x', disk: 10, label }),
    });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    const deadline = Date.now() + 5000;
    while (world.sim.billingNow().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(world.sim.billingNow()).toEqual([]);
    // Another daemon's (or tool's) instances are never touched.
    const foreign = await request(`${world.sim.url}/api/v0/asks/${offer.id}/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${world.sim.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'x', disk: 10, label: 'berth:otherstore:r:1' }),
    });
    await foreign.body.dump();
    await new Promise((r) => setTimeout(r, 500));
    expect(world.sim.billingNow()).toHaveLength(1);
  });
});
