// A real daemon process killed with SIGKILL at the worst moments, then restarted: every run must
// carry on with exactly one instance per attempt, and nothing may be left billing without an owner.
// Checked against the simulator's own history and ledger, not berth's view. Every test runs on a
// SQLite store and on a Postgres one.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { createPgDatabase, type PgDatabase } from '../helpers/pg-database.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;
let home: string | undefined;
let database: PgDatabase | undefined;
/** The store the file's tests run on now (each test runs on both). */
let backend: 'sqlite' | 'postgres' = 'sqlite';

afterEach(async () => {
  await database?.drop();
  sim = daemon = home = database = undefined;
});
// Registered after the hook above, so run before it (vitest runs after-hooks as a stack): the daemon ends before its database.
const world = useSpawnedWorld();

async function setup(simOverrides = {}, configOverrides = {}) {
  sim = await world.sim({ seed: 11, config: { ...FAST_SIM, ...simOverrides } });
  home = world.home();
  if (backend === 'postgres') database = await createPgDatabase();
  const store = database ? { store: { url: database.url } } : {};
  const s = { home, simUrl: sim.url, apiKey: sim.apiKey, config: { ...FAST_CONFIG, ...store, ...configOverrides } };
  daemon = await world.spawn(s);
  return { restart: async () => (daemon = await world.spawn(s)) };
}

/** Instances the simulator ever made for this run, by attempt number. */
function instancesByAttempt(runId: string): Map<number, number[]> {
  const m = new Map<number, number[]>();
  for (const h of sim!.history()) {
    const parts = h.label?.split(':');
    if (!parts || parts[2] !== runId) continue;
    const n = Number(parts[3]);
    m.set(n, [...(m.get(n) ?? []), h.id]);
  }
  return m;
}

async function submit(spec = jobSpec()): Promise<string> {
  const res = await daemon!.api<RunView>('POST', '/v1/runs', spec);
  expect(res.status).toBe(201);
  return res.body.id;
}

async function cancelAndExpectNothingBilling(runId: string): Promise<void> {
  await daemon!.api('POST', `/v1/runs/${runId}/cancel`);
  expect((await daemon!.waitFor(runId, isEnded)).state).toBe('cancelled');
  expect(sim!.billingNow()).toEqual([]);
}

describe.each(['sqlite', 'postgres'] as const)('crash recovery (real daemon process, SIGKILL), %s store', (store) => {
  beforeEach(() => {
    backend = store;
  });

  it('SIGKILL while booting: the restarted daemon resumes the run with the same instance', async () => {
    const { restart } = await setup({ lifecycle: { provision_s: 5, boot_s: { min: 200, max: 200 } } });
    // A boot deadline longer than a restart on a loaded machine (the default 5 s was not: the
    // restarted daemon found the deadline passed and went on to a new instance).
    const runId = await submit(jobSpec({ boot_timeout_s: 60 }));
    const booting = await daemon!.waitFor(runId, (r) => r.state === 'booting');
    await daemon!.kill9();
    await restart();
    const running = await daemon!.waitFor(runId, isRunning);
    expect(running.instance?.id).toBe(booting.instance?.id);
    expect(running.attempts).toHaveLength(1);
    expect([...instancesByAttempt(runId).values()]).toEqual([[booting.instance!.id]]);
    await cancelAndExpectNothingBilling(runId);
  });

  it('SIGKILL while the create is in flight and the service never performed it: a new attempt, no duplicate', async () => {
    const { restart } = await setup();
    // Slow answers keep the create in flight long enough to kill the daemon inside it; the
    // simulator drops a request whose client is gone, as a real service may.
    sim!.setFaults({ latency_ms: 800 });
    const runId = await submit();
    await daemon!.waitFor(runId, (r) => r.state === 'creating', 10_000);
    await new Promise((r) => setTimeout(r, 300));
    await daemon!.kill9();
    sim!.setFaults({ latency_ms: 0 });
    await restart();
    const running = await daemon!.waitFor(runId, isRunning);
    const byAttempt = instancesByAttempt(runId);
    for (const ids of byAttempt.values()) expect(ids).toHaveLength(1);
    expect(sim!.history().filter((h) => h.label?.includes(runId))).toHaveLength(byAttempt.size);
    expect(running.attempts.at(-1)?.instance_id).toBe(running.instance!.id);
    expect(sim!.billingNow().map((h) => h.id)).toEqual([running.instance!.id]);
    await cancelAndExpectNothingBilling(runId);
  });

  it('SIGKILL after the service made the instance but before berth learned its id: adopted by label, never made twice', async () => {
    const { restart } = await setup();
    // The create is performed and its answer lost; the daemon then looks for the label, slowly.
    sim!.setFaults({ ambiguous_create_rate: 1, latency_ms: 400 });
    const runId = await submit();
    const deadline = Date.now() + 10_000;
    while (!sim!.history().some((h) => h.label?.includes(runId)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    await daemon!.kill9();
    sim!.setFaults({ ambiguous_create_rate: 0, latency_ms: 0 });
    const made = sim!.history().filter((h) => h.label?.includes(runId));
    expect(made).toHaveLength(1);
    await restart();
    const running = await daemon!.waitFor(runId, isRunning);
    expect(running.attempts, JSON.stringify(running.attempts)).toHaveLength(1);
    expect(running.instance!.id).toBe(made[0]!.id);
    expect(sim!.history().filter((h) => h.label?.includes(runId))).toHaveLength(1);
    await cancelAndExpectNothingBilling(runId);
  });

  it('destroys at restart an instance whose run record does not exist (made by this store, owned by nobody)', async () => {
    const { restart } = await setup();
    const health = (await daemon!.api<{ store_id: string }>('GET', '/healthz')).body;
    await daemon!.kill9();
    const offer = sim!.offers().find((o) => !o.rented && o.direct_port_count >= 1)!;
    const res = await request(`${sim!.url}/api/v0/asks/${offer.id}/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${sim!.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'x', disk: 10, label: `berth:${health.store_id}:lostrecord1:1` }),
    });
    await res.body.dump();
    expect(sim!.billingNow()).toHaveLength(1);
    await restart();
    const deadline = Date.now() + 5000;
    while (sim!.billingNow().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(sim!.billingNow()).toEqual([]);
  });

  it('SIGTERM stops the daemon gracefully with exit code 0, and a restart resumes the run', async () => {
    const { restart } = await setup();
    const runId = await submit();
    await daemon!.waitFor(runId, isRunning);
    expect(await daemon!.stop()).toBe(0);
    await restart();
    const again = await daemon!.waitFor(runId, isRunning);
    expect(again.attempts).toHaveLength(1);
    await cancelAndExpectNothingBilling(runId);
  });

  it('SIGKILL while re-bidding an outbid instance: the restarted daemon raises the bid again and runs on it, nothing else billing', async () => {
    // A raised bid gets 2 s to win before it is raised again: time to kill the daemon in between.
    const { restart } = await setup({}, { runs: { ...FAST_CONFIG.runs, rebid_wait_s: 2 } });
    const spec = jobSpec({
      search: { type: 'bid', filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
      bid_price: 'min',
      bid_step_pct: 25,
      on_outbid: 'rebid',
      max_price_per_hour: 1,
    });
    const runId = await submit(spec);
    const running = await daemon!.waitFor(runId, isRunning);
    const id = running.instance!.id;
    const first = sim!.history().find((h) => h.id === id)!;
    const firstBid = first.compute_dph;
    // The market rises 40 %: one step of 25 % is not enough, the second (1.25² = 1.56) wins.
    expect(sim!.raiseMinBid(first.machine_id, 40).outbid).toEqual([id]);
    await daemon!.waitFor(runId, (r) => r.state === 'rebidding', 10_000);
    await new Promise((r) => setTimeout(r, 300)); // the first raise has gone out
    await daemon!.kill9();
    expect(sim!.instances().find((i) => i.id === id)?.actual_status).toBe('stopped');
    await restart();
    const again = await daemon!.waitFor(runId, (r) => isRunning(r) && r.instance!.ready!.at > running.instance!.ready!.at, 20_000);
    expect(again.instance!.id).toBe(id);
    expect(again.attempts.map((a) => a.outcome)).toEqual(['running']);
    const bids = sim!
      .history()
      .find((h) => h.id === id)!
      .compute_dph_changes.map((c) => c.dph);
    // Raised twice (25 % each), once before the kill and once by the restarted daemon.
    expect(bids).toHaveLength(3);
    expect(bids[1]).toBeCloseTo(firstBid * 1.25, 2);
    expect(bids[1]).toBeLessThan(firstBid * 1.4);
    expect(bids[2]).toBeGreaterThan(firstBid * 1.4);
    expect(sim!.history().filter((h) => h.label?.includes(runId))).toHaveLength(1);
    expect(sim!.ledger().billing_now).toEqual([id]);
    await cancelAndExpectNothingBilling(runId);
  });

  it('never writes the API key, instance keys or env values to its log, the run object or the events', async () => {
    const { restart } = await setup({ faults: { ambiguous_create_rate: 0.5 }, onstart_exec: { enabled: true, timeout_s: 5 } });
    const secret = 'env-secret-value-9f3a1c';
    // The instance key reaches the container as CONTAINER_API_KEY: the script shows it to the test.
    const runId = await submit(jobSpec({ env: { HF_TOKEN: secret }, onstart: 'echo "$CONTAINER_API_KEY"' }));
    await daemon!.waitFor(runId, isRunning);
    await daemon!.kill9();
    await restart();
    const view = await daemon!.waitFor(runId, isRunning);
    const events = (await daemon!.api('GET', `/v1/runs/${runId}/events`)).body;
    let instanceKeys: string[] = [];
    for (let i = 0; i < 100 && instanceKeys.length === 0; i++) {
      instanceKeys = sim!.history().flatMap((h) => (h.onstart?.stdout.trim() ? [h.onstart.stdout.trim()] : []));
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(instanceKeys.length).toBeGreaterThan(0);
    expect(instanceKeys.every((k) => k.length > 8)).toBe(true);
    await cancelAndExpectNothingBilling(runId);
    expect(await daemon!.stop()).toBe(0);
    const log = readFileSync(join(home!, 'daemon.log'), 'utf8');
    expect(log.length).toBeGreaterThan(1000);
    for (const text of [log, JSON.stringify(view), JSON.stringify(events)]) {
      expect(text).not.toContain(sim!.apiKey);
      expect(text).not.toContain(secret);
      for (const k of instanceKeys) expect(text).not.toContain(k);
      // A Postgres store's password (in store.url) neither.
      if (database) expect(text).not.toContain(database.password);
    }
  });

  it.each(['searching', 'booting', 'running'])('cancel while %s leaves nothing billing', async (where) => {
    await setup({ lifecycle: { provision_s: 5, boot_s: { min: 100, max: 100 } } });
    if (where === 'searching') sim!.setFaults({ error_5xx_rate: 1 });
    const runId = await submit();
    await daemon!.waitFor(runId, (r) => r.state === where, 10_000);
    await cancelAndExpectNothingBilling(runId);
  });
});
