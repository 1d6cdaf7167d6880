// The money guard against the simulator, in process: the daemon-wide $/h cap with many runs
// (checked in the simulator's own history), low credit pausing and resuming creates, a budget that
// cannot pay for any offer to boot, a scoped key with the four categories running the whole
// workflow, and `berth doctor` and `berth costs` as a user runs them (the built CLI).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { CostsReport } from '../../../src/daemon/money/costs.js';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import type { SimInstanceHistory } from '../../../src/sim/index.js';
import { berth, userEnv } from '../../helpers/berth-cli.js';
import { jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const SSH_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0bS9mb3ItdGVzdHMtb25seQ user@host';
const FOUR = { api: { misc: {}, user_read: {}, instance_read: {}, instance_write: {} } };

async function events(w: World, runId: string) {
  return (await w.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${runId}/events`)).body;
}

/** Every moment one of ours was created: the billed $/h of ours alive in the simulator then. */
function peakDph(history: SimInstanceHistory[]): number {
  const ours = history.filter((h) => h.label?.startsWith('berth:'));
  let peak = 0;
  for (const h of ours) {
    const t = h.created_at.wall_ms;
    const live = ours.filter((o) => o.created_at.wall_ms <= t && (o.destroyed_at === null || o.destroyed_at.wall_ms > t));
    peak = Math.max(
      peak,
      live.reduce((s, o) => s + o.compute_dph + o.disk_dph, 0),
    );
  }
  return peak;
}

describe('daemon-wide caps', () => {
  it('budget.max_usd_per_hour holds with many runs: creates wait (one event each) and go as instances end; nothing running is destroyed for it', async () => {
    const CAP = 0.35;
    world = await startWorld({ config: { budget: { max_usd_per_hour: CAP } } });
    // Each offer bills at most $0.2/h (cheapest first, about $0.09-0.17): one or two fit under the
    // cap at a time, eight would need about $1/h. Each run expires after 1 s running, freeing its $/h.
    const spec = jobSpec({ max_price_per_hour: 0.2, max_runtime_s: 1, deadline_s: 120 });
    const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => submit(world!, { ...spec, name: `cap-${i}` })));
    const ended = await Promise.all(runs.map((r) => world!.waitFor(r.id, (v) => v.state === 'expired' || v.state === 'failed', 60_000)));
    expect(ended.map((r) => [r.state, r.error?.kind])).toEqual(runs.map(() => ['expired', 'max_runtime']));

    // The simulator's own history: never more than the cap billing at once.
    expect(peakDph(world.sim.history())).toBeLessThanOrEqual(CAP + 1e-9);
    // The cap did bite, and each wait left one event (however long it lasted).
    const waits = (await Promise.all(runs.map((r) => events(world!, r.id)))).map((evs) => evs.filter((e) => e.type === 'create.waiting'));
    expect(waits.flat().length).toBeGreaterThan(0);
    expect(waits.flat()[0]!.message).toMatch(/budget\.max_usd_per_hour \(\$0\.35\/h\) would be passed/);
    // Every run reached running once, and expired by its own runtime, not by the cap.
    for (const r of ended) expect(r.attempts.filter((a) => a.outcome === 'expired')).toHaveLength(1);
    expect(world.sim.billingNow()).toEqual([]);
  });
});

describe('account.min_credit_usd', () => {
  it('pauses creates while the credit is low and resumes them when it is back', async () => {
    world = await startWorld({
      sim: { account: { credit: 50, ssh_keys: [SSH_KEY] } },
      config: { account: { min_credit_usd: 10, check_interval_s: 0.3 } },
    });
    await world.daemon.checked;
    world.sim.addCredit(-45); // $5 left
    await new Promise((r) => setTimeout(r, 800)); // a read or two of users/current
    const run = await submit(world, jobSpec());
    await world.waitFor(run.id, (r) => r.state === 'creating');
    await new Promise((r) => setTimeout(r, 600));
    expect((await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body.state).toBe('creating');
    expect(world.sim.history()).toEqual([]);
    const waiting = (await events(world, run.id)).filter((e) => e.type === 'create.waiting');
    expect(waiting).toHaveLength(1);
    expect(waiting[0]!.message).toMatch(/the account credit \(\$5\.00\) is below account\.min_credit_usd \(\$10\.00\)/);

    world.sim.addCredit(100);
    const running = await world.waitFor(run.id, (r) => r.state === 'running', 20_000);
    expect(running.attempts).toHaveLength(1);
    expect((await events(world, run.id)).map((e) => e.type)).toContain('create.resumed');
  });
});

describe('budget_usd', () => {
  it('warns once at 80% of the budget, in the run log and as a notification, then ends the run expired', async () => {
    const got: Array<{ type: string; run: { id: string }; message: string }> = [];
    const receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
      world = await startWorld({ config: { notify: [{ url, format: 'json', events: ['budget.warning', 'run.expired'] }] } });
      // The dearest offers, so the budget is spent in seconds of wall time.
      const spec = jobSpec({ search: { order: [['dph_total', 'desc']] }, max_price_per_hour: 5, budget_usd: 0.004, boot_timeout_s: 3 });
      const run = await submit(world, spec);
      const done = await world.waitFor(run.id, (r) => r.state === 'expired' || r.state === 'failed', 60_000);
      expect(done.state).toBe('expired');
      expect(done.error?.kind).toBe('budget');
      const events = (await world.api<Array<{ type: string; message: string }>>('GET', `/v1/runs/${run.id}/events`)).body;
      const warnings = events.filter((e) => e.type === 'budget.warning');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.message).toMatch(/^80% of budget_usd spent: \$0\.00[3-4]\d of \$0\.0040/);
      // The warning came before the end, and both were delivered.
      expect(events.findIndex((e) => e.type === 'budget.warning')).toBeLessThan(events.findIndex((e) => e.type === 'run.expired'));
      await expect.poll(() => got.map((n) => n.type), { timeout: 10_000 }).toEqual(['budget.warning', 'run.expired']);
      expect(got.every((n) => n.run.id === run.id)).toBe(true);
      expect(world.sim.billingNow()).toEqual([]);
    } finally {
      receiver.closeAllConnections();
      await new Promise((r) => receiver.close(r));
    }
  });

  it('ends a run expired without renting anything when its budget cannot pay for any matching offer to boot', async () => {
    world = await startWorld();
    // Every offer bills at least about $0.09/h: 600 s of boot at that price is about $0.015.
    const run = await submit(world, jobSpec({ budget_usd: 0.001, boot_timeout_s: 600 }));
    const done = await world.waitFor(run.id, (r) => r.state === 'expired' || r.state === 'failed');
    expect(done.state).toBe('expired');
    expect(done.error?.kind).toBe('budget');
    expect(done.error?.message).toMatch(/cannot pay for (the matching offer|any of the \d+ matching offers) to boot/);
    expect(done.attempts).toEqual([]);
    expect(world.sim.history()).toEqual([]);
  });

  it('shows the cost of a run as it bills, and the spend stays when it has ended', async () => {
    world = await startWorld();
    const run = await submit(world, jobSpec());
    const running = await world.waitFor(run.id, (r) => r.state === 'running');
    expect(running.cost.usd_per_hour).toBeCloseTo(running.instance!.dph_total!, 6);
    await new Promise((r) => setTimeout(r, 300));
    const later = (await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body;
    expect(later.cost.usd).toBeGreaterThan(running.cost.usd);
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    const done = await world.waitFor(run.id, (r) => r.state === 'cancelled');
    expect(done.cost.usd_per_hour).toBe(0);
    expect(done.cost.usd).toBeGreaterThanOrEqual(later.cost.usd);
    const again = (await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body;
    expect(again.cost).toEqual(done.cost);
    // berth status: a COST column and a total line.
    const table = await berth(['status'], userEnv(world.home));
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/PRICE +COST +AGE/);
    expect(table.stdout).toContain(`$${done.cost.usd.toFixed(4)}`);
    expect(table.stdout).toMatch(
      new RegExp(`^Total: \\$${done.cost.usd.toFixed(4).replace('.', '\\.')} spent by this run; \\$0\\.0000/h billing now\\.$`, 'm'),
    );
  });
});

describe('scoped keys, doctor and costs', () => {
  it('a key with only misc, user_read, instance_read and instance_write runs the whole workflow; doctor passes it and costs says billing_read is missing', async () => {
    world = await startWorld({
      apiKey: 'scoped-four',
      sim: { keys: [{ key: 'scoped-four', permissions: FOUR }], account: { ssh_keys: [SSH_KEY] } },
    });
    await world.daemon.checked;
    const run = await submit(world, jobSpec());
    await world.waitFor(run.id, (r) => r.state === 'running');
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    const done = await world.waitFor(run.id, (r) => r.state === 'cancelled');
    expect(done.error).toBeNull();
    expect(world.sim.billingNow()).toEqual([]);
    // Nothing refused along the way but the one optional call: adding berth's SSH key to the
    // account needs user_write, which this key lacks (berth then attaches it per instance, docs/ssh.md).
    const refused = Object.entries(world.sim.stats().answers).filter(([, byStatus]) => byStatus['403']);
    expect(refused).toEqual([[expect.stringMatching(/^POST \/api\/v0\/ssh\/?$/), { '403': 1 }]]);

    const env = userEnv(world.home, { BERTH_API_URL: world.sim.url, BERTH_API_KEY: 'scoped-four' });
    const doctor = await berth(['doctor'], env);
    expect(doctor.stdout).toMatch(
      /^ok {4}permissions .*misc, user_read, instance_read, instance_write: every category berth calls; billing_read missing: optional/m,
    );
    expect(doctor.stdout.trim().split('\n')).toHaveLength(5);
    expect(doctor.code).toBe(0);

    const costs = await berth(['costs', '--json'], env);
    expect(costs.code).toBe(0);
    const parsed = JSON.parse(costs.stdout) as CostsReport;
    expect(parsed.runs.map((r) => r.id)).toEqual([run.id]);
    expect(parsed.service).toMatchObject({ compared: false, total_usd: null });
    expect(parsed.service.note).toMatch(/lacks billing_read/);
  });

  it("doctor names instance_write for a key without it (exit 4), and the failing credit check of an account with too little credit (exit 1), berth's own SSH key passing", async () => {
    world = await startWorld({
      sim: { keys: [{ key: 'no-write', permissions: { api: { misc: {}, user_read: {}, instance_read: {} } } }], account: { credit: 0.5 } },
    });
    const env = (key: string) => userEnv(world!.home, { BERTH_API_URL: world!.sim.url, BERTH_API_KEY: key });
    const noWrite = await berth(['doctor'], env('no-write'));
    expect(noWrite.code).toBe(4);
    expect(noWrite.stdout).toMatch(/^FAIL {2}permissions .*the key lacks instance_write \(create, destroy and change-bid need it\)/m);
    // The instance_write probe is a destroy of an id no account has: sent, refused, and nothing ever existed.
    expect(world.sim.stats().requests['DELETE /api/v0/instances/{id}/']).toBeGreaterThan(0);
    expect(world.sim.history()).toEqual([]);

    const full = await berth(['doctor', '--json'], env(world.sim.apiKey));
    expect(full.code).toBe(1);
    const checks = (JSON.parse(full.stdout) as { checks: Array<{ name: string; ok: boolean; message: string }> }).checks;
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['service', true],
      ['key', true],
      ['permissions', true],
      ['ssh_key', true],
      ['credit', false],
    ]);
    expect(checks[4]!.message).toMatch(/^\$0\.50 is below account\.min_credit_usd \(\$1\.00\)/);
    expect(checks[3]!.message).toMatch(/^berth's SSH key .+\/ssh\/id_ed25519 \(SHA256:\S+\) is usable/);

    const bad = await berth(['doctor'], env('not-a-key'));
    expect(bad.code).toBe(4);
    expect(bad.stdout).toMatch(/^FAIL {2}key +the service rejected the API key/m);
  });

  it("costs, with a key that may read billing, shows the service charges for the same days beside berth's figures", async () => {
    world = await startWorld({ sim: { time_scale: 1, lifecycle: { provision_s: 0.2, boot_s: { min: 0.3, max: 0.5 } } } });
    const run = await submit(world, jobSpec());
    await world.waitFor(run.id, (r) => r.state === 'running');
    await new Promise((r) => setTimeout(r, 1500));
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    await world.waitFor(run.id, (r) => r.state === 'cancelled');
    const today = new Date().toISOString().slice(0, 10);
    const env = userEnv(world.home, { BERTH_API_URL: world.sim.url, BERTH_API_KEY: world.sim.apiKey });
    const res = await berth(['costs', '--since', today, '--json'], env);
    expect(res.code).toBe(0);
    const report = JSON.parse(res.stdout) as CostsReport;
    expect(report.since).toBe(`${today}T00:00:00.000Z`);
    expect(report.service.compared).toBe(true);
    const inst = report.runs[0]!.instances[0]!;
    const ledger = world.sim.ledger().instances.find((i) => i.instance_id === inst.instance_id)!;
    // The service rounds each contract to 3 decimals; berth's own record is never below what it billed.
    expect(inst.service_usd).toBeCloseTo(Math.round(ledger.total_usd * 1000) / 1000, 6);
    expect(inst.usd).toBeGreaterThanOrEqual(ledger.total_usd - 1e-9);
    expect(inst.difference_usd).toBeCloseTo(inst.usd - inst.service_usd!, 6);
    const text = await berth(['costs', '--since', today], env);
    expect(text.stdout).toMatch(/SERVICE +DIFF/);
    expect(text.stdout).toMatch(/^Total: \$0\.\d{4} by berth's records/m);
    const badSince = await berth(['costs', '--since', 'yesterday'], env);
    expect(badSince.code).toBe(2);
    expect(badSince.stderr).toMatch(/since must be a date/);
  });
});
