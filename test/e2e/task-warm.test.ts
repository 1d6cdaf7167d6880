// Warm instances (issue #51) as a user meets them, on spawned daemons against the simulator, checked
// against the simulator's own history, not berth's view: two tasks of one spec one after the other
// run on one instance (one create), the second in a fresh container (a file the first left is gone,
// its env is there); a spec with other secrets never takes it; with the daemon SIGKILLed, the
// container destroys the warm instance itself at idle_s, and nothing is left billing.
import { expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { loginKeyOnAccount, sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();
/** Real seconds (the container's `sleep` runs on the wall clock): room for the second run to start on a loaded machine. */
const IDLE_S = 30;

const FIRST = 'echo first; echo left > "$HOME/first-was-here"';
const SECOND = 'if [ -e "$HOME/first-was-here" ]; then echo STALE-CONTAINER; else echo FRESH-CONTAINER; fi; echo "WARM_A=$WARM_A"';

async function warmWorld() {
  const sim = await world.sim({
    seed: 7,
    config: { ...FAST_SIM, onstart_exec: { enabled: true, timeout_s: 60 }, logs: { upload_delay_s: 0 } },
  });
  const home = world.home();
  const daemon = await world.spawn({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  // The daemon follows the task over SSH and acks its end: the container then stays warm (a daemon
  // not there at the end gets a stopped instance, as without warm). Its key must be on the account first.
  await loginKeyOnAccount(sim, home);
  const submit = async (run: string, extra: Record<string, unknown> = {}) => {
    const created = await daemon.api<RunView>(
      'POST',
      '/v1/runs',
      jobSpec({ run, warm: { idle_s: IDLE_S }, env: { WARM_A: 'one' }, ...extra }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body.id;
  };
  const restart = () => world.spawn({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  return { sim, home, daemon, submit, restart };
}

it('the next task of the same spec starts on the warm instance in a fresh container, and the container ends it at idle_s with no daemon', async () => {
  const { sim, daemon, submit } = await warmWorld();
  const first = await submit(FIRST);
  const done = await daemon.waitFor(first, (r) => r.state === 'succeeded', 60_000);
  const instanceId = done.attempts.at(-1)!.instance_id!;
  const history = () => sim.history().find((h) => h.id === instanceId)!;
  // Kept: not destroyed, still running, billed as a warm hold.
  expect(history().destroyed_at).toBeNull();
  expect(sim.billingNow().map((b) => b.id)).toEqual([instanceId]);
  const account = await daemon.api<{ money: { usd_per_hour: number } }>('GET', '/v1/account');
  expect(account.body.money.usd_per_hour).toBeGreaterThan(0);

  const second = await submit(SECOND);
  const ended = await daemon.waitFor(second, (r) => r.state === 'succeeded', 60_000);
  // One create for both: the second took the first's instance.
  expect(ended.attempts.at(-1)!.instance_id).toBe(instanceId);
  expect(sim.history()).toHaveLength(1);
  // A fresh container (the file the first wrote is gone) with the spec's environment: its own log.
  const logs = await daemon.api<{ text: string }>('GET', `/v1/runs/${second}/logs`);
  expect(logs.body.text).toContain('FRESH-CONTAINER');
  expect(logs.body.text).toContain('WARM_A=one');
  expect(logs.body.text).not.toContain('first\n');
  expect(history().statuses.map((s) => s.status)).toContain('recycling');
  const events = await daemon.api<Array<{ message: string }>>('GET', `/v1/runs/${second}/events`);
  expect(events.body.map((e) => e.message)).toContain(
    `attempt #1: took warm instance ${instanceId} (hold #1); its container is made again for this run (recycle)`,
  );

  // Warm again after the second; the daemon goes; the container destroys it at idle_s.
  await daemon.kill9();
  for (let i = 0; i < (IDLE_S + 30) * 20 && history().destroyed_at === null; i++) await sleep(50);
  expect(history().destroyed_at).not.toBeNull();
  expect(sim.billingNow()).toEqual([]);
}, 180_000);

it('a spec with other secrets never takes the warm instance: it rents its own; berth status shows the warm one, berth cancel ends it', async () => {
  const { sim, home, daemon, submit } = await warmWorld();
  const first = await submit(FIRST);
  const done = await daemon.waitFor(first, (r) => r.state === 'succeeded', 60_000);
  const warmId = done.attempts.at(-1)!.instance_id!;
  const other = await submit(SECOND, { secrets: { TOKEN_X: 'another' } });
  const ended = await daemon.waitFor(other, (r) => r.state === 'succeeded', 60_000);
  expect(ended.attempts.at(-1)!.instance_id).not.toBe(warmId);
  expect(sim.history()).toHaveLength(2);
  // The warm one is still held, billing, and said so; a cancel of its ended run destroys it now.
  expect(sim.history().find((h) => h.id === warmId)!.destroyed_at).toBeNull();
  const shown = await berth(['status', first], userEnv(home));
  expect(shown.stdout).toMatch(
    new RegExp(`Warm\\s+instance ${warmId} kept running for the next run of this spec until \\d\\d:\\d\\d:\\d\\d`),
  );
  const cancelled = await berth(['cancel', first], userEnv(home));
  expect(cancelled.stdout).toContain(`the instance it kept warm, ${warmId}, is being destroyed`);
  // Well before its idle_s: the next sweep destroys it.
  for (let i = 0; i < 200 && sim.history().find((h) => h.id === warmId)!.destroyed_at === null; i++) await sleep(50);
  expect(sim.history().find((h) => h.id === warmId)!.destroyed_at).not.toBeNull();
}, 180_000);

it('a SIGKILL while the take is sent leaves no ownerless instance: the restart cannot tell the recycle happened, destroys the warm instance and runs the task once elsewhere', async () => {
  const { sim, daemon, submit, restart } = await warmWorld();
  const first = await submit(FIRST);
  const warmId = (await daemon.waitFor(first, (r) => r.state === 'succeeded', 60_000)).attempts.at(-1)!.instance_id!;
  // Slow answers keep the update + recycle in flight long enough to kill the daemon inside it; the
  // simulator drops a request whose client is gone, as a real service may.
  sim.setFaults({ latency_ms: 1500 });
  const second = await submit(SECOND);
  await daemon.waitFor(second, (r) => r.attempts.some((a) => a.instance_id === warmId), 20_000);
  await sleep(300);
  await daemon.kill9();
  sim.setFaults({ latency_ms: 0 });
  const again = await restart();
  const ended = await again.waitFor(second, (r) => r.state === 'succeeded', 90_000);
  // The take's attempt gave the warm instance up (its record never showed this attempt's onstart):
  // destroyed, never recycled; the task ran once, on an instance of its own.
  const took = ended.attempts.find((a) => a.instance_id === warmId)!;
  expect(took.outcome).not.toBe('succeeded');
  const warm = sim.history().find((h) => h.id === warmId)!;
  expect(warm.destroyed_at).not.toBeNull();
  expect(warm.statuses.map((s) => s.status)).not.toContain('recycling');
  expect(ended.attempts.filter((a) => a.outcome === 'succeeded')).toHaveLength(1);
  const last = ended.attempts.at(-1)!;
  expect(last.instance_id).not.toBe(warmId);
  // Nothing bills but the second run's own instance, now warm for the next.
  expect(sim.billingNow().map((b) => b.id)).toEqual([last.instance_id]);
}, 180_000);
