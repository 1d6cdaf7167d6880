// Several daemons on one Postgres store (issue #21): runs are admitted by whichever daemon has room,
// any daemon shows and cancels any run, a daemon that stops hands its runs to the others (same
// instances, none made twice), and a daemon whose lease another took writes nothing and sends no
// call for that run. In-process daemons against a real Postgres and the simulator; the SIGKILLs of
// daemon processes are the chaos suite's (test/chaos/).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startDaemon, type RunningDaemon } from '../../../src/daemon/daemon.js';
import { startSimulator, type RunningSimulator } from '../../../src/sim/index.js';
import type { Health, Run } from '../../../src/wire/control-api.js';
import { controlApi, type ControlApi } from '../../helpers/control-api.js';
import { openSse } from '../../helpers/sse.js';
import { createPgDatabase, queryPg, type PgDatabase } from '../../helpers/pg-database.js';
import { silentLogger } from '../../../src/logger.js';
import type { DeepPartial } from '../../../src/config/load.js';
import type { Config } from '../../../src/config/schema.js';
import { signWebhook } from '../../../src/sim/index.js';
import { FAST_CONFIG, FAST_SIM, isEnded, isRunning, jobSpec } from '../../helpers/world.js';

let database: PgDatabase;
let sim: RunningSimulator;
const homes: string[] = [];
const daemons: RunningDaemon[] = [];

beforeEach(async () => {
  database = await createPgDatabase();
  sim = await startSimulator({ seed: 11, config: FAST_SIM });
});
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
  await sim.close();
  await database.drop();
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

async function daemonOn(
  maxActive: number,
  apiUrl = sim.url,
  prepare?: (home: string) => void,
  extra: DeepPartial<Config> = {},
): Promise<RunningDaemon & { control: ControlApi }> {
  const home = mkdtempSync(join(tmpdir(), 'berth-cluster-'));
  homes.push(home);
  prepare?.(home);
  const daemon = await startDaemon({
    env: { BERTH_HOME: home, BERTH_API_URL: apiUrl, BERTH_API_KEY: sim.apiKey },
    overrides: {
      ...FAST_CONFIG,
      store: { url: database.url },
      cluster: { lease_s: 3 },
      daemon: { listen: '127.0.0.1:0', max_active_runs: maxActive },
      ...extra,
    },
    logger: silentLogger(),
  });
  daemons.push(daemon);
  await daemon.ready;
  return Object.assign(daemon, { control: controlApi(() => daemon) });
}

async function submitTo(d: { control: ControlApi }, name: string): Promise<Run> {
  const res = await d.control.api<Run>('POST', '/v1/runs', jobSpec({ name }));
  expect(res.status).toBe(201);
  return res.body;
}

/** Every create the simulator saw, per label: a label made twice is a duplicate create. */
function createsPerLabel(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const h of sim.history()) if (h.label) counts.set(h.label, (counts.get(h.label) ?? 0) + 1);
  return counts;
}

const CREATE_ROUTE = 'PUT /api/v0/asks/{offer_id}/';

/**
 * A pass-through to the simulator that holds every create until `release()`: a daemon's create in
 * flight (its intent journaled, the service not yet told) for as long as the test needs.
 */
async function createHolder(target: string) {
  const to = new URL(target);
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const held: number[] = [];
  const server = createHttpServer((req, res) => {
    const path = req.url ?? '/';
    const go = () => {
      const upstream = httpRequest(
        { host: to.hostname, port: to.port, method: req.method, path, headers: { ...req.headers, host: to.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    };
    const create = /^\/api\/v0\/asks\/(\d+)/.exec(path);
    if (req.method === 'PUT' && create) {
      held.push(Number(create[1]));
      void gate.then(go);
    } else go();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    release: open,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const owners = async () =>
  await queryPg<{ run_id: string; owner: string; epoch: string }>(
    database.url,
    `SELECT run_id, owner, epoch FROM run_leases WHERE run_id NOT LIKE '~%'`,
  );

/**
 * A pass-through to the simulator that can be cut: a daemon that reaches the store but not the
 * marketplace (its calls find the connection reset). Keeps the paths of the DELETEs it passed on.
 */
async function cuttable(target: string) {
  const to = new URL(target);
  const state = { cut: false, deletes: [] as string[] };
  const server = createHttpServer((req, res) => {
    if (state.cut) {
      req.socket.destroy();
      return;
    }
    if (req.method === 'DELETE') state.deletes.push(req.url ?? '');
    const upstream = httpRequest(
      { host: to.hostname, port: to.port, method: req.method, path: req.url ?? '/', headers: { ...req.headers, host: to.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('several daemons on one Postgres store', () => {
  it('admits where there is room, cancels through any daemon, and hands runs over when a daemon stops', async () => {
    const a = await daemonOn(2);
    const b = await daemonOn(2);
    const runs = [];
    for (let i = 0; i < 4; i++) runs.push(await submitTo(a, `r${i}`));
    // a has room for two; b takes the other two from the store.
    for (const r of runs) await b.control.waitFor(r.id, isRunning, 30_000);
    expect(a.supervisor.liveCount).toBe(2);
    expect(b.supervisor.liveCount).toBe(2);
    const byOwner = new Map<string, number>();
    for (const l of await owners()) byOwner.set(l.owner, (byOwner.get(l.owner) ?? 0) + 1);
    expect([...byOwner.values()].sort()).toEqual([2, 2]);
    const health = [
      (await a.control.api<Health>('GET', '/healthz')).body.cluster,
      (await b.control.api<Health>('GET', '/healthz')).body.cluster,
    ];
    expect(health.map((h) => [h?.owned_runs, h?.daemons])).toEqual([
      [2, 2],
      [2, 2],
    ]);
    expect(health.filter((h) => h?.leader)).toHaveLength(1);

    // Two daemons share the key: each keeps to half of every group's rate (FAST_CONFIG: 50/s).
    const account = await b.control.api<{ rate_limits: Array<{ group: string; per_s: number }> }>('GET', '/v1/account');
    expect(account.body.rate_limits.every((g) => g.per_s === 25)).toBe(true);

    // A run a drives, cancelled through b: a hears it through the store, and b's event stream sees
    // the events a writes for it.
    const ofA = a.supervisor.liveRunIds()[0]!;
    const stream = await openSse(`${b.url}/v1/events/stream?run=${ofA}`, { authorization: `Bearer ${b.token}` });
    expect(stream.status).toBe(200);
    expect((await b.control.api('POST', `/v1/runs/${ofA}/cancel`)).status).toBe(202);
    const cancelled = await a.control.waitFor(ofA, isEnded, 20_000);
    expect(cancelled.state).toBe('cancelled');
    await stream.until((messages) => messages.some((m) => m.event === 'end'));
    const seen = stream.messages.filter((m) => m.event !== 'end').map((m) => (JSON.parse(m.data) as { type: string }).type);
    expect(seen).toContain('submitted');
    expect(seen).toContain('run.cancelled');
    stream.close();

    // a stops: its other run goes on under b, on the same instance.
    const keptByA = a.supervisor.liveRunIds()[0]!;
    const before = (await b.control.api<Run>('GET', `/v1/runs/${keptByA}`)).body.instance!.id;
    await a.stop();
    daemons.splice(daemons.indexOf(a), 1);
    await expect.poll(() => b.supervisor.liveRunIds().includes(keptByA), { timeout: 15_000 }).toBe(true);
    const after = await b.control.waitFor(keptByA, isRunning, 15_000);
    expect(after.instance!.id).toBe(before);
    expect(after.attempts).toHaveLength(1);

    for (const r of runs) {
      await b.control.api('POST', `/v1/runs/${r.id}/cancel`);
      await b.control.waitFor(r.id, isEnded, 20_000);
    }
    expect([...createsPerLabel().values()].every((n) => n === 1)).toBe(true);
    expect(sim.billingNow()).toEqual([]);
  });

  it("only the leader sweeps the account: the other daemon's run hears that its instance is gone from the leader's sweeps, through the store", async () => {
    const a = await daemonOn(1);
    const b = await daemonOn(1);
    const first = await submitTo(a, 'one');
    const second = await submitTo(a, 'two');
    await a.control.waitFor(first.id, isRunning, 30_000);
    await a.control.waitFor(second.id, isRunning, 30_000);
    const leaderOf = async (d: typeof a) => (await d.control.api<Health>('GET', '/healthz')).body.cluster?.leader === true;
    const [leader, follower] = (await leaderOf(a)) ? [a, b] : [b, a];
    expect(await leaderOf(follower)).toBe(false);
    const sweepPages = async (d: typeof a) => /^berth_list_sweep_pages [1-9]/m.test(await (await fetch(`${d.url}/metrics`)).text());
    await expect.poll(() => sweepPages(leader), { timeout: 10_000 }).toBe(true);
    expect(await sweepPages(follower)).toBe(false);

    // The follower's run: its instance is destroyed outside berth. Only a complete sweep tells a
    // running instance is gone, and only the leader sweeps.
    const runId = follower.supervisor.liveRunIds()[0]!;
    const gone = (await follower.control.api<Run>('GET', `/v1/runs/${runId}`)).body.instance!.id;
    const res = await fetch(`${sim.url}/api/v0/instances/${gone}/`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${sim.apiKey}` },
    });
    expect(res.status).toBe(200);
    const after = await follower.control.waitFor(runId, (r) => isRunning(r) && r.instance?.id !== gone, 30_000);
    expect(after.instance!.id).not.toBe(gone);
    expect(follower.supervisor.liveRunIds()).toContain(runId);
    expect(await sweepPages(follower)).toBe(false);
  });

  it('a run taken over while running has its instance asked for at the next round, with the running tasks (one call for 200), not left to a sweep', async () => {
    // Three pages of instances: the run's, the newest, is on the last page of a sweep.
    sim.addForeignInstances(60);
    const leaving = await daemonOn(1);
    const taker = await daemonOn(2);
    const moved = await submitTo(leaving, 'moved');
    const running = await leaving.control.waitFor(moved.id, isRunning, 30_000);
    expect(leaving.supervisor.liveRunIds()).toEqual([moved.id]);
    const covered = vi.spyOn(taker.supervisor, 'onCovered');
    await leaving.stop();
    daemons.splice(daemons.indexOf(leaving), 1);
    await expect.poll(() => taker.supervisor.liveRunIds().includes(moved.id), { timeout: 15_000 }).toBe(true);
    await expect.poll(() => covered.mock.calls.some(([ids]) => ids.includes(running.instance!.id)), { timeout: 5_000 }).toBe(true);
    expect((await taker.control.api<Run>('GET', `/v1/runs/${moved.id}`)).body.instance!.id).toBe(running.instance!.id);
  });

  it('a run on another daemon never goes for an offer whose create is in flight: no create call is spent on a 410', async () => {
    const holder = await createHolder(sim.url);
    try {
      // a's creates wait in the holder; a has room for one run, so b drives the second.
      const a = await daemonOn(1, holder.url);
      const b = await daemonOn(10);
      const first = await submitTo(a, 'first');
      await expect.poll(() => holder.held.length, { timeout: 15_000 }).toBe(1);
      const offer = holder.held[0]!;

      // The same spec finds the same cheapest offer: b's run must leave it to a's.
      const second = await submitTo(b, 'second');
      const running = await b.control.waitFor(second.id, isRunning, 30_000);
      expect(b.supervisor.liveRunIds()).toContain(second.id);
      expect(running.attempts.at(-1)!.offer_id).not.toBe(offer);
      expect(sim.stats().creates_received).toBe(1);

      holder.release();
      const done = await a.control.waitFor(first.id, isRunning, 30_000);
      expect(done.attempts.map((t) => t.offer_id)).toEqual([offer]);
      expect(sim.stats().answers[CREATE_ROUTE]).toEqual({ '200': 2 });
    } finally {
      holder.release();
      for (const d of daemons.splice(0)) await d.stop();
      await holder.close();
    }
  });

  it('a daemon whose lease another took writes nothing and sends nothing for that run, and takes it back once the lease ends', async () => {
    const a = await daemonOn(10);
    const run = await submitTo(a, 'fenced');
    const running = await a.control.waitFor(run.id, isRunning, 30_000);
    const instanceId = running.instance!.id;

    // Another daemon took the run (a's lease ended while it was paused): a's writes are fenced off.
    await queryPg(database.url, `UPDATE run_leases SET owner = 'thief', epoch = epoch + 1, expires_at = $2 WHERE run_id = $1`, [
      run.id,
      Date.now() + 60_000,
    ]);
    expect((await a.control.api('POST', `/v1/runs/${run.id}/cancel`)).status).toBe(202);
    await expect.poll(() => a.supervisor.liveCount, { timeout: 10_000 }).toBe(0);
    // Its cancel was refused at the fence: nothing stored, the instance never destroyed.
    const [row] = await queryPg<{ state: string }>(database.url, `SELECT state FROM runs WHERE id = $1`, [run.id]);
    expect(row!.state).toBe('running');
    expect(sim.billingNow().map((h) => h.id)).toEqual([instanceId]);

    // The thief's lease ends with nobody renewing it: a takes the run back and carries the cancel out.
    await queryPg(database.url, `UPDATE run_leases SET expires_at = 0 WHERE run_id = $1`, [run.id]);
    const done = await a.control.waitFor(run.id, isEnded, 20_000);
    expect(done.state).toBe('cancelled');
    const [lease] = await owners();
    expect(lease).toBeUndefined();
    expect(sim.billingNow()).toEqual([]);
  });

  it("berth logs through a daemon that does not drive the run scrubs the run's env values as the driving daemon does (issue #31 item 10)", async () => {
    await sim.close();
    sim = await startSimulator({ seed: 11, config: { ...FAST_SIM, onstart_exec: { enabled: true, timeout_s: 10 } } });
    const a = await daemonOn(1);
    const b = await daemonOn(1);
    const secret = 'hf_abcdefghijklmnopqrstuvwxyz0123456789';
    const res = await a.control.api<Run>(
      'POST',
      '/v1/runs',
      jobSpec({ name: 'env-secret', ready_when: 'status', env: { HF_TOKEN: secret }, onstart: 'echo "token=$HF_TOKEN"' }),
    );
    expect(res.status).toBe(201);
    const run = res.body;
    await a.control.waitFor(run.id, isRunning, 30_000);
    expect(a.supervisor.liveRunIds()).toEqual([run.id]);
    expect(b.supervisor.liveRunIds()).toEqual([]);
    type Logs = { source: string; text: string };
    for (const d of [a, b]) {
      let text = '';
      await expect
        .poll(async () => (text = (await d.control.api<Logs>('GET', `/v1/runs/${run.id}/logs?tail=50`)).body.text ?? ''), {
          timeout: 15_000,
        })
        .toContain('token=');
      expect(text).toContain('token=[redacted]');
      expect(text).not.toContain(secret);
    }
    await b.control.api('POST', `/v1/runs/${run.id}/cancel`);
    await a.control.waitFor(run.id, isEnded, 20_000);
    expect(sim.billingNow()).toEqual([]);
  });

  it('a home copied with its daemon-id (a cloned image) makes a second daemon, not a twin of the first: it takes a new id and each counts two daemons (issue #31 item 8)', async () => {
    const a = await daemonOn(1);
    const aId = (await a.control.api<Health>('GET', '/healthz')).body.cluster!.daemon_id;
    const copied = readFileSync(join(homes[0]!, 'daemon-id'), 'utf8');
    expect(copied.trim()).toBe(aId);
    const b = await daemonOn(1, sim.url, (home) => writeFileSync(join(home, 'daemon-id'), copied));
    const bId = (await b.control.api<Health>('GET', '/healthz')).body.cluster!.daemon_id;
    expect(bId).not.toBe(aId);
    expect(readFileSync(join(homes[1]!, 'daemon-id'), 'utf8').trim()).toBe(bId);
    for (const d of [a, b])
      await expect.poll(async () => (await d.control.api<Health>('GET', '/healthz')).body.cluster!.daemons, { timeout: 10_000 }).toBe(2);
    // Each drives a run of its own: they are two lease owners.
    const runs = [await submitTo(a, 'of-a'), await submitTo(a, 'of-b')];
    for (const r of runs) await b.control.waitFor(r.id, isRunning, 30_000);
    expect(new Set((await owners()).map((l) => l.owner))).toEqual(new Set([aId, bId]));
    for (const r of runs) {
      await b.control.api('POST', `/v1/runs/${r.id}/cancel`);
      await b.control.waitFor(r.id, isEnded, 20_000);
    }
  });

  it("money caps of a shared store are the store's: a daemon with looser caps is refused while another is live, alone it changes them, and a stricter one lowers them for every daemon (issues #31 item 5, #38 item 2)", async () => {
    const capped = await daemonOn(1, sim.url, undefined, { budget: { max_usd_per_hour: 0.2 } });
    await expect(daemonOn(1)).rejects.toThrow(
      /budget: this daemon's money caps \(max_usd_per_hour none, max_usd_per_day none\) differ from those of the store it shares with 1 live daemon \(max_usd_per_hour \$0\.2, max_usd_per_day none/,
    );
    // The same caps: it starts.
    const same = await daemonOn(1, sim.url, undefined, { budget: { max_usd_per_hour: 0.2 } });
    // Both stop cleanly: a daemon with no cap, alone now, makes its caps the store's.
    for (const d of [capped, same]) {
      await d.stop();
      daemons.splice(daemons.indexOf(d), 1);
    }
    const uncapped = await daemonOn(1);
    const [row] = await queryPg<{ value: string }>(database.url, `SELECT value FROM meta WHERE key = 'money_caps'`);
    expect(JSON.parse(row!.value)).toMatchObject({ max_usd_per_hour: null, max_usd_per_day: null });
    // Issue #38 item 2: a stricter daemon is not refused (refused, it would leave the looser one
    // spending past its cap); the lower cap wins, and the daemon with no cap of its own holds to it.
    const stricter = await daemonOn(1, sim.url, undefined, { budget: { max_usd_per_hour: 0.2 } });
    const [lowered] = await queryPg<{ value: string }>(database.url, `SELECT value FROM meta WHERE key = 'money_caps'`);
    expect(JSON.parse(lowered!.value)).toMatchObject({ max_usd_per_hour: 0.2, max_usd_per_day: null });
    for (const d of [uncapped, stricter]) {
      const account = await d.control.api<{ money: { max_usd_per_hour: number | null } }>('GET', '/v1/account');
      expect(account.body.money.max_usd_per_hour).toBe(0.2);
    }
    await expect(daemonOn(1)).rejects.toThrow(/differ from those of the store .* and are looser/);
  });

  it('a leader cut from the marketplace but not from the store hands the lead on: a follower sweeps and destroys an orphan while the cut lasts, and no run changes hands (issue #38 item 5)', async () => {
    const links = [await cuttable(sim.url), await cuttable(sim.url)];
    try {
      const a = await daemonOn(1, links[0]!.url);
      const b = await daemonOn(1, links[1]!.url);
      const idOf = (d: RunningDaemon) => readFileSync(join(d.home, 'daemon-id'), 'utf8').trim();
      const leaderRow = async () =>
        (await queryPg<{ owner: string; epoch: string }>(database.url, `SELECT owner, epoch FROM run_leases WHERE run_id = '~leader'`))[0];
      await expect.poll(async () => (await leaderRow())?.owner, { timeout: 10_000 }).toBeDefined();
      const leaderId = (await leaderRow())!.owner;
      const [leader, follower] = leaderId === idOf(a) ? [a, b] : [b, a];
      const leaderLink = links[leader === a ? 0 : 1]!;
      const followerLink = links[leader === a ? 1 : 0]!;
      // Each drives a run; the leader has completed a sweep (the followers have read it).
      const runs = [await submitTo(leader, 'of-leader'), await submitTo(follower, 'of-follower')];
      for (const r of runs) await leader.control.waitFor(r.id, isRunning, 30_000);
      await expect.poll(async () => (await queryPg(database.url, `SELECT 1 FROM meta WHERE key = 'sweep_done'`)).length).toBe(1);
      const held = await queryPg<{ run_id: string; owner: string }>(
        database.url,
        `SELECT run_id, owner FROM run_leases WHERE run_id NOT LIKE '~%' ORDER BY run_id`,
      );

      // The cut: the leader's calls to the marketplace fail; the store still answers it.
      leaderLink.state.cut = true;
      const [orphan] = sim.addForeignInstances(1, { labelPrefix: `berth:${leader.storeId}:ghost:` });
      const destroyed = () => sim.history().find((h) => h.id === orphan)?.destroyed_at ?? null;
      await expect.poll(destroyed, { timeout: 60_000, interval: 200 }).not.toBeNull();
      // Destroyed through the follower, while the leader was still cut; the follower leads now.
      expect(leaderLink.state.cut).toBe(true);
      expect(followerLink.state.deletes.some((path) => path.includes(`/instances/${orphan}`))).toBe(true);
      expect((await leaderRow())!.owner).toBe(idOf(follower));
      await expect
        .poll(async () => (await leader.control.api<Health>('GET', '/healthz')).body.cluster?.leader, { timeout: 10_000 })
        .toBe(false);
      // The ownership fence stayed: every run is held by the daemon that held it, and its instance lives.
      expect(
        await queryPg<{ run_id: string; owner: string }>(
          database.url,
          `SELECT run_id, owner FROM run_leases WHERE run_id NOT LIKE '~%' ORDER BY run_id`,
        ),
      ).toEqual(held);
      for (const r of runs) expect((await follower.control.api<Run>('GET', `/v1/runs/${r.id}`)).body.state).toBe('running');
      leaderLink.state.cut = false;
    } finally {
      for (const l of links) await l.close();
    }
  }, 90_000);

  it("a low_credit webhook received by a daemon that does not lead reaches the leader's credit read: every daemon holds creates within seconds (issue #31, operating notes)", async () => {
    const secretDir = mkdtempSync(join(tmpdir(), 'berth-whsec-'));
    homes.push(secretDir);
    const secret = 'whsec_test_0123456789abcdef0123456789abcdef';
    writeFileSync(join(secretDir, 'secret'), secret, { mode: 0o600 });
    // The credit is read at start and then only every 5 minutes: what the daemons learn sooner, the webhook told them.
    const account = { min_credit_usd: 10, check_interval_s: 300 };
    const a = await daemonOn(1, sim.url, undefined, { account });
    await a.checked;
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const b = await daemonOn(1, sim.url, undefined, {
      account,
      webhooks: { listen: `127.0.0.1:${port}`, secret_file: join(secretDir, 'secret') },
    });
    await b.checked;
    expect((await a.control.api<Health>('GET', '/healthz')).body.cluster!.leader).toBe(true);
    type Account = { credit: { usd: number | null; low: boolean } };
    const low = async (d: typeof a) => (await d.control.api<Account>('GET', '/v1/account')).body.credit.low;
    expect([await low(a), await low(b)]).toEqual([false, false]);

    sim.addCredit(5 - sim.addCredit(0));
    const body = JSON.stringify({
      event_id: 'evt-low-credit-1',
      user_id: 424242,
      notif_type: 'client:low_credit',
      subject: 'Low credit',
      message: 'Your credit is low.',
      timestamp: Date.now() / 1000,
    });
    const ts = Math.floor(Date.now() / 1000);
    const res = await fetch(`http://127.0.0.1:${port}/vast`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-vast-timestamp': String(ts),
        'x-vast-signature-256': signWebhook(secret, ts, body),
      },
      body,
    });
    expect(res.status).toBe(200);
    for (const d of [a, b]) await expect.poll(() => low(d), { timeout: 10_000 }).toBe(true);

    // And each holds creates: a run submitted through either waits in `creating`, saying why, and
    // no create call goes out for it.
    const runs = [await submitTo(a, 'held-a'), await submitTo(b, 'held-b')];
    const waiting = async (id: string) => {
      const evs = (await a.control.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${id}/events`)).body;
      return evs.find((e) => e.type === 'create.waiting')?.message ?? '';
    };
    for (const r of runs) await expect.poll(() => waiting(r.id), { timeout: 10_000 }).toMatch(/below account\.min_credit_usd \(\$10\.00\)/);
    for (const r of runs) expect((await b.control.api<Run>('GET', `/v1/runs/${r.id}`)).body.state).toBe('creating');
    expect(sim.history().filter((h) => runs.some((r) => h.label?.includes(r.id)))).toEqual([]);
  });
});
