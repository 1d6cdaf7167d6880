// A running run whose stored spec or snapshot this berth cannot read (issue #38 items 1 and 3): a
// ladder from the config that the job spec's parse refuses, a spec or snapshot stored by a later
// berth (a downgrade). A restart used to fail it `upgrade` and the orphan sweep destroyed its
// instance; now it is kept as it is through the sweeps, said in its events and its view, and ends
// only when the user cancels it. An in-process daemon on a real SQLite file and the simulator.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../../src/wire/control-api.js';
import { isEnded, isRunning, jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** Complete sweeps of the account this daemon made since it started (its /metrics). */
async function sweepsDone(w: World): Promise<number> {
  const res = await request(`${w.daemon.url}/metrics`);
  const text = await res.body.text();
  return Number(/^berth_list_sweep_duration_seconds_count(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? 0);
}

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

type Rewrite = { spec?: (spec: Record<string, unknown>) => Record<string, unknown>; machineVersion?: number };

/** Rewrites a stopped daemon's stored run, as an older or later berth would have stored it. */
function rewriteStoredRun(home: string, runId: string, rewrite: Rewrite): void {
  const db = new Database(join(home, 'berth.db'));
  try {
    const { spec_json } = db.prepare('SELECT spec_json FROM runs WHERE id = ?').get(runId) as { spec_json: string };
    if (rewrite.spec) {
      const spec = rewrite.spec(JSON.parse(spec_json) as Record<string, unknown>);
      db.prepare('UPDATE runs SET spec_json = ? WHERE id = ?').run(JSON.stringify(spec), runId);
    }
    if (rewrite.machineVersion !== undefined)
      db.prepare('UPDATE runs SET machine_version = ? WHERE id = ?').run(rewrite.machineVersion, runId);
  } finally {
    db.close();
  }
}

const withLadder = (relax: unknown[]) => (spec: Record<string, unknown>) => ({ ...spec, relax });

describe('a restart keeps a running run this berth cannot read, and its instance', () => {
  it.each<[string, Rewrite, RegExp, number | null, number | null]>([
    [
      'a config ladder with a string number',
      { spec: withLadder([{ set: { reliability: { gte: '0.9' } } }]) },
      /\$\.relax\[0\]\.set\.reliability\.gte: expected a number, got string/,
      null,
      null,
    ],
    [
      'a config ladder with an empty drop',
      { spec: withLadder([{ drop: [] }]) },
      /\$\.relax\[0\]\.drop: must name at least one filter/,
      null,
      null,
    ],
    [
      'a config ladder that drops the port filter',
      { spec: withLadder([{ drop: ['direct_port_count'] }]) },
      /"direct_port_count" is never relaxed/,
      null,
      null,
    ],
    [
      'a config ladder with an unknown operator',
      { spec: withLadder([{ set: { gpu_ram: { like: 16 } } }]) },
      /unknown operator "like"/,
      null,
      null,
    ],
    ['a spec stored by a later berth', { spec: (s) => ({ ...s, berth_spec_version: 99 }) }, /stored spec has version 99/, 99, null],
    ['a snapshot saved by a later berth', { machineVersion: 99 }, /saved by run machine version 99/, null, 99],
  ])(
    '%s: not failed, its instance kept through two sweeps, said in its events and its view',
    async (_, rewrite, reason, spec, machine) => {
      world = await startWorld();
      const w = world;
      const run = await submit(w, jobSpec({ name: 'kept' }));
      const { instance } = await w.waitFor(run.id, isRunning, 30_000);
      await w.daemon.stop();
      rewriteStoredRun(w.home, run.id, rewrite);

      await w.restartDaemon();
      await w.daemon.ready;
      await until('two complete sweeps after the restart', async () => (await sweepsDone(w)) >= 2);

      const view = (await w.api<{ state: string; unreadable: unknown; instance: { id: number } | null }>('GET', `/v1/runs/${run.id}`)).body;
      expect(view.state).toBe('running');
      expect(view.instance?.id).toBe(instance!.id);
      expect(view.unreadable).toEqual({ reason: expect.stringMatching(reason), needs_spec_version: spec, needs_machine_version: machine });
      expect(w.sim.instances().map((i) => i.id)).toContain(instance!.id);
      expect(w.sim.history().find((h) => h.id === instance!.id)?.destroyed_at ?? null).toBeNull();
      const events = (await w.api<RunEvent[]>('GET', `/v1/runs/${run.id}/events`)).body;
      expect(events.map((e) => e.type)).not.toContain('run.failed');
      expect(events.find((e) => e.type === 'run.unreadable')?.message).toMatch(/It is kept as it is, not failed/);
    },
    90_000,
  );

  it('a kept run ends `cancelled` when the user cancels it, and its instance is destroyed', async () => {
    world = await startWorld();
    const w = world;
    const run = await submit(w, jobSpec({ name: 'kept-then-cancelled' }));
    const { instance } = await w.waitFor(run.id, isRunning, 30_000);
    await w.daemon.stop();
    rewriteStoredRun(w.home, run.id, { spec: (s) => ({ ...s, berth_spec_version: 99 }) });
    await w.restartDaemon();
    await w.daemon.ready;
    await w.waitFor(run.id, (r) => r.unreadable !== null);

    expect((await w.api('POST', `/v1/runs/${run.id}/cancel`)).status).toBe(202);
    const ended = await w.waitFor(run.id, isEnded);
    expect(ended.state).toBe('cancelled');
    expect(ended.unreadable).toBeNull();
    await until('the orphan sweep to destroy the instance', () => !w.sim.instances().some((i) => i.id === instance!.id));
  }, 90_000);
});
