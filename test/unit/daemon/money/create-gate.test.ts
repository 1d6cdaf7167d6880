// The create gate on fake time and a real store: which creates wait for the daemon-wide caps and
// the credit, the one event a wait leaves on its run, and when they go ahead or give up.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CreateInput } from '../../../../machines/run-machine.js';
import { AttemptJournal } from '../../../../src/daemon/runs/attempt-journal.js';
import { SoleOwner } from '../../../../src/daemon/cluster/run-ownership.js';
import { AccountWatch } from '../../../../src/daemon/money/account-watch.js';
import { CreateAbandoned, CreateGate, type CreateGateDeps } from '../../../../src/daemon/money/create-gate.js';
import { silentLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const H = 3_600_000;
let dir: string;
let store: Store;
let journal: AttemptJournal;
let clock: FakeClock;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-gate-'));
  store = openStore({ home: dir });
  journal = new AttemptJournal(store, new SoleOwner(store));
  clock = new FakeClock();
  for (const id of ['a', 'b', 'c', 'old']) store.runs.insert({ id, name: id, specJson: '{}', createdAt: 0 });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const account = { read: true, low: false, credit: 100 as number | null, minCreditUsd: 1, setHeld: (_held: boolean) => undefined };
const ending = new Set<string>();

type Caps = ReturnType<CreateGateDeps['caps']>;

function gate({ maxUsdPerHour = null, maxUsdPerDay = null, ...over }: Partial<CreateGateDeps> & Partial<Caps> = {}): CreateGate {
  account.low = false;
  account.credit = 100;
  ending.clear();
  return new CreateGate({
    store,
    clock,
    log: silentLogger(),
    account,
    caps: () => ({ maxUsdPerHour, maxUsdPerDay }),
    recheckMs: 1000,
    specs: { get: () => ({ boot_timeout_s: 3600 }) as never },
    endRequested: (runId) => ending.has(runId),
    ...over,
  });
}

const input = (runId: string, n: number, dphTotal: number): CreateInput => ({
  runId,
  n,
  offerId: n,
  machineId: n,
  dphTotal,
  bidPrice: null,
  gpu: null,
});
/** Admits a create whose start journals its intent; records when it started. */
function admit(g: CreateGate, i: CreateInput, signal = new AbortController().signal) {
  const out = { startedAt: undefined as number | undefined, error: undefined as unknown };
  const p = g.admit(i, signal, () => {
    out.startedAt = clock.now();
    return journal.begin(i, clock.now());
  });
  p.catch((err: unknown) => (out.error = err));
  return out;
}
const events = (runId: string) => store.events.list(runId).map((e) => e.type);

describe('budget.max_usd_per_hour', () => {
  it('lets creates start while the live $/h plus theirs fits, in one step with their intent, and holds the next', async () => {
    const g = gate({ maxUsdPerHour: 1 });
    const first = admit(g, input('a', 1, 0.5));
    const second = admit(g, input('b', 1, 0.5));
    const third = admit(g, input('c', 1, 0.5));
    await clock.settle();
    expect([first.startedAt, second.startedAt, third.startedAt]).toEqual([clock.now(), clock.now(), undefined]);
    expect(g.waitingCount).toBe(1);
    expect(events('c')).toEqual(['create.waiting']);
    expect(store.events.list('c')[0]!.message).toMatch(
      /budget\.max_usd_per_hour \(\$1\/h\) would be passed: live instances and creates in flight bill \$1\.000\/h/,
    );
    // Re-checked every second for a while: still one event.
    await clock.advance(10_000);
    expect(events('c')).toEqual(['create.waiting']);
    // Run a's create made nothing: its $/h is freed.
    journal.notCreated('a', 1, 'offer_gone', 'gone');
    g.wake();
    await clock.settle();
    expect(third.startedAt).toBe(clock.now());
    expect(events('c')).toEqual(['create.waiting', 'create.resumed']);
  });

  it('frees the $/h of an instance once its destroy is confirmed, never before', async () => {
    const g = gate({ maxUsdPerHour: 1 });
    journal.begin(input('old', 1, 0.8), 0);
    journal.adopt('old', 1, 900, 0);
    const next = admit(g, input('a', 1, 0.5));
    await clock.advance(5_000);
    expect(next.startedAt).toBeUndefined();
    store.attempts.setOutcome('old', 1, 'cancelled', null, clock.now()); // ended, destroy not yet confirmed
    await clock.advance(5_000);
    expect(next.startedAt).toBeUndefined();
    journal.record('old', { type: 'destroy.confirmed', n: 1, instanceId: 900 }, clock.now());
    g.wake();
    await clock.settle();
    expect(next.startedAt).toBe(clock.now());
  });
});

describe('budget.max_usd_per_day', () => {
  it('holds creates while the last 24 h plus this boot cost more than the cap, and lets them go as that spend leaves the window', async () => {
    const g = gate({ maxUsdPerDay: 1.5, recheckMs: 60_000 });
    const t0 = clock.now();
    journal.begin(input('old', 1, 1), t0);
    journal.adopt('old', 1, 900, t0);
    journal.record('old', { type: 'destroy.confirmed', n: 1, instanceId: 900 }, t0 + H); // $1 spent
    await clock.advance(H);
    // $1 in the last 24 h, and booting at $1/h for boot_timeout_s 3600 s would add $1.
    const next = admit(g, input('a', 1, 1));
    await clock.settle();
    expect(next.startedAt).toBeUndefined();
    expect(store.events.list('a')[0]!.message).toMatch(
      /budget\.max_usd_per_day \(\$1\.50\) would be passed: the last 24 h cost \$1\.00 \(what instances still booting may cost included\), and booting this offer \(3600 s at \$1\.000\/h\) \$1\.00/,
    );
    // Half of that hour has left the window 24.5 h after it began: $0.5 + $1 fits.
    await clock.advance(23.5 * H - 60_000);
    expect(next.startedAt).toBeUndefined();
    await clock.advance(60_000);
    expect(next.startedAt).toBe(t0 + 24.5 * H);
  });
});

describe("a host's price increase (accept_within_cap)", () => {
  it('is refused when what bills now plus the increase passes budget.max_usd_per_hour, or the last 24 h plus a day of it passes max_usd_per_day', async () => {
    const t0 = clock.now();
    journal.begin(input('old', 1, 0.5), t0);
    journal.adopt('old', 1, 900, t0);
    await clock.advance(2 * H); // $1 spent so far, $0.5/h billing now
    expect(gate({ maxUsdPerHour: 1 }).increaseHold(0.5)).toBeNull();
    expect(gate({ maxUsdPerHour: 1 }).increaseHold(0.6)).toMatch(
      /budget\.max_usd_per_hour \(\$1\/h\) would be passed: live instances bill \$0\.500\/h, and this increase adds \$0\.600\/h/,
    );
    // $1 in the last 24 h; $0.1/h more for a day is $2.40.
    expect(gate({ maxUsdPerDay: 3.4 }).increaseHold(0.1)).toBeNull();
    expect(gate({ maxUsdPerDay: 3.3 }).increaseHold(0.1)).toMatch(
      /budget\.max_usd_per_day \(\$3\.30\) would be passed: the last 24 h cost \$1\.00, and this increase adds \$2\.40 over the next 24 h \(\$0\.100\/h\)/,
    );
    expect(gate().increaseHold(100)).toBeNull();
  });
});

describe('budget.max_usd_per_day, creates one after another', () => {
  it('counts the boots under way: of two creates whose boots each fit the cap alone, the second waits', async () => {
    const g = gate({ maxUsdPerDay: 1.5, recheckMs: 60_000 });
    // Each boot may cost $1 (boot_timeout_s 3600 at $1/h); nothing spent yet.
    const first = admit(g, input('a', 1, 1));
    const second = admit(g, input('b', 1, 1));
    await clock.settle();
    expect(first.startedAt).toBe(clock.now());
    expect(second.startedAt).toBeUndefined();
    // Once the first runs, only what it billed counts: $0.25 after 15 min, + $1 fits.
    await clock.advance(15 * 60_000);
    journal.adopt('a', 1, 901, clock.now() - 15 * 60_000);
    journal.record(
      'a',
      {
        type: 'attempt.status',
        n: 1,
        status: {
          id: 901,
          actual_status: 'running',
          intended_status: null,
          cur_state: null,
          status_msg: null,
          ssh_host: null,
          ssh_port: null,
          dph_total: 1,
        },
      },
      clock.now(),
    );
    await clock.advance(60_000);
    expect(second.startedAt).toBe(clock.now());
  });
});

describe('account.min_credit_usd', () => {
  it('holds every create while the credit is low and lets them go when it is back', async () => {
    const g = gate();
    account.low = true;
    account.credit = 0.5;
    const a = admit(g, input('a', 1, 0.1));
    const b = admit(g, input('b', 1, 0.1));
    await clock.advance(3_000);
    expect([a.startedAt, b.startedAt]).toEqual([undefined, undefined]);
    expect(store.events.list('a')[0]!.message).toMatch(/credit \(\$0\.50\) is below account\.min_credit_usd \(\$1\.00\)/);
    account.low = false;
    account.credit = 20;
    g.wake();
    await clock.settle();
    expect([a.startedAt, b.startedAt]).toEqual([clock.now(), clock.now()]);
  });
});

describe('a daemon just started, its credit not read yet', () => {
  it('holds every create until the first read answers: below the floor they wait on, saying why; above it they go', async () => {
    for (const credit of [0.5, 50]) {
      let answer!: (u: { id: number; credit: number }) => void;
      const watch = new AccountWatch({
        client: { currentUser: () => new Promise((resolve) => (answer = resolve)) },
        clock,
        log: silentLogger(),
        minCreditUsd: 1,
        intervalMs: 300_000,
        heldIntervalMs: 30_000,
        onChange: () => g.wake(),
      });
      const g = gate({ account: watch });
      const run = credit < 1 ? 'a' : 'b';
      watch.start();
      const a = admit(g, input(run, 1, 0.1));
      await clock.advance(10_000);
      // The read has not answered: nothing starts, and the run says why.
      expect(a.startedAt).toBeUndefined();
      expect(store.events.list(run).map((e) => e.message)).toEqual([
        'attempt #1: the create on offer 1 waits: the account credit has not been read yet (users/current): no create starts until it is',
      ]);
      answer({ id: 1, credit });
      await clock.settle();
      if (credit < 1) {
        expect(a.startedAt).toBeUndefined();
        expect(store.events.list(run).at(-1)!.message).toMatch(/credit \(\$0\.50\) is below account\.min_credit_usd \(\$1\.00\)/);
      } else {
        expect(a.startedAt).toBe(clock.now());
        expect(events(run)).toEqual(['create.waiting', 'create.resumed']);
      }
      watch.stop();
      g.stop();
    }
  });
});

describe('the credit while a create waits for it', () => {
  it('is read every held_check_interval_s (30 s) instead of check_interval_s (300 s), so a top-up resumes the create within a minute', async () => {
    let credit = 0.5;
    const readAt: number[] = [];
    const watch = new AccountWatch({
      client: {
        currentUser: async () => {
          readAt.push(clock.now());
          return { id: 1, credit };
        },
      },
      clock,
      log: silentLogger(),
      minCreditUsd: 1,
      intervalMs: 300_000,
      heldIntervalMs: 30_000,
      onChange: () => g.wake(),
    });
    const g = gate({ account: watch, recheckMs: 10_000 });
    const t0 = clock.now();
    watch.accept({ id: 1, credit });
    watch.start();
    // Nothing waits yet: the slow cadence.
    await clock.advance(300_000);
    expect(readAt).toEqual([t0 + 300_000]);
    const a = admit(g, input('a', 1, 0.1));
    await clock.advance(45_000);
    expect(readAt.slice(1)).toEqual([t0 + 330_000]);
    expect(a.startedAt).toBeUndefined();
    // The top-up: the next read (30 s after the last) sees it and the create goes ahead.
    credit = 50;
    await clock.advance(15_000);
    expect(a.startedAt).toBe(t0 + 360_000);
    expect(events('a')).toEqual(['create.waiting', 'create.resumed']);
    // Nobody waits any more: back to one read every 300 s.
    await clock.advance(600_000);
    expect(readAt.slice(2)).toEqual([t0 + 360_000, t0 + 660_000, t0 + 960_000]);
    watch.stop();
  });

  it('is not read faster while creates wait only for a cap', async () => {
    const readAt: number[] = [];
    const watch = new AccountWatch({
      client: {
        currentUser: async () => {
          readAt.push(clock.now());
          return { id: 1, credit: 50 };
        },
      },
      clock,
      log: silentLogger(),
      minCreditUsd: 1,
      intervalMs: 300_000,
      heldIntervalMs: 30_000,
      onChange: () => g.wake(),
    });
    const g = gate({ account: watch, maxUsdPerHour: 0.05 });
    const t0 = clock.now();
    watch.start();
    const a = admit(g, input('a', 1, 0.1));
    await clock.advance(299_000);
    // The first read at start, then none sooner than the interval.
    expect([readAt, a.startedAt, g.waitingCount]).toEqual([[t0], undefined, 1]);
    watch.stop();
  });
});

describe('a wait that ends without a create', () => {
  it('gives up when the run is cancelled, expired or past its deadline meanwhile, and when its actor is stopped', async () => {
    const g = gate({ maxUsdPerHour: 0.1 });
    const cancelled = admit(g, input('a', 1, 0.5));
    const controller = new AbortController();
    const stopped = admit(g, input('b', 1, 0.5), controller.signal);
    await clock.settle();
    ending.add('a');
    g.wake();
    controller.abort(new Error('actor stopped'));
    await clock.settle();
    expect(cancelled.error).toBeInstanceOf(CreateAbandoned);
    expect((cancelled.error as Error).message).toMatch(/attempt #1 did not start: the run ended while its create waited/);
    expect((stopped.error as Error).message).toBe('actor stopped');
    expect([cancelled.startedAt, stopped.startedAt]).toEqual([undefined, undefined]);
    expect(g.waitingCount).toBe(0);
    expect(store.attempts.forRun('a')).toEqual([]);
  });
});
