// berth against the simulator playing what the real service sends (issue #30, the `quirks` of the
// simulator's config): each case ends as a user would want it, and fails without its fix.
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import type { Run } from '../../../src/wire/control-api.js';
import {
  cancelAndCheckNothingBills,
  isEnded,
  isRunning,
  jobSpec,
  offersInTryOrder,
  startWorld,
  submit,
  type World,
} from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function capturedLog() {
  const lines: string[] = [];
  const logger = createLogger({ destination: new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString('utf8')), cb()) }) });
  return { logger, text: () => lines.join('') };
}

describe('berth against real-service quirks', () => {
  it('case 1: padded addresses: SSH is probed and shown at the trimmed address, and the run is running', async () => {
    world = await startWorld({ sim: { quirks: { padded_strings: true } } });
    const run = await submit(world, jobSpec());
    const running = await world.waitFor(run.id, isRunning, 30_000);
    expect(running.attempts).toHaveLength(1);
    expect(running.instance!.ssh.length).toBeGreaterThan(0);
    for (const e of running.instance!.ssh) expect(e.host).toBe('127.0.0.1');
    expect(running.instance!.ssh_host).toBe('127.0.0.1');
    expect(running.instance!.actual_status).toBe('running');
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('case 2: a host that reports gpu_util -1 is never taken for idle', async () => {
    world = await startWorld({ sim: { quirks: { unknown_as_minus_one: true } }, config: { polling: { interval_s: 0.1 } } });
    const spec = jobSpec({ ready_when: 'status', idle_timeout_s: 0.5 });
    for (const o of (await offersInTryOrder(world, spec)).slice(0, 3)) world.sim.setOfferProfile(o.id, 'no_gpu_util');
    const run = await submit(world, spec);
    await world.waitFor(run.id, isRunning, 20_000);
    await sleep(2000);
    expect((await world.api<Run>('GET', `/v1/runs/${run.id}`)).body.state).toBe('running');
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('case 3: a bid answered 200 success:false with its new_contract is followed as created, with no look-up by label', async () => {
    const log = capturedLog();
    world = await startWorld({ sim: { quirks: { pending_bid_create: true } }, logger: log.logger });
    const spec = jobSpec({
      search: { type: 'bid', filters: { num_gpus: { eq: 1 }, direct_port_count: { gte: 1 } }, order: [['dph_total', 'asc']], limit: 16 },
      bid_price: 'min',
      max_price_per_hour: 1,
    });
    const run = await submit(world, spec);
    const running = await world.waitFor(run.id, isRunning, 30_000);
    expect(running.attempts).toHaveLength(1);
    expect(world.sim.history().map((h) => h.id)).toEqual([running.instance!.id]);
    expect(log.text()).not.toContain('unknown outcome');
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('case 4: a bad key answered 404 {"msg": "Invalid user key"} fails the run as auth at once', async () => {
    world = await startWorld({ sim: { quirks: { bad_key_msg_only: true } }, apiKey: 'not-a-valid-key-1234' });
    const run = await submit(world, jobSpec({ deadline_s: 30 }));
    const failed = await world.waitFor(run.id, isEnded, 20_000);
    expect(failed.state).toBe('failed');
    expect(failed.error?.kind).toBe('auth');
    expect(failed.error?.message).toContain('BERTH_API_KEY');
    expect(world.sim.history()).toEqual([]);
  });
});

describe("an instance destroyed behind berth's back (issue #37 item 8)", () => {
  it('the run\'s own destroy, answered 400 invalid_args "invalid instance_id", is read as gone: the run ends instead of destroying for ever', async () => {
    world = await startWorld({ config: { polling: { interval_s: 0.2 } } });
    const run = await submit(world, jobSpec({ max_attempts: 1 }));
    const running = await world.waitFor(run.id, isRunning, 30_000);
    const id = running.instance!.id;
    // Its task, the account's owner or the service destroys it first.
    const gone = await fetch(`${world.sim.url}/api/v0/instances/${id}/`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${world.sim.apiKey}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(gone.status).toBe(200);
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    const ended = await world.waitFor(run.id, isEnded, 30_000);
    expect(['cancelled', 'failed']).toContain(ended.state);
    expect(world.sim.billingNow()).toEqual([]);
  });
});

describe('the daemon refuses what the service would not search', () => {
  it('a submit with a misspelt filter is 400 spec naming the path and the nearest field; no run is stored, nothing is rented', async () => {
    world = await startWorld();
    const res = await world.api<{ error: { kind: string; issues?: Array<{ path: string; message: string }> } }>(
      'POST',
      '/v1/runs',
      jobSpec({ search: { filters: { gpu_nmae: { eq: 'RTX 4090' }, num_gpus: { eq: '1' } } } }),
    );
    expect(res.status).toBe(400);
    expect(res.body.error.kind).toBe('spec');
    expect(res.body.error.issues).toEqual([
      { path: '$.search.filters.gpu_nmae', message: 'unknown search field; did you mean gpu_name?' },
      { path: '$.search.filters.num_gpus.eq', message: 'expected a number, got string' },
    ]);
    expect((await world.api<unknown[]>('GET', '/v1/runs')).body).toEqual([]);
    expect(world.sim.history()).toEqual([]);
  });
});
