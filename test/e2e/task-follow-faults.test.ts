// The SSH faults a followed task meets, with a spawned daemon against the simulator's real sshd
// (issue #39 item 3): a host key that changes mid-task is refused, said in the run's events, and
// the task ends through the logs path, its instance destroyed; a session dropped mid-task is
// attached again, and every output line and the end are kept, each once.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Run as RunView, RunEvent } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();
let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A simulator whose instances run an sshd that takes berth's key (on the account), and a daemon. */
async function start() {
  const w = await world.sshWorld({ seed: 12 });
  ({ sim, daemon } = w);
  return w.setup;
}

/** A task that prints `n` numbered lines, one every 0.1 s, then exits 0. */
const counting = (n: number) => `i=0; while [ $i -lt ${n} ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; exit 0`;

/** Waits until the daemon has kept some of the run's followed output (the store's offset, read beside it); returns its instance. */
async function followed(s: { home: string }, runId: string): Promise<number> {
  const db = new Database(join(s.home, 'berth.db'), { readonly: true });
  try {
    for (let i = 0; i < 600; i++) {
      const row = db.prepare('SELECT follow_offset, instance_id FROM attempts WHERE run_id = ?').get(runId) as
        { follow_offset: number | null; instance_id: number | null } | undefined;
      if (row?.follow_offset && row.instance_id !== null) return row.instance_id;
      await sleep(50);
    }
  } finally {
    db.close();
  }
  throw new Error('the task was never followed');
}

const logCalls = () => sim!.stats().requests['PUT /api/v0/instances/request_logs/{id}/'] ?? 0;

it('a host key that changes mid-task: refused and said in the events, the task ends through the logs path, its instance destroyed', async () => {
  const s = await start();
  const created = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', run: counting(60) }));
  const runId = created.body.id;
  const instanceId = await followed(s, runId);
  expect(logCalls()).toBe(0);
  // The instance's sshd restarts with a new key now: the session drops, and the next login meets the new key.
  expect(sim!.sshChangeHostKey(instanceId)).toBe(true);
  const done = await daemon!.waitFor(runId, isEnded, 60_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  // Ended by the logs path: its log was read, and it holds the task's last line.
  expect(logCalls()).toBeGreaterThan(0);
  expect(done.attempts[0]!.logs).toContain('line 59');
  const events = (await daemon!.api<RunEvent[]>('GET', `/v1/runs/${runId}/events`)).body;
  const fallbacks = events.filter((e) => e.type === 'task.ssh_fallback');
  expect(fallbacks).toHaveLength(1);
  expect(fallbacks[0]!.message).toMatch(/host key of the instance changed since berth first logged in: berth refuses it/);
  expect(sim!.billingNow()).toEqual([]);
  expect(sim!.history().find((h) => h.id === instanceId)?.destroyed_at).toBeTruthy();
});

it('a session dropped mid-task (twice): attached again, every line and the end kept once each', async () => {
  const s = await start();
  const n = 80;
  const created = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', run: counting(n) }));
  const runId = created.body.id;
  const instanceId = await followed(s, runId);
  expect(sim!.sshDropSessions(instanceId)).toBe(true);
  await sleep(2_000);
  expect(sim!.sshDropSessions(instanceId)).toBe(true);
  const done = await daemon!.waitFor(runId, isEnded, 60_000);
  expect(done.state).toBe('succeeded');
  const kept = done.attempts[0]!.logs!.split('\n');
  // Every line once, in order, then a blank line and the end marker: nothing lost, nothing twice.
  expect(kept.slice(0, n)).toEqual(Array.from({ length: n }, (_, i) => `line ${i}`));
  expect(kept.slice(n)).toEqual(['', expect.stringMatching(/^berth-task-end run=\S+ attempt=1 exit=0$/)]);
  expect(kept.filter((l) => l.startsWith('berth-task-end'))).toHaveLength(1);
  const events = (await daemon!.api<RunEvent[]>('GET', `/v1/runs/${runId}/events`)).body;
  expect(events.filter((e) => e.type === 'task.ssh_fallback')).toEqual([]);
  expect(sim!.billingNow()).toEqual([]);
});
