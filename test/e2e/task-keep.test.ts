// keep_on_failure_s (issue #50) as a user meets it: a task that fails keeps its instance, `berth
// ssh RUN -- echo hi` gets in, and with the daemon SIGKILLed once it read the failure, the
// container's own backstop destroys the instance at the keep's bound: nothing is left billing.
// Checked against the simulator's own history, not berth's view.
import { expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import { berth, userEnv } from '../helpers/berth-cli.js';
import { loginKeyOnAccount, sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();
/** Real seconds (the container's `sleep` and the daemon's clock run on the wall clock): room for a loaded machine to read, log in and kill first. */
const KEEP_S = 10;

/** A simulator that runs onstart, and a daemon whose key is on the account before any create. */
async function keepWorld() {
  const sim = await world.sim({
    seed: 5,
    config: { ...FAST_SIM, onstart_exec: { enabled: true, timeout_s: 60 }, logs: { upload_delay_s: 0 } },
  });
  const home = world.home();
  const daemon = await world.spawn({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  // The instance takes the account's keys at its create: berth's key must be there first.
  await loginKeyOnAccount(sim, home);

  return { sim, home, daemon };
}

it('a failed task with keep_on_failure_s can be entered with berth ssh, and is destroyed at the bound with no daemon running', async () => {
  const { sim, home, daemon } = await keepWorld();
  const spec = jobSpec({ ready_when: 'status', run: 'echo failing; exit 3', keep_on_failure_s: KEEP_S });
  const created = await daemon.api<RunView>('POST', '/v1/runs', spec);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const runId = created.body.id;
  const kept = await daemon.waitFor(runId, (r) => r.state === 'keeping' && r.instance?.keep_until != null, 30_000);
  const instanceId = kept.instance!.id;

  const env = userEnv(home);
  const shown = await berth(['status', runId], env);
  expect(shown.stdout).toMatch(/Kept\s+kept for SSH until \d\d:\d\d:\d\d \(keep_on_failure_s\)/);
  const r = await berth(['ssh', runId, '--', 'echo', 'hi'], env);
  expect(r.stderr).toBe('');
  expect(r.stdout).toBe('hi\n');
  expect(r.code).toBe(0);

  // The failure was read; the daemon goes. The container destroys its own instance at the bound.
  await daemon.kill9();
  const history = () => sim.history().find((h) => h.id === instanceId)!;
  expect(history().destroyed_at).toBeNull();
  for (let i = 0; i < 400 && history().destroyed_at === null; i++) await sleep(50);
  expect(history().destroyed_at).not.toBeNull();
  // It kept running for SSH (never stopped), and nothing is left billing.
  expect(history().statuses.map((s) => s.status)).not.toContain('stopped');
  expect(sim.billingNow()).toEqual([]);
  // By the container's own backstop, as its output says.
  for (let i = 0; i < 100 && history().onstart === null; i++) await sleep(50);
  expect(history().onstart?.stdout).toContain('berth: keep_on_failure_s passed; destroying this instance');
}, 90_000);

it('berth cancel during the keep destroys the instance at once; the run ends failed with the exit code', async () => {
  const { sim, home, daemon } = await keepWorld();
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', run: 'exit 4', keep_on_failure_s: 600 }));
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const runId = created.body.id;
  const kept = await daemon.waitFor(runId, (r) => r.state === 'keeping', 30_000);
  const cancelled = await berth(['cancel', runId, '--wait'], userEnv(home));
  expect(cancelled.code, cancelled.stderr).toBe(0);
  expect(cancelled.stdout).toContain(`Run ${runId} ended failed as its task did (exit 4); its instance is destroyed.`);
  const ended = await daemon.waitFor(runId, (r) => r.state === 'failed', 10_000);
  expect(ended.error).toMatchObject({ kind: 'task_failed', exit_code: 4 });
  expect(sim.history().find((h) => h.id === kept.instance!.id)!.destroyed_at).not.toBeNull();
  expect(sim.billingNow()).toEqual([]);
}, 90_000);
