// Tasks followed over SSH by a spawned daemon (issue #39 items 2 and 3), against the simulator's
// real sshd per instance: the output streamed and the end read from the container, with no call to
// the logs endpoint; a daemon SIGKILLed mid-task reads on from the byte it had kept; a refused key
// falls back to the logs path with one event, and the task still ends.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Run as RunView, RunEvent, RunLogs } from '../../src/wire/control-api.js';
import type { RunningSimulator, SimConfigInput } from '../../src/sim/index.js';
import type { DaemonProcess } from '../helpers/daemon-process.js';
import { useSpawnedWorld } from '../helpers/spawned-world.js';
import { isEnded, jobSpec } from '../helpers/world.js';

const world = useSpawnedWorld();
let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A simulator whose instances run an sshd that takes berth's key (on the account), and a daemon. */
async function start(simConfig: SimConfigInput = {}) {
  const w = await world.sshWorld({ seed: 12, sim: simConfig });
  ({ sim, daemon } = w);
  return w.setup;
}

const logCalls = () => sim!.stats().requests['PUT /api/v0/instances/request_logs/{id}/'] ?? 0;

/** A task that prints `n` numbered lines, one every 0.1 s, then exits with `code`. */
const counting = (n: number, code = 0) => `i=0; while [ $i -lt ${n} ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; exit ${code}`;

/**
 * An onstart that waits until the daemon follows (its stream has written the attempt's .att file):
 * a task shorter than a login on a loaded machine would otherwise end, and stop its instance, first.
 */
const followedFirst = 'until ls "${TMPDIR:-/tmp}"/berth-task-*.att >/dev/null 2>&1; do sleep 0.1; done';

const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i}`).join('\n');

/** What is kept of a followed task: its out-file's lines, then its end marker as the log shows it. */
const kept = (n: number, exit = 0) => new RegExp(`^${lines(n)}\n\nberth-task-end run=\\S+ attempt=1 exit=${exit}$`);

it('a task followed over SSH ends with its output and exit code, with no call to the logs endpoint', async () => {
  await start();
  const ok = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', onstart: followedFirst, run: counting(15) }));
  expect(ok.status).toBe(201);
  const done = await daemon!.waitFor(ok.body.id, isEnded, 60_000);
  expect(done.state).toBe('succeeded');
  // The out-file's lines, each once, and the marker; nothing else of the log (the image's pull, sshd's lines).
  expect(done.attempts[0]!.logs).toMatch(kept(15));
  expect(logCalls()).toBe(0);
  expect(sim!.billingNow()).toEqual([]);

  const failed = await daemon!.api<RunView>(
    'POST',
    '/v1/runs',
    jobSpec({ ready_when: 'status', max_restarts: 0, onstart: followedFirst, run: counting(3, 3) }),
  );
  const end = await daemon!.waitFor(failed.body.id, isEnded, 60_000);
  expect(end.state).toBe('failed');
  expect(end.error).toMatchObject({ kind: 'task_failed', exit_code: 3 });
  expect(end.attempts[0]!.logs).toMatch(kept(3, 3));
  expect(logCalls()).toBe(0);
});

it('a daemon SIGKILLed mid-task reads on from the byte it kept: every line once', async () => {
  const s = await start();
  const created = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', run: counting(60) }));
  const runId = created.body.id;
  // Some lines followed and kept (the store's offset, read beside the daemon), then the daemon is killed without a word.
  const db = new Database(join(s.home, 'berth.db'), { readonly: true });
  let offset = 0;
  for (let i = 0; i < 400 && offset < 'line 0\n'.length * 10; i++) {
    offset =
      (db.prepare('SELECT follow_offset FROM attempts WHERE run_id = ?').get(runId) as { follow_offset: number | null } | undefined)
        ?.follow_offset ?? 0;
    await sleep(50);
  }
  db.close();
  expect(offset).toBeGreaterThan(0);
  const live = await daemon!.api<RunLogs>('GET', `/v1/runs/${runId}/logs?tail=100`);
  expect(live.body.text).toMatch(/^line 0\nline 1\n/);
  await daemon!.kill9();
  await sleep(1_000);
  daemon = await world.spawn(s);
  const done = await daemon.waitFor(runId, isEnded, 60_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  expect(done.attempts[0]!.logs).toMatch(kept(60));
  expect(logCalls()).toBe(0);
});

it('a key the instances refuse: one event says why, and the task ends through the logs endpoint', async () => {
  await start({ faults: { ssh_refuse_keys: true } });
  const created = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'status', run: counting(5) }));
  const done = await daemon!.waitFor(created.body.id, isEnded, 60_000);
  expect(done.state).toBe('succeeded');
  expect(done.attempts[0]!.logs).toContain('line 4');
  expect(logCalls()).toBeGreaterThan(0);
  const events = await daemon!.api<RunEvent[]>('GET', `/v1/runs/${created.body.id}/events`);
  const fallbacks = events.body.filter((e) => e.type === 'task.ssh_fallback');
  expect(fallbacks).toHaveLength(1);
  expect(fallbacks[0]!.message).toMatch(/refused berth's key/);
  expect(sim!.billingNow()).toEqual([]);
});
