// max_runtime_s and budget_usd with a real daemon process SIGKILLed in the middle: the restarted
// daemon reads the run's runtime and spend from berth.db and ends it `expired` on time, with its
// instance destroyed. Checked in the simulator's history and ledger, which bill in real time here
// (time scale 1), so its dollars and berth's are the same dollars.
import { describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;
const world = useSpawnedWorld();

const POLL_S = FAST_CONFIG.polling!.interval_s!;

async function setup() {
  sim = await world.sim({
    seed: 5,
    config: { ...FAST_SIM, time_scale: 1, lifecycle: { provision_s: 0.2, boot_s: { min: 0.4, max: 0.6 } } },
  });
  const home = world.home('berth-e2e-money-');
  const s = { home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG };
  daemon = await world.spawn(s);
  return {
    submit: async (spec: Record<string, unknown>) => {
      const res = await daemon!.api<RunView>('POST', '/v1/runs', spec);
      expect(res.status).toBe(201);
      return res.body.id;
    },
    killAndRestart: async (downMs: number) => {
      await daemon!.kill9();
      await sleep(downMs);
      daemon = await world.spawn(s);
    },
  };
}

/** The simulator's record of the run's instances. */
const instancesOf = (runId: string) => sim!.history().filter((h) => h.label?.split(':')[2] === runId);

describe('money limits across a SIGKILL (real daemon process)', () => {
  it('expires a run at max_runtime_s of running, counted across the kill, and destroys its instance', async () => {
    const { submit, killAndRestart } = await setup();
    const runId = await submit(jobSpec({ max_runtime_s: 3 }));
    await daemon!.waitFor(runId, (r) => r.state === 'running');
    await sleep(1000);
    // The limit is reached while no daemon runs: the restarted one must count the time before the kill.
    await killAndRestart(3000);
    const restartedAt = Date.now();
    const done = await daemon!.waitFor(runId, (r) => r.state === 'expired' || r.state === 'failed', 20_000);
    expect(done.state).toBe('expired');
    expect(done.error).toMatchObject({ kind: 'max_runtime' });
    expect(done.attempts.map((a) => a.outcome)).toEqual(['expired']);
    expect(done.instance).toBeNull();

    const [inst] = instancesOf(runId);
    expect(inst!.destroyed_at).not.toBeNull();
    expect(sim!.billingNow()).toEqual([]);
    // Orders of instants, not durations: the destroy came after the limit (counted from the
    // simulator's `running` status), and before a daemon that counted max_runtime_s from its own
    // restart could have sent it. The schedule itself is money-guard.test.ts's, on the fake clock.
    const runningAt = inst!.statuses.find((s) => s.status === 'running')!.at.wall_ms;
    expect(inst!.destroyed_at!.wall_ms).toBeGreaterThanOrEqual(runningAt + 3000);
    expect(inst!.destroyed_at!.wall_ms).toBeLessThan(restartedAt + 3000);
  });

  it('expires a run at budget_usd, counted across the kill, and the ledger shows it spent no more than its budget plus one poll interval of its price', async () => {
    const { submit, killAndRestart } = await setup();
    // At most $0.2/h, the dearest first: the budget lasts about 6 s of the instance's life.
    const cap = 0.2;
    const budget = (cap * 6) / 3600;
    const runId = await submit(
      jobSpec({
        max_price_per_hour: cap,
        budget_usd: budget,
        search: { filters: { num_gpus: { eq: 1 } }, order: [['dph_total', 'desc']], limit: 16 },
      }),
    );
    const running = await daemon!.waitFor(runId, (r) => r.state === 'running');
    const dph = running.instance!.dph_total!;
    await sleep(800);
    await killAndRestart(300);
    const done = await daemon!.waitFor(runId, (r) => r.state === 'expired' || r.state === 'failed', 30_000);
    expect(done.state).toBe('expired');
    expect(done.error).toMatchObject({ kind: 'budget' });
    expect(done.attempts.at(-1)!.outcome).toBe('expired');
    // berth's own record ends at the confirmed destroy, so it shows a little more than the ledger.
    expect(done.cost.usd).toBeGreaterThan(budget * 0.8);

    const ids = new Set(instancesOf(runId).map((h) => h.id));
    expect(sim!.billingNow().filter((h) => ids.has(h.id))).toEqual([]);
    const spent = sim!
      .ledger()
      .instances.filter((i) => ids.has(i.instance_id))
      .reduce((s, i) => s + i.total_usd, 0);
    expect(spent).toBeLessThanOrEqual(budget + (dph * POLL_S) / 3600);
    expect(spent).toBeGreaterThan(budget * 0.7);
  });
});
