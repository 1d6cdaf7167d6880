// berth.db locked by another program while the daemon starts (issue #18 item 3): a `sqlite3` shell
// holding BEGIN IMMEDIATE, here a second connection. The daemon waits, says so, and starts once the
// lock is gone; it never exits 2 for it nor advises a restore (under the README's systemd unit an
// exit 2 keeps it down while instances bill). A damaged berth.db is still exit 2.
import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../src/wire/control-api.js';
import type { RunningSimulator } from '../../src/sim/index.js';
import { berth, startDaemonProcess, userEnv, type DaemonChild } from '../helpers/berth-cli.js';
import { controlApi } from '../helpers/control-api.js';
import { sleep, useSpawnedWorld } from '../helpers/spawned-world.js';
import { FAST_CONFIG, FAST_SIM, isRunning, jobSpec } from '../helpers/world.js';

let sim: RunningSimulator | undefined;
const children: DaemonChild[] = [];
const locks: Database.Database[] = [];
/** The config files the children are started with (beside their homes). */
const configFiles: string[] = [];

const world = useSpawnedWorld();
// Registered after the world's, so run before it (vitest runs after-hooks as a stack).
afterEach(async () => {
  for (const l of locks.splice(0)) {
    if (l.inTransaction) l.exec('ROLLBACK');
    l.close();
  }
  await Promise.all(children.splice(0).map((c) => c.kill()));
  sim = undefined;
  configFiles.splice(0).forEach((f) => rmSync(f, { force: true }));
});

/** A home with one run that reached running, its daemon stopped (SIGTERM): the instance still bills. */
async function homeWithRunningRun(): Promise<{ home: string; runId: string; instanceId: number }> {
  sim = await world.sim({ seed: 41, config: FAST_SIM });
  const home = world.home('berth-busy-');
  const d = await world.spawn({ home, simUrl: sim.url, apiKey: sim.apiKey, config: FAST_CONFIG });
  const res = await d.api<RunView>('POST', '/v1/runs', jobSpec());
  expect(res.status).toBe(201);
  const running = await d.waitFor(res.body.id, isRunning);
  expect(await d.stop()).toBe(0);
  return { home, runId: res.body.id, instanceId: running.instance!.id };
}

/** What another program does: a transaction holding berth.db's write lock. */
function holdWriteLock(home: string): Database.Database {
  const other = new Database(join(home, 'berth.db'));
  locks.push(other);
  other.exec('BEGIN IMMEDIATE');
  return other;
}

function startDaemon(home: string): DaemonChild {
  configFiles.push(`${home}.config.json`);
  const child = startDaemonProcess(home, userEnv(home, { BERTH_API_URL: sim!.url, BERTH_API_KEY: sim!.apiKey }), FAST_CONFIG);
  children.push(child);
  return child;
}

/** Waits (15 s at most) for a log line matching `re`: a process start takes seconds on a loaded machine. */
async function untilLogged(child: DaemonChild, re: RegExp): Promise<{ msg: string; level: number }> {
  const until = Date.now() + 15_000;
  for (;;) {
    const line = logLines(child).find((l) => re.test(l.msg));
    if (line) return line;
    if (Date.now() > until || child.proc.exitCode !== null) throw new Error(`no log line ${re}: ${child.output()}`);
    await sleep(50);
  }
}

function logLines(child: DaemonChild): Array<{ msg: string; level: number }> {
  return child
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; level: number });
}

// Two daemon starts and a run each: a loaded machine needs more than the default time.
describe('berth.db locked by another program at start-up', { timeout: 90_000 }, () => {
  it('the daemon waits and says so, stays alive, then resumes its run once the lock is released', async () => {
    const { home, runId, instanceId } = await homeWithRunningRun();
    const other = holdWriteLock(home);
    const d = startDaemon(home);
    const url = await d.listening();
    const waiting = await untilLogged(d, /berth\.db is locked by another program.*waiting for it to resume the runs/);
    expect(waiting.level).toBe(40);
    await sleep(3000);
    expect(d.proc.exitCode, d.output()).toBeNull();
    // Not ready while it waits, and `berth status` still reaches it.
    const health = (await (await fetch(`${url}/healthz`)).json()) as { ready: boolean };
    expect(health.ready).toBe(false);

    other.exec('COMMIT');
    const api = controlApi(() => ({ url, token: readFileSync(join(home, 'control.token'), 'utf8').trim() }));
    await untilLogged(d, /berth\.db is free again after .* went on to resume the runs/);
    await untilLogged(d, /^berth daemon ready$/);
    // Its run's actor resumed: the instance is watched again (a poll keeps it running, no new attempt).
    await sleep(1000);
    const again = await api.waitFor(runId, isRunning, 20_000);
    expect(again.instance!.id).toBe(instanceId);
    expect(again.attempts).toHaveLength(1);
    expect(d.output()).not.toMatch(/restore|cannot go on/);
    expect(sim!.billingNow().map((h) => h.id)).toEqual([instanceId]);
    await api.api('POST', `/v1/runs/${runId}/cancel`);
    expect((await api.waitFor(runId, (r) => r.state === 'cancelled')).state).toBe('cancelled');
    expect((await d.signal('SIGTERM')).code).toBe(0);
  });

  it('a lock over the open itself (a restored store whose runs must be held) is waited out too', async () => {
    const { home, runId } = await homeWithRunningRun();
    // As if berth.db were put back from an older backup: its generation is behind store.json's, so
    // the open must write (it holds the live runs) and meets the lock.
    const edit = new Database(join(home, 'berth.db'));
    edit.exec(`UPDATE meta SET value = '1' WHERE key = 'generation'`);
    edit.close();
    const other = holdWriteLock(home);
    const d = startDaemon(home);
    await untilLogged(d, /berth\.db is locked by another program.*waiting for it to open the store/);
    await sleep(2000);
    expect(d.proc.exitCode, d.output()).toBeNull();
    other.exec('COMMIT');
    const url = await d.listening();
    const api = controlApi(() => ({ url, token: readFileSync(join(home, 'control.token'), 'utf8').trim() }));
    const held = (await api.api<RunView>('GET', `/v1/runs/${runId}`)).body;
    expect(held).toMatchObject({ state: 'running', held: true });
    expect(d.output()).not.toMatch(/restore it from a backup|cannot go on/);
    await api.api('POST', `/v1/runs/${runId}/cancel`);
    await api.waitFor(runId, (r) => r.state === 'cancelled');
    expect((await d.signal('SIGTERM')).code).toBe(0);
  });

  it('SIGTERM while it waits for the lock ends it at once with exit 0', async () => {
    const { home } = await homeWithRunningRun();
    holdWriteLock(home);
    const d = startDaemon(home);
    await d.listening();
    await sleep(1000);
    // No duration asserted: the lock is never let go, so a stop that waited for it would outlast the
    // test; that the wait ends mid-pause on its signal is store-wait.test.ts's, on the fake clock.
    const exit = await d.signal('SIGTERM');
    expect(exit.code, d.output()).toBe(0);
  });

  it('a damaged berth.db is still refused with exit 2 and the advice to restore, lock or not', async () => {
    const { home } = await homeWithRunningRun();
    const fd = openSync(join(home, 'berth.db'), 'r+');
    writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, 2 * 4096);
    closeSync(fd);
    const configFile = join(home, 'cfg.json');
    writeFileSync(configFile, JSON.stringify(FAST_CONFIG));
    const r = await berth(['daemon', '--config', configFile], userEnv(home, { BERTH_API_URL: sim!.url, BERTH_API_KEY: sim!.apiKey }));
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/berth\.db is damaged .*restore berth\.db from a backup/);
  });
});
