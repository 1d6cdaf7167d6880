// `ready_when: "ssh"` by a spawned daemon against the simulator's real sshd per instance (issue #39
// item 2): ready once berth logged in and ran a command, the instance's host key pinned with the
// attempt; an sshd that refuses keys at first (up before the container's keys) is tried again until
// it lets berth in; keys refused for good leave the instance ready by its banner, with one event
// saying why, never replaced.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import type { Run as RunView, RunEvent } from '../../src/wire/control-api.js';
import { startSimulator, type RunningSimulator, type SimConfigInput } from '../../src/sim/index.js';
import { loadLoginKey } from '../../src/ssh/key-pair.js';
import { spawnDaemon, type DaemonProcess } from '../helpers/daemon-process.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
let daemon: DaemonProcess | undefined;
let home: string | undefined;

afterEach(async () => {
  if (daemon && daemon.proc.exitCode === null) await daemon.kill9();
  await sim?.close();
  if (home) rmSync(home, { recursive: true, force: true });
  sim = daemon = home = undefined;
});

/** A simulator whose instances run a real sshd, berth's key on the account, and a daemon. */
async function start(simConfig: SimConfigInput = {}) {
  home = mkdtempSync(join(tmpdir(), 'berth-e2e-'));
  const key = loadLoginKey({ home });
  sim = await startSimulator({
    seed: 12,
    // An `ssh_keys_late` sshd takes keys 300 sim s (3 s) after it runs: well after its banner, within the boot deadline.
    config: { ...FAST_SIM, ...simConfig, account: { ssh_keys: [key.publicLine] }, ssh_listeners: { enabled: true, late_s: 300 } },
  });
  const s = { home, simUrl: sim.url, apiKey: sim.apiKey, config: { ...FAST_CONFIG } };
  daemon = await spawnDaemon(s);
  return s;
}

/** Submits a run ready by SSH (the default) and waits for it to run; returns it and its "ready" events. */
async function readyRun() {
  const created = await daemon!.api<RunView>('POST', '/v1/runs', jobSpec({ ready_when: 'ssh', boot_timeout_s: 8 }));
  expect(created.status).toBe(201);
  const run = await daemon!.waitFor(created.body.id, isRunning, 30_000);
  const events = (await daemon!.api<RunEvent[]>('GET', `/v1/runs/${run.id}/events`)).body;
  return { run, ready: events.filter((e) => e.type === 'attempt.running') };
}

async function cancelled(runId: string) {
  await daemon!.api('POST', `/v1/runs/${runId}/cancel`);
  await daemon!.waitFor(runId, isEnded, 30_000);
  expect(sim!.billingNow()).toEqual([]);
}

it('is ready once berth logged in and ran a command, the host key pinned with the attempt', async () => {
  const s = await start();
  const { run, ready } = await readyRun();
  expect(run.attempts).toHaveLength(1);
  expect(ready).toHaveLength(1);
  expect(ready[0]!.message).toMatch(/is ready \(berth logged in over SSH and ran a command/);
  expect(ready[0]!.data).toMatchObject({ via: 'ssh', login: { ok: true } });
  const db = new Database(join(s.home, 'berth.db'), { readonly: true });
  const pin = db.prepare('SELECT ssh_host_key FROM attempts WHERE run_id = ?').get(run.id) as { ssh_host_key: string | null };
  db.close();
  expect(pin.ssh_host_key).toMatch(/^SHA256:/);
  await cancelled(run.id);
});

it('an sshd that refuses keys until they are in place (up before them): tried again, ready by the login once it works', async () => {
  await start({ profile_rates: { ssh_keys_late: 1 } });
  const { run, ready } = await readyRun();
  expect(sim!.history().map((h) => h.profile)).toEqual(['ssh_keys_late']);
  expect(run.attempts).toHaveLength(1);
  expect(ready).toHaveLength(1);
  expect(ready[0]!.data).toMatchObject({ via: 'ssh', login: { ok: true } });
  await cancelled(run.id);
});

it('keys refused for good: ready by the banner, one event saying why, the instance kept', async () => {
  await start({ faults: { ssh_refuse_keys: true } });
  const { run, ready } = await readyRun();
  expect(run.attempts.map((a) => a.outcome)).toEqual(['running']);
  expect(ready).toHaveLength(1);
  expect(ready[0]!.message).toMatch(/its SSH answered with a banner; berth did not log in: the instance refused berth's key/);
  expect(ready[0]!.data).toMatchObject({ via: 'ssh', login: { ok: false, code: 'ssh_auth_refused' } });
  await cancelled(run.id);
});
