// Tasks that end on every image and every script (issue #29), against the real simulator running
// berth's wrapper under sh: an image without curl or wget (its end read by the task probe), an
// onstart with `set -e` or one that fails, a chatty task whose marker comes after 1.2 MB of output,
// and a task that succeeds just before its limit while its log upload is slow. Nothing bills after.
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import type { Run } from '../../../src/wire/control-api.js';
import { everyGroup, isEnded, jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const taskWorld = (sim: Record<string, unknown> = {}, config: Record<string, unknown> = {}) =>
  startWorld({
    sim: { logs: { upload_delay_s: 0 }, ...sim, onstart_exec: { enabled: true, timeout_s: 60, ...(sim['onstart_exec'] as object) } },
    config: { polling: { interval_s: 0.1 }, ...config },
  });

/** The statuses the simulator's history shows for an instance, in order. */
const statusesOf = (w: World, id: number) =>
  w.sim
    .history()
    .find((h) => h.id === id)!
    .statuses.map((s) => s.status);

describe('tasks that end on every image and script', () => {
  it('an image with neither curl nor wget: the task probe reads the end, the instance is destroyed, the run succeeded', async () => {
    world = await taskWorld(
      { onstart_exec: { no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] } },
      // The probe every second; the wrapper cannot stop its instance.
      { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1, task_probe_interval_s: 1 } },
    );
    const run = await submit(
      world,
      jobSpec({ image: 'nvidia/cuda:12.4.1-base-ubuntu22.04', ready_when: 'status', run: 'echo training on a slim image; exit 0' }),
    );
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    expect(done.attempts[0]!.logs).toMatch(/training on a slim image\n\nberth-task-end run=\S+ attempt=1 exit=0/);
    // Never stopped by itself: ended by berth's own read of its log.
    expect(statusesOf(world, done.attempts[0]!.instance_id!)).not.toContain('stopped');
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('an image without curl or wget on a one-instance account polled every 0.2 s (shorter than the list limit allows): the probe, on its own loop, sees the end at its first read after it (#37)', async () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: 'debug',
      destination: new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString('utf8')), cb()) }),
    });
    // The account's lists and logs at the default rates (0.9/s): every poll round is the one-page
    // sweep, late on the list budget, which skips the targeted list (and, before #37, the probe).
    world = await startWorld({
      logger,
      sim: {
        logs: { upload_delay_s: 0 },
        onstart_exec: { enabled: true, timeout_s: 60, no_http_client_images: ['^nvidia/cuda:[^:]*-base-'] },
      },
      config: {
        polling: { interval_s: 0.2 },
        rate_limits: { ...everyGroup(50, 10), list: { per_s: 0.9, burst: 1 }, other: { per_s: 0.9, burst: 1 } },
        // The probe's path, as without SSH (a host whose SSH berth cannot reach); over SSH: test/e2e/task-follow.test.ts.
        runs: { task_follow_max: 0 },
      },
    });
    const run = await submit(
      world,
      jobSpec({ image: 'nvidia/cuda:12.4.1-base-ubuntu22.04', ready_when: 'status', run: 'sleep 2; echo done on a slim image; exit 0' }),
    );
    const done: Run = await world.waitFor(run.id, isEnded, 25_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    const id = done.attempts[0]!.instance_id!;
    const hist = world.sim.history().find((h) => h.id === id)!;
    expect(hist.statuses.map((st) => st.status)).not.toContain('stopped');
    // The probe's reads of this instance, and the moment the task's script ended (the marker is its
    // last line): the end was seen by the first read the probe started after it, no later one.
    const records = lines.map((l) => JSON.parse(l) as { time: number; msg: string });
    const reads = records.filter((r) => r.msg.includes(`the task probe reads the log of instance ${id}`));
    expect(records.some((r) => r.msg.includes(`the task probe read the end marker of instance ${id}`))).toBe(true);
    expect(reads.filter((r) => r.time >= hist.onstart!.ended_at.wall_ms).length).toBeLessThanOrEqual(1);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('a task that fails under an onstart with set -e ends failed with its exit code', async () => {
    world = await taskWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', onstart: 'set -e\necho setting up', run: 'echo failing; exit 3' }));
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('failed');
    expect(done.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('an onstart that fails ends the run failed, saying the task never started', async () => {
    world = await taskWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', onstart: 'set -e\nfalse\necho never', run: 'echo the task ran' }));
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('failed');
    expect(done.error).toMatchObject({
      kind: 'task_failed',
      exit_code: 1,
      message: expect.stringMatching(/onstart script exited with code 1 before the task started/),
    });
    // Its log may not have been read in time on a loaded machine (null): either way, not the task's line.
    expect(done.attempts[0]!.logs ?? '').not.toMatch(/the task ran/);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('a chatty task (200 lines of 6 KB) that exits 0 succeeded, read from the end of its log', async () => {
    world = await taskWorld({ onstart_exec: { max_output_bytes: 4 * 1024 * 1024 } });
    const line = 'x'.repeat(6000);
    const run = await submit(
      world,
      jobSpec({ ready_when: 'status', run: `i=0; while [ $i -lt 200 ]; do echo "step $i ${line}"; i=$((i+1)); done` }),
    );
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    // What berth logs shows says that earlier lines were left out.
    const logs = await world.api<{ cut: boolean; text: string }>('GET', `/v1/runs/${run.id}/logs?tail=200`);
    expect(logs.body.cut).toBe(true);
    expect(logs.body.text).toMatch(/^berth-task-end run=\S+ attempt=1 exit=0$/m);
  });

  it('a task that exits 0 before max_runtime_s, its log upload slower than what is left, succeeded (not expired)', async () => {
    // Sim seconds run 100× wall time: a 3 s upload is 30 ms; the task ends 1 s before a 3 s limit.
    world = await taskWorld({ logs: { upload_delay_s: 300 } });
    const run = await submit(world, jobSpec({ ready_when: 'status', max_runtime_s: 3, run: 'sleep 2; echo done' }));
    const done: Run = await world.waitFor(run.id, isEnded, 30_000);
    expect(done.state).toBe('succeeded');
    expect(done.error).toBeNull();
    expect(world.sim.billingNow()).toEqual([]);
  });
});

describe('tasks that lose their machine or are outbid (issue #29 items 5 and 8)', () => {
  it('a task stopped by the service after running past deadline_s recovers on the next offer and then succeeds', async () => {
    world = await taskWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', deadline_s: 3, run: 'sleep 6; echo finished' }));
    const running = await world.waitFor(run.id, (r) => r.state === 'running', 20_000);
    const first = running.instance!.id;
    // Past the deadline counted from the submission: the service stops it (the account's credit ran out).
    await new Promise((r) => setTimeout(r, 3_500));
    expect(world.sim.serviceStop(first, 0)).toBe(true);
    const done: Run = await world.waitFor(run.id, isEnded, 40_000);
    expect(done.state).toBe('succeeded');
    expect(done.attempts.map((a) => a.outcome)).toEqual(['lost', 'succeeded']);
    expect(done.attempts[0]!.detail).toMatch(/not by berth/);
    expect(world.sim.billingNow()).toEqual([]);
  }, 60_000);

  it('an outbid task whose raised bid wins runs again from its beginning in the restarted container, and ends', async () => {
    world = await taskWorld({}, { runs: { outage_backoff_s: 0.5, destroy_retry_max_delay_s: 1, rebid_wait_s: 1 } });
    const spec = jobSpec({
      ready_when: 'status',
      search: { type: 'bid', filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
      bid_price: 'min',
      bid_step_pct: 50,
      on_outbid: 'rebid',
      max_price_per_hour: 1,
      run: 'echo started; sleep 3; echo finished',
    });
    const run = await submit(world, spec);
    const running = await world.waitFor(run.id, (r) => r.state === 'running', 20_000);
    const id = running.instance!.id;
    const machine = world.sim.history().find((h) => h.id === id)!.machine_id;
    expect(world.sim.raiseMinBid(machine, 20).outbid).toEqual([id]);
    const done: Run = await world.waitFor(run.id, isEnded, 40_000);
    expect(done.state).toBe('succeeded');
    // One attempt on one instance: rebid, restarted, the task run again to its end.
    expect(done.attempts.map((a) => [a.outcome, a.instance_id])).toEqual([['succeeded', id]]);
    expect(world.sim.history().find((h) => h.id === id)!.onstart_runs).toBeGreaterThanOrEqual(2);
    expect(world.sim.billingNow()).toEqual([]);
  }, 60_000);
});

describe('a task that ends before berth sees its instance running (issue #49 item 1)', () => {
  // The wrapper stops its instance within a second of the task's end; the first list berth makes
  // shows it stopped, and its log upload answers 403 for 1.5 s (150 sim s at 100x): longer than
  // what is left of a 2 s boot deadline. The end must be read before the deadline judges the attempt.
  const quickWorld = (sim: Record<string, unknown> = {}) =>
    taskWorld({ logs: { upload_delay_s: 150 }, ...sim }, { polling: { interval_s: 1 } });
  const creates = (w: World) => w.sim.history().length;

  it('a task that exits 0 in its first second runs once and succeeded', async () => {
    world = await quickWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', boot_timeout_s: 2, run: 'echo done; exit 0' }));
    const done: Run = await world.waitFor(run.id, isEnded, 40_000);
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    expect(done.state).toBe('succeeded');
    expect(creates(world)).toBe(1);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('a task that exits 3 in its first second with max_restarts 0 runs once and failed task_failed, exit code 3', async () => {
    world = await quickWorld();
    const run = await submit(world, jobSpec({ ready_when: 'status', boot_timeout_s: 2, max_restarts: 0, run: 'echo bad import; exit 3' }));
    const done: Run = await world.waitFor(run.id, isEnded, 40_000);
    expect(done.attempts.map((a) => a.outcome)).toEqual(['task_failed']);
    expect(done.state).toBe('failed');
    expect(done.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
    expect(creates(world)).toBe(1);
    expect(world.sim.billingNow()).toEqual([]);
  });

  it('the same under an onstart with set -e, after 1.2 MB of output: once, succeeded', async () => {
    world = await quickWorld({ onstart_exec: { max_output_bytes: 4 * 1024 * 1024 } });
    const line = 'y'.repeat(6000);
    const run = await submit(
      world,
      jobSpec({
        ready_when: 'status',
        boot_timeout_s: 2,
        onstart: 'set -e\necho setting up',
        run: `i=0; while [ $i -lt 200 ]; do echo "step $i ${line}"; i=$((i+1)); done; exit 0`,
      }),
    );
    const done: Run = await world.waitFor(run.id, isEnded, 40_000);
    expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
    expect(done.state).toBe('succeeded');
    expect(creates(world)).toBe(1);
    expect(world.sim.billingNow()).toEqual([]);
  });
});
