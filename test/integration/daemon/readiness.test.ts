// Readiness against the simulator's real SSH listeners and real onstart execution: a run is running
// only once SSH answers (or the onstart called back with its attempt's token), an instance that
// runs but never answers is replaced, and a failed attempt keeps its container's last log lines.
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { READY_KEY_NAME, ReadyTokens } from '../../../src/daemon/inbound/ready-token.js';
import { createLogger } from '../../../src/logger.js';
import { freePort } from '../../../bench/free-port.js';
import { cancelAndCheckNothingBills, isRunning, jobSpec, offersInTryOrder, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** Follows a run until `done`, recording every (state, instance) pair it showed on the way. */
async function watch(w: World, runId: string, done: (r: RunView) => boolean, timeoutMs = 20_000) {
  const seen: Array<{ state: string; instanceId: number | null }> = [];
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = (await w.api<RunView>('GET', `/v1/runs/${runId}`)).body;
    seen.push({ state: r.state, instanceId: r.instance?.id ?? null });
    if (done(r)) return { run: r, seen };
    if (Date.now() > until) throw new Error(`run ${runId} did not finish: ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 10));
  }
}

/** A logger whose lines the test can read. */
function capturedLogger() {
  const lines: string[] = [];
  const logger = createLogger({ destination: new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString('utf8')), cb()) }) });
  return { logger, text: () => lines.join('') };
}

describe('readiness: SSH, the onstart callback, and the logs of failed attempts', () => {
  it('never reports running on an instance whose SSH does not answer, replaces it as unreachable, and shows its last log lines', async () => {
    world = await startWorld({ config: { readiness: { ssh_timeout_s: 1 } } });
    const spec = jobSpec({ boot_timeout_s: 20 });
    const order = await offersInTryOrder(world, spec);
    world.sim.setOfferProfile(order[0]!.id, 'ssh_hang');
    world.sim.setOfferProfile(order[1]!.id, 'ssh_refused');

    const run = await submit(world, spec);
    const { run: running, seen } = await watch(world, run.id, isRunning);
    expect(running.attempts.map((a) => [a.offer_id, a.outcome])).toEqual([
      [order[0]!.id, 'unreachable'],
      [order[1]!.id, 'unreachable'],
      [order[2]!.id, 'running'],
    ]);
    const unreachable = new Set(running.attempts.slice(0, 2).map((a) => a.instance_id));
    // While it held an instance that ran without answering SSH, the run was never running.
    expect(seen.filter((s) => s.state === 'running' && unreachable.has(s.instanceId))).toEqual([]);
    expect(running.attempts[0]!.detail).toMatch(
      /was running but SSH at 127\.0\.0\.1:\d+ and 127\.0\.0\.1:\d+ did not answer with a banner within 1 s/,
    );

    // The SSH endpoints shown are those that answered: the proxy and the direct one.
    expect(running.instance!.ready).toMatchObject({ via: 'ssh' });
    expect(running.instance!.ssh.map((e) => e.kind)).toEqual(['proxy', 'direct']);
    expect(running.instance!.ssh[0]).toEqual({ kind: 'proxy', host: running.instance!.ssh_host, port: running.instance!.ssh_port });
    const events = (await world.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${run.id}/events`)).body;
    expect(events.map((e) => e.message)).toContainEqual(
      expect.stringMatching(/is running; waiting for SSH at 127\.0\.0\.1:\d+ \(proxy\) and 127\.0\.0\.1:\d+ \(direct\)/),
    );
    expect(events.map((e) => e.message)).toContainEqual(
      expect.stringMatching(
        /is ready \(berth logged in over SSH and ran a command \d+\.\d s after it was listed running\); ssh -p \d+ root@127\.0\.0\.1 \(proxy\); ssh -p \d+ root@127\.0\.0\.1 \(direct\)/,
      ),
    );

    // The failed attempts keep their container's last lines, fetched before the destroy went out.
    await expect
      .poll(async () => (await world!.api<RunView>('GET', `/v1/runs/${run.id}`)).body.attempts[1]!.logs, { timeout: 10_000 })
      .toContain('sshd: no hostkeys available -- exiting.');
    const shown = (await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body;
    expect(shown.attempts[0]!.logs).toMatch(/Container C\.\d+ started\nsshd: no hostkeys available -- exiting\.$/);
    expect(shown.attempts[2]!.logs).toBeNull();
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('is running as soon as the list says so with ready_when "status", and shows the listed endpoints', async () => {
    world = await startWorld();
    const spec = jobSpec({ ready_when: 'status' });
    world.sim.setOfferProfile((await offersInTryOrder(world, spec))[0]!.id, 'ssh_refused');
    const run = await submit(world, spec);
    const running = await world.waitFor(run.id, isRunning);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['running']);
    expect(running.instance!.ready).toMatchObject({ via: 'status', after_running_s: 0 });
    expect(running.instance!.ssh.map((e) => e.kind)).toEqual(['proxy', 'direct']);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it("marks a run ready on its onstart's callback, and a wrong token changes nothing", async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/berth/ready`;
    const log = capturedLogger();
    world = await startWorld({
      // Slow boots leave time to knock with wrong tokens first; the SSH wait outlasts the test.
      sim: { onstart_exec: { enabled: true, timeout_s: 10 }, lifecycle: { provision_s: 5, boot_s: { min: 150, max: 150 } } },
      config: { readiness: { callback_url: url, callback_listen: `127.0.0.1:${port}`, ssh_timeout_s: 60 } },
      logger: log.logger,
    });
    expect(world.daemon.callbackListen).toBe(`http://127.0.0.1:${port}`);
    const spec = jobSpec({ boot_timeout_s: 60, onstart: 'echo "onstart ran"' });
    // SSH never answers here: only the callback can make this run ready.
    for (const o of (await offersInTryOrder(world, spec)).slice(0, 3)) world.sim.setOfferProfile(o.id, 'ssh_refused');
    const run = await submit(world, spec);
    await world.waitFor(run.id, (r) => r.state === 'booting');

    const key = new Database(join(world.home, 'berth.db'), { readonly: true })
      .prepare('SELECT value FROM meta WHERE key = ?')
      .pluck()
      .get(`key:${READY_KEY_NAME}`) as string;
    const tokens = new ReadyTokens(Buffer.from(key, 'hex'));
    const post = async (body: unknown, path = '/berth/ready') => {
      const res = await request(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      await res.body.dump();
      return res.statusCode;
    };
    const forged = tokens.tokenFor(run.id, 1).slice(0, -4) + 'AAAA';
    const otherKey = new ReadyTokens(Buffer.alloc(32, 7)).tokenFor(run.id, 1);
    expect(await post({ token: forged })).toBe(403);
    expect(await post({ token: otherKey })).toBe(403);
    expect(await post({ nothing: true })).toBe(400);
    // A real token of an attempt the run is not on (another attempt, another run) changes nothing.
    expect(await post({ token: tokens.tokenFor(run.id, 2) })).toBe(202);
    expect(await post({ token: tokens.tokenFor('aaaaaaaaaaaa', 1) })).toBe(410);
    await new Promise((r) => setTimeout(r, 300));
    const still = (await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body;
    expect(still.state).toBe('booting');
    expect(still.instance?.ready).toBeNull();

    const running = await world.waitFor(run.id, isRunning, 20_000);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['running']);
    expect(running.instance!.ready).toMatchObject({ via: 'callback' });
    // The script's record is written when its process ends, just after the callback went out.
    const onstart = () => world!.sim.history().find((h) => h.id === running.instance!.id)!.onstart;
    await expect.poll(onstart, { timeout: 5_000 }).toMatchObject({ exit_code: 0, stdout: 'onstart ran\n', stderr: '' });

    // The token never reaches the log, the run object or its events.
    const token = tokens.tokenFor(run.id, 1);
    const events = (await world.api('GET', `/v1/runs/${run.id}/events`)).body;
    for (const text of [log.text(), JSON.stringify(running), JSON.stringify(events)]) expect(text).not.toContain(token.split('.')[2]);
    expect(log.text()).toContain('the onstart called back');
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('keeps the last lines of an exited container, secrets scrubbed, within 4 KB', async () => {
    world = await startWorld({ sim: { onstart_exec: { enabled: true, timeout_s: 10 } }, config: { readiness: { ssh_timeout_s: 1 } } });
    const secret = 'hf-very-secret-token-8d1e2f';
    // The script prints more than 4 KB of lines and then the secret; SSH never answers: unreachable.
    const spec = jobSpec({
      boot_timeout_s: 20,
      env: { HF_TOKEN: secret },
      onstart: 'for i in $(seq 1 300); do echo "line $i of the training log"; done; echo "loaded token $HF_TOKEN"',
    });
    world.sim.setOfferProfile((await offersInTryOrder(world, spec))[0]!.id, 'ssh_no_banner');
    const run = await submit(world, spec);
    await world.waitFor(run.id, isRunning, 20_000);
    const logsOf = async () => (await world!.api<RunView>('GET', `/v1/runs/${run.id}`)).body.attempts[0]!.logs;
    await expect.poll(logsOf, { timeout: 10_000 }).toMatch(/line 300 of the training log\nloaded token \[redacted\]$/);
    const kept = (await logsOf())!;
    expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(4096);
    expect(Buffer.byteLength(kept)).toBeGreaterThan(4000);
    expect(kept).not.toContain('line 1 of');
    expect(kept).not.toContain(secret);
    await cancelAndCheckNothingBills(world, run.id);
  });
});
