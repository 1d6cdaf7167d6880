// Tasks against the real simulator (issue #19): berth's wrapper runs the task as the instance's
// onstart, writes its exit code to the container log and stops its own instance; the daemon sees
// the stop in the lists it already makes, reads the marker through the logs endpoint, records the
// end and destroys the instance. The simulator's ledger shows nothing billing after.
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../../src/wire/control-api.js';
import { berth, userEnv } from '../../helpers/berth-cli.js';
import { parsePrometheus, sampleValue } from '../../helpers/prometheus.js';
import { isEnded, jobSpec, offersInTryOrder, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const POLL_S = 0.1;

async function taskWorld(runs: { task_follow_max?: number } = {}): Promise<World> {
  return startWorld({
    sim: { onstart_exec: { enabled: true, timeout_s: 30 }, logs: { upload_delay_s: 0 } },
    config: { polling: { interval_s: POLL_S }, runs },
  });
}

describe('tasks', () => {
  // How soon after the task's own stop its instance is destroyed is the bench's to say (npm run bench
  // -- --only tasks: stop → destroy at 1 and 100 tasks); here, that the stop ends the run and destroys it.
  it('ends succeeded on exit 0 once the task stopped its instance, destroying it, and nothing bills', async () => {
    // The self-stop's path, as without SSH (a host whose SSH berth cannot reach); over SSH: test/e2e/task-follow.test.ts.
    world = await taskWorld({ task_follow_max: 0 });
    const run = await submit(world, jobSpec({ ready_when: 'status', run: 'echo training; sleep 0.5; echo done' }));
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('succeeded');
    expect(done.error).toBeNull();
    expect(done.instance).toBeNull();
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    expect(done.attempts[0]!.logs).toMatch(/training\ndone\n\nberth-task-end run=\S+ attempt=1 exit=0/);
    expect(world.sim.billingNow()).toEqual([]);
    // The wrapper stopped its own instance; berth destroyed it.
    const h = world.sim.history().find((x) => x.id === done.attempts[0]!.instance_id)!;
    expect(h.statuses.map((st) => st.status)).toContain('stopped');
    expect(h.destroyed_at).not.toBeNull();
  });

  it('exit 3 with max_restarts 1 makes two attempts, each on a fresh instance, and ends failed with exit code 3', async () => {
    world = await taskWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', run: 'echo failing; exit 3', max_restarts: 1 }));
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('failed');
    expect(done.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
    expect(done.attempts.map((a) => a.outcome)).toEqual(['task_failed', 'task_failed']);
    expect(new Set(done.attempts.map((a) => a.instance_id)).size).toBe(2);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('an instance lost mid-task recovers on another offer and the task then succeeds', async () => {
    world = await taskWorld();
    const spec = jobSpec({ ready_when: 'status', run: 'sleep 4; echo finished' });
    const [first] = await offersInTryOrder(world, spec);
    world.sim.setOfferProfile(first!.id, 'lost_after_running');
    const run = await submit(world, spec);
    const done: Run = await world.waitFor(run.id, isEnded, 40_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['lost', 'succeeded']);
    expect(done.attempts[0]!.offer_id).toBe(first!.id);
    expect(world.sim.billingNow()).toEqual([]);
    // ~7 s alone; the budget covers the 40 s wait above on a machine loaded by other test files.
  }, 60_000);

  it('berth logs --follow prints the task output as it comes, once each line, and exits when the run ends', async () => {
    world = await taskWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', run: 'echo "step one"; sleep 6; echo "step two"' }));
    await world.waitFor(run.id, (r) => r.state === 'running', 20_000);
    const follow = await berth(['logs', run.id, '--follow', '--tail', '50'], userEnv(world.home), 60_000);
    expect(follow.code).toBe(0);
    expect(follow.stdout.match(/step one/g)).toHaveLength(1);
    expect(follow.stdout.match(/step two/g)).toHaveLength(1);
    expect(follow.stdout.indexOf('step one')).toBeLessThan(follow.stdout.indexOf('step two'));
    expect((await world.api<Run>('GET', `/v1/runs/${run.id}`)).body.state).toBe('succeeded');
  });

  it('GET /v1/runs/{id}/logs serves the task output live, secrets scrubbed, and the kept lines once it ended', async () => {
    world = await taskWorld();
    const secret = 'hf-very-secret-token-3c9a1b';
    const run = await submit(
      world,
      jobSpec({ ready_when: 'status', env: { HF_TOKEN: secret }, run: 'echo "step 1 with $HF_TOKEN"; sleep 3; echo finished' }),
    );
    await world.waitFor(run.id, (r) => r.state === 'running', 20_000);
    type Logs = { run_id: string; instance_id: number | null; source: string; text: string };
    let live: Logs | undefined;
    for (let i = 0; i < 40 && !live?.text.includes('step 1'); i++) {
      live = (await world.api<Logs>('GET', `/v1/runs/${run.id}/logs?tail=50`)).body;
      if (!live.text.includes('step 1')) await new Promise((r) => setTimeout(r, 100));
    }
    expect(live).toMatchObject({ run_id: run.id, source: 'live' });
    expect(live!.text).toContain('step 1 with');
    expect(live!.text).not.toContain(secret);
    await world.waitFor(run.id, isEnded, 30_000);
    const kept = (await world.api<Logs>('GET', `/v1/runs/${run.id}/logs`)).body;
    expect(kept.source).toBe('kept');
    expect(kept.text).toMatch(/finished\n\nberth-task-end/);
    expect(kept.text).not.toContain(secret);
    expect((await world.api('GET', '/v1/runs/nosuchrun/logs')).status).toBe(404);
  });

  it("a finished task's spend stops at its destroy, and /metrics counts the task by result", async () => {
    world = await taskWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', run: 'echo working; sleep 1; echo done' }));
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('succeeded');
    expect(done.cost.usd).toBeGreaterThan(0);
    expect(done.cost.usd_per_hour).toBe(0);
    // Time goes on; what the run cost does not.
    await new Promise((r) => setTimeout(r, 1500));
    const later = (await world.api<Run>('GET', `/v1/runs/${run.id}`)).body;
    expect(later.cost).toEqual(done.cost);
    expect(world.sim.billingNow()).toEqual([]);
    const text = await (await fetch(`${world.daemon.url}/metrics`)).text();
    const families = parsePrometheus(text);
    expect(families.get('berth_task_duration_seconds')?.type).toBe('histogram');
    expect(sampleValue(families, 'berth_task_duration_seconds_count', { result: 'succeeded' })).toBe(1);
    expect(sampleValue(families, 'berth_task_duration_seconds_sum', { result: 'succeeded' })).toBeGreaterThan(0.5);
  });
});
