// The run driver with the real run machine (stub actors), a real store and a captured log: what it
// writes to the attempts journal and how loudly it reports a destroy that keeps failing.
import { STOPPED_BLIP_MS } from '../../../../machines/run-rules.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fromPromise } from 'xstate';
import {
  runMachine,
  type BootDeadlineInput,
  type BootDeadlineOutput,
  type CreateInput,
  type CreateOutput,
  type DestroyInput,
  type DestroyOutput,
  type ProbeInput,
  type ProbeOutput,
  type LoginInput,
  type LoginOutput,
  type SearchInput,
  type SearchOutput,
  type SleepInput,
  type SleepOutput,
} from '../../../../machines/run-machine.js';
import { stubActor } from '../../../helpers/stub-actor.js';
import { systemClock, type Clock } from '../../../../src/clock.js';
import { loadConfig } from '../../../../src/config/load.js';
import { AttemptJournal } from '../../../../src/daemon/runs/attempt-journal.js';
import { SoleOwner } from '../../../../src/daemon/cluster/run-ownership.js';
import { ALERT_AFTER } from '../../../../src/daemon/instances/destroy-alerts.js';
import { MachineQuarantine } from '../../../../src/daemon/runs/machine-quarantine.js';
import { OfferClaims } from '../../../../src/daemon/runs/offer-claims.js';
import { RunDriver, type ProvidedRunMachine } from '../../../../src/daemon/runs/run-driver.js';
import { BerthError } from '../../../../src/errors.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { planRun } from '../../../../src/job-spec/run-plan.js';
import { createLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';

let dir: string;
let store: Store;
let driver: RunDriver | undefined;
let lines: Array<{ level: number; msg: string }>;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-driver-'));
  store = openStore({ home: dir });
  lines = [];
});
afterEach(() => {
  driver?.stop();
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const { config } = loadConfig({}, {});
const spec = planRun(parseJobSpec({ name: 'd', image: 'x', max_price_per_hour: 1 }), config.runs);
const turn = () => new Promise<void>((r) => setImmediate(r));

/** One offer; the create makes instance 500; every destroy fails `failures.value` times, then succeeds. */
function machine(failures: { value: number }): ProvidedRunMachine {
  const journal = new AttemptJournal(store, new SoleOwner(store));
  return runMachine.provide({
    actors: {
      searchOffers: stubActor<SearchOutput, SearchInput>(async () => ({
        candidates: [{ offerId: 7, machineId: 70, dphTotal: 0.3, minBid: null, diskDph: 0.01 }],
      })),
      createInstance: stubActor<CreateOutput, CreateInput>(async ({ input }) => {
        journal.begin(input, Date.now());
        journal.adopt(input.runId, input.n, 500, Date.now());
        return { kind: 'created', instanceId: 500, createdAt: Date.now(), at: Date.now() };
      }),
      destroyInstance: stubActor<DestroyOutput, DestroyInput>(async () => {
        if (failures.value-- > 0) throw new BerthError('server_error', 'The marketplace failed on DELETE (500)');
        return { requestedAt: Date.now() };
      }),
      // SSH answers at once on every endpoint the list shows.
      probeSsh: stubActor<ProbeOutput, ProbeInput>(async ({ input }) => ({ reachable: input.endpoints })),
      // and berth logs in at once.
      loginSsh: stubActor<LoginOutput, LoginInput>(async () => ({ ok: true })),
      // Backoffs pass at once; the run's deadline and boot timeout never come.
      bootDeadline: fromPromise<BootDeadlineOutput, BootDeadlineInput>(() => new Promise(() => undefined)),
      sleepUntil: fromPromise<SleepOutput, SleepInput>(async ({ input }) => {
        await (input.until - Date.now() > 60_000 ? new Promise<void>(() => undefined) : turn());
        return { at: Date.now() };
      }),
    },
  }) as unknown as ProvidedRunMachine;
}

function start(
  m: ProvidedRunMachine,
  runSpec = spec,
  clock: Clock = systemClock,
  onPaused: (runId: string) => void = () => undefined,
): RunDriver {
  const log = createLogger({
    destination: new Writable({
      write(chunk: Buffer, _e, cb) {
        lines.push(JSON.parse(chunk.toString('utf8')) as { level: number; msg: string });
        cb();
      },
    }),
  });
  const { row } = store.runs.insert({ id: 'r1', name: runSpec.name, specJson: JSON.stringify(runSpec), createdAt: Date.now() });
  const journal = new AttemptJournal(store, new SoleOwner(store));
  const d = new RunDriver(row, runSpec, {
    machine: m,
    store,
    journal,
    clock,
    claims: new OfferClaims(),
    quarantine: new MachineQuarantine(1000, systemClock),
    config,
    log,
    onEnded: () => undefined,
    onPaused,
    onProgress: () => undefined,
    onLost: () => undefined,
    ownership: new SoleOwner(store),
  });
  d.start();
  d.admit();
  return (driver = d);
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await turn();
  expect(done()).toBe(true);
}

const status = (actual: string) => ({
  id: 500,
  actual_status: actual,
  intended_status: 'running',
  cur_state: null,
  status_msg: null,
  ssh_host: 'h',
  ssh_port: 22,
  dph_total: 0.31,
});

describe('run driver', () => {
  it('journals what the machine reports: billed price as listed, first running, destroy confirmed', async () => {
    const d = start(machine({ value: 0 }));
    await until(() => d.state === 'booting');
    d.poll(status('loading'), Date.now());
    d.poll(status('running'), Date.now());
    await until(() => d.state === 'running');
    expect(store.attempts.get('r1', 1)).toMatchObject({
      instance_id: 500,
      dph_total: 0.31,
      outcome: 'running',
      destroy_confirmed_at: null,
    });
    expect(store.attempts.get('r1', 1)!.first_running_at).not.toBeNull();
    d.cancel();
    // Lists that no longer show it, until one taken after the destroy was accepted confirms it.
    await until(() => {
      d.poll(null, Date.now());
      return d.state === 'cancelled';
    });
    expect(store.attempts.get('r1', 1)).toMatchObject({ outcome: 'cancelled' });
    expect(store.attempts.get('r1', 1)!.destroy_confirmed_at).not.toBeNull();
  });

  it('a transition written inside a group commit that then fails pauses the run, as a write of its own that failed would', async () => {
    const paused: string[] = [];
    const d = start(machine({ value: 0 }), spec, systemClock, (id) => paused.push(id));
    await until(() => d.state === 'booting');
    d.poll(status('running'), Date.now());
    await until(() => d.state === 'running');
    // The cancel's transition is written in a savepoint; the group around it fails after it.
    expect(() =>
      store.transaction(() => {
        store.transaction(() => d.cancel());
        throw new Error('the group did not commit');
      }),
    ).toThrow('the group did not commit');
    expect(paused).toEqual(['r1']);
    expect(d.isPaused).toBe(true);
    // What the store holds is what it held before the group: the run is running.
    expect(store.runs.get('r1')!.state).toBe('running');
    expect(lines.some((l) => l.level === 50 && l.msg.includes('cannot write the store'))).toBe(true);
  });

  it('passes on an unchanged stop while booting: the list that shows it lasted STOPPED_BLIP_MS ends the attempt', async () => {
    const d = start(machine({ value: 0 }));
    await until(() => d.state === 'booting');
    const t = Date.now();
    d.poll(status('stopped'), t);
    await turn();
    expect(d.state).toBe('booting');
    // The same record, a blip's length later: passed on (unchanged statuses otherwise are not), judged lost.
    d.poll(status('stopped'), t + STOPPED_BLIP_MS);
    await until(() => d.state === 'destroying');
  });

  it('drops a list started before the newest one it applied: a replayed older sighting does not set a running instance back to loading', async () => {
    const d = start(machine({ value: 0 }));
    await until(() => d.state === 'booting');
    const t = Date.now();
    d.poll(status('running'), t);
    await until(() => d.state === 'running');
    // Another daemon's older list, read after this one's own (a follower's replay after a take-over).
    d.poll(status('loading'), t - 5_000);
    d.poll(null, t - 4_000);
    await turn();
    expect(d.state).toBe('running');
    expect(store.attempts.get('r1', 1)).toMatchObject({ actual_status: 'running' });
    // A newer list is applied as ever.
    d.poll(status('exited'), t + 1_000);
    await until(() => d.state === 'destroying');
  });

  it('applies lists again when the wall clock stepped back: every list then looks older than the newest applied', async () => {
    let offset = 0;
    const stepped: Clock = { ...systemClock, now: () => Date.now() + offset };
    const d = start(machine({ value: 0 }), spec, stepped);
    await until(() => d.state === 'booting');
    d.poll(status('running'), stepped.now());
    await until(() => d.state === 'running');
    offset = -3_600_000; // an operator or NTP steps the clock back an hour
    d.poll(status('exited'), stepped.now());
    await until(() => d.state === 'destroying');
  });

  it(`logs a run's own destroy that keeps failing as an ALERT at error level from failure #${ALERT_AFTER} on`, async () => {
    const failures = { value: ALERT_AFTER + 1 };
    const d = start(machine(failures));
    await until(() => d.state === 'booting');
    d.cancel();
    await until(() => {
      d.poll(null, Date.now());
      return d.state === 'cancelled';
    });
    expect(failures.value).toBe(-1);
    const retries = lines.filter((l) => l.msg.includes('destroy of instance 500'));
    expect(retries.map((l) => l.level)).toEqual([...Array<number>(ALERT_AFTER - 1).fill(40), 50, 50]);
    expect(retries.at(-1)!.msg).toMatch(/^ALERT: .*keeps failing/);
  });

  it("acts on a webhook's word about its own instance only: offline at once, outbid only for a bid and not when older than the instance", async () => {
    const d = start(machine({ value: 0 }));
    await until(() => d.state === 'booting');
    d.poll(status('running'), Date.now());
    await until(() => d.state === 'running');
    const noted: string[] = [];
    const note = () => void noted.push('note');
    // An on-demand instance is never outbid; another instance is not this run's.
    expect(d.serviceSays(500, 'stopped', Date.now(), 'outbid (client:outbid webhook)', note)).toBe(false);
    expect(d.serviceSays(501, 'offline', Date.now(), 'offline (client:instance_offline webhook)', note)).toBe(false);
    await turn();
    expect([d.state, noted]).toEqual(['running', []]);
    expect(
      d.serviceSays(500, 'offline', Date.now(), 'the service reports instance 500 offline (client:instance_offline webhook)', note),
    ).toBe(true);
    await until(() => d.state === 'destroying');
    expect(noted).toEqual(['note']);
    // Already ending: a repeat does nothing.
    expect(d.serviceSays(500, 'offline', Date.now(), 'again', note)).toBe(false);
  });

  it('takes an outbid webhook for a bid instance, unless the event is older than the instance (a late repeat)', async () => {
    const bidSpec = planRun(
      parseJobSpec({ name: 'b', image: 'x', max_price_per_hour: 1, search: { type: 'bid' }, bid_price: 0.2, on_outbid: 'failover' }),
      config.runs,
    );
    const d = start(machine({ value: 0 }), bidSpec);
    await until(() => d.state === 'booting');
    const createdAt = store.attempts.get('r1', 1)!.instance_created_at!;
    d.poll(status('running'), Date.now());
    await until(() => d.state === 'running');
    const note = () => undefined;
    expect(d.serviceSays(500, 'stopped', createdAt - 60_000, 'outbid (client:outbid webhook)', note)).toBe(false);
    await turn();
    expect(d.state).toBe('running');
    expect(d.serviceSays(500, 'stopped', Date.now(), 'the service reports instance 500 outbid (client:outbid webhook)', note)).toBe(true);
    await until(() => d.state === 'destroying');
  });
});
