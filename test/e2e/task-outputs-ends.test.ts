// A task's outputs taken however its run ends (issue #48 item 1), by a spawned daemon over SFTP on
// the simulator's sshd per instance: a task that has written a checkpoint and is cancelled, or
// reaches max_runtime_s, is stopped (TERM: it writes its last checkpoint) and its outputs are kept
// before the destroy; `no_outputs` destroys at once. Nothing bills afterwards.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { Run as RunView, RunEvent } from '../../src/wire/control-api.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();

/**
 * Writes a checkpoint, says so, and trains forever; TERM makes it write its last checkpoint and
 * exit. Its directory is /root/workdir ($HOME/workdir here: the simulator's container home).
 */
const TRAINS =
  `mkdir -p "$HOME/workdir/out" && cd "$HOME/workdir" && ` +
  `trap 'echo final > out/ckpt.txt; echo stopped by TERM; exit 143' TERM; ` +
  `echo epoch1 > out/ckpt.txt; echo "epoch 1 saved"; while :; do sleep 1; done`;

const saved = (r: RunView) => r.state === 'running' && (r.attempts[0]?.logs ?? '').includes('epoch 1 saved');

async function start() {
  return world.sshWorld({ seed: 48, onstartTimeoutS: 300 });
}

async function eventTypes(daemon: { api: <T>(m: string, p: string) => Promise<{ body: T }> }, id: string) {
  return (await daemon.api<RunEvent[]>('GET', `/v1/runs/${id}/events`)).body.map((e) => e.type);
}

it('a task with outputs cancelled mid-run is stopped, keeps the checkpoint it wrote, and ends cancelled', async () => {
  const { home, sim, daemon } = await start();
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run: TRAINS, outputs: ['out/'] }));
  expect(created.status).toBe(201);
  await daemon.waitFor(created.body.id, saved, 90_000);
  const cancel = await daemon.api<RunView>('POST', `/v1/runs/${created.body.id}/cancel`);
  expect(cancel.status).toBe(202);
  const done = await daemon.waitFor(created.body.id, isEnded, 90_000);
  expect(done.state).toBe('cancelled');
  expect(done.outputs).toMatchObject([{ attempt: 1, state: 'kept', files: [{ name: 'out/ckpt.txt', size: 6 }] }]);
  // TERM reached the task, which wrote its last checkpoint before the download.
  expect(readFileSync(join(home, 'outputs', done.id, 'attempt-1', 'out', 'ckpt.txt'), 'utf8')).toBe('final\n');
  expect(sim.billingNow()).toEqual([]);
  const types = await eventTypes(daemon, done.id);
  expect(types.indexOf('outputs.ended')).toBeGreaterThan(-1);
  expect(types.indexOf('outputs.ended')).toBeLessThan(types.indexOf('destroy.requested'));
});

it('a task with outputs that reaches max_runtime_s is stopped, keeps its checkpoint, and ends expired', async () => {
  const { home, sim, daemon } = await start();
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run: TRAINS, outputs: ['out/ckpt.txt'], max_runtime_s: 15 }));
  expect(created.status).toBe(201);
  const done = await daemon.waitFor(created.body.id, isEnded, 120_000);
  expect(done.state).toBe('expired');
  expect(done.error).toMatchObject({ kind: 'max_runtime' });
  expect(done.outputs).toMatchObject([{ attempt: 1, state: 'kept', files: [{ name: 'out/ckpt.txt' }] }]);
  expect(readFileSync(join(home, 'outputs', done.id, 'attempt-1', 'out', 'ckpt.txt'), 'utf8')).toBe('final\n');
  expect(sim.billingNow()).toEqual([]);
});

it('a cancel with no_outputs destroys at once: nothing is taken', async () => {
  const { sim, daemon } = await start();
  const created = await daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run: TRAINS, outputs: ['out/'] }));
  await daemon.waitFor(created.body.id, saved, 90_000);
  const cancel = await daemon.api<RunView>('POST', `/v1/runs/${created.body.id}/cancel`, { no_outputs: true });
  expect(cancel.status).toBe(202);
  const done = await daemon.waitFor(created.body.id, isEnded, 90_000);
  expect(done.state).toBe('cancelled');
  expect(done.outputs).toEqual([]);
  expect(await eventTypes(daemon, done.id)).not.toContain('outputs.started');
  expect(sim.billingNow()).toEqual([]);
});

it('a daemon SIGTERMed before the task ends, back after the wrapper stopped its instance, starts it again, takes the outputs, then destroys it', async () => {
  const w = await world.sshWorld({ seed: 49, onstartTimeoutS: 300, config: { files: { outputs_timeout_s: 3 } } });
  // Writes its result and ends a while after it says it started: time to stop the daemon first.
  const run =
    `mkdir -p "$HOME/workdir/out" && cd "$HOME/workdir" && echo "started"; sleep 6; ` +
    `head -c 20000 /dev/urandom > out/model.bin && sha256sum out/model.bin`;
  const created = await w.daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run, outputs: ['out/model.bin'] }));
  expect(created.status).toBe(201);
  const id = created.body.id;
  await w.daemon.waitFor(id, (r) => r.state === 'running', 90_000);
  await w.daemon.stop();
  // The task ends, its wrapper waits files.outputs_timeout_s (3 s) for a daemon's `.got`, then stops its instance.
  const instanceId = (await (async () => {
    for (let i = 0; i < 240; i++) {
      const h = w.sim.history().find((x) => x.statuses.some((s) => s.status === 'stopped'));
      if (h) return h.id;
      await new Promise((r) => setTimeout(r, 250));
    }
    return null;
  })())!;
  expect(instanceId).not.toBeNull();
  const daemon = await world.spawn(w.setup);
  const done = await daemon.waitFor(id, isEnded, 120_000);
  expect(done.state).toBe('succeeded');
  expect(done.outputs).toMatchObject([{ attempt: 1, state: 'kept', files: [{ name: 'out/model.bin', size: 20_000 }] }]);
  expect(done.outputs_missing).toBeNull();
  const h = w.sim.history().find((x) => x.id === instanceId)!;
  const stoppedAt = h.statuses.find((s) => s.status === 'stopped')!.at.sim_s;
  // Started again after the stop, then destroyed.
  expect(h.statuses.filter((s) => s.at.sim_s > stoppedAt).map((s) => s.status)).toContain('running');
  expect(h.destroyed_at).not.toBeNull();
  expect(w.sim.billingNow()).toEqual([]);
}, 180_000);

it('a simulated start that stays queued keeps the stopped instance (its disk billing) for files.stopped_keep_s and says so, then destroys it with the outputs marked failed', async () => {
  const w = await world.sshWorld({
    seed: 50,
    onstartTimeoutS: 300,
    sim: { faults: { start_stays_queued: true } },
    config: { files: { outputs_timeout_s: 3, stopped_keep_s: 20 } },
  });
  const run = `mkdir -p "$HOME/workdir/out" && cd "$HOME/workdir" && echo "started"; sleep 6; echo done > out/model.bin`;
  const created = await w.daemon.api<RunView>('POST', '/v1/runs', jobSpec({ run, outputs: ['out/model.bin'] }));
  const id = created.body.id;
  await w.daemon.waitFor(id, (r) => r.state === 'running', 90_000);
  await w.daemon.stop();
  let instanceId: number | null = null;
  for (let i = 0; i < 240 && instanceId === null; i++) {
    instanceId = w.sim.history().find((x) => x.statuses.some((s) => s.status === 'stopped'))?.id ?? null;
    if (instanceId === null) await new Promise((r) => setTimeout(r, 250));
  }
  expect(instanceId).not.toBeNull();
  const daemon = await world.spawn(w.setup);
  // Kept stopped, and said so: the instance is not destroyed while the start is tried again.
  let kept: RunEvent | undefined;
  for (let i = 0; i < 240 && !kept; i++) {
    kept = (await daemon.api<RunEvent[]>('GET', `/v1/runs/${id}/events`)).body.find((e) => e.type === 'outputs.kept_stopped');
    if (!kept) await new Promise((r) => setTimeout(r, 250));
  }
  expect(kept?.message).toMatch(/is kept stopped \(its disk billing\) while berth starts it again: it stayed stopped after a start/);
  const during = w.sim.history().find((x) => x.id === instanceId)!;
  expect(during.destroyed_at).toBeNull();
  expect(during.statuses.at(-1)!.status).toBe('stopped');
  const seen = (await daemon.api<RunView>('GET', `/v1/runs/${id}`)).body;
  expect(seen.state).toBe('collecting');
  expect(seen.cost.usd_per_hour).toBeGreaterThan(0);
  // Past files.stopped_keep_s: destroyed, the outputs failed, and the run says so.
  const done = await daemon.waitFor(id, isEnded, 120_000);
  expect(done.state).toBe('succeeded');
  expect(done.outputs_missing).toMatchObject({ state: 'failed', cause: expect.stringMatching(/stopped/) });
  expect(w.sim.history().find((x) => x.id === instanceId)!.destroyed_at).not.toBeNull();
  expect(w.sim.billingNow()).toEqual([]);
}, 180_000);
