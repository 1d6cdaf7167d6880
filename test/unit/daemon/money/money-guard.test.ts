// The money guard on fake time and a real store: when EXPIRE is sent for a budget and for a
// runtime, as prices and states change, after a restart, and which offers a budget can still pay to boot.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Candidate } from '../../../../machines/run-machine.js';
import type { RunError } from '../../../../machines/run-rules.js';
import { loadConfig } from '../../../../src/config/load.js';
import { AttemptJournal } from '../../../../src/daemon/runs/attempt-journal.js';
import { SoleOwner } from '../../../../src/daemon/cluster/run-ownership.js';
import { MoneyGuard } from '../../../../src/daemon/money/money-guard.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { planRun } from '../../../../src/job-spec/run-plan.js';
import type { RunPlan } from '../../../../src/job-spec/run-plan.js';
import { silentLogger } from '../../../../src/logger.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

let dir: string;
let store: Store;
let journal: AttemptJournal;
let clock: FakeClock;
let expired: Array<{ runId: string; reason: RunError; at: number }>;
let warnings: Array<{ runId: string; message: string; at: number }>;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-guard-'));
  store = openStore({ home: dir });
  journal = new AttemptJournal(store, new SoleOwner(store));
  clock = new FakeClock();
  expired = [];
  warnings = [];
});

/** What the supervisor does with a warning: once per run, as its log would record it. */
const warn = (runId: string, message: string) => {
  if (warnings.some((w) => w.runId === runId)) return false;
  warnings.push({ runId, message, at: clock.now() });
  return true;
};
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const { runs } = loadConfig({}, {}).config;
const specWith = (extra: Record<string, unknown>): RunPlan =>
  planRun(parseJobSpec({ name: 'm', image: 'x', max_price_per_hour: 10, boot_timeout_s: 10, ...extra }), runs);

/** $/h that bills $0.001 a second. */
const MILLI_PER_S = 3.6;

function guardFor(spec: RunPlan, leadMs = 1000, warnWith: typeof warn = warn): MoneyGuard {
  store.runs.insert({ id: 'r1', name: 'm', specJson: JSON.stringify(spec), createdAt: clock.now() });
  return new MoneyGuard({
    store,
    clock,
    log: silentLogger(),
    specs: new Map([['r1', spec]]),
    expire: (runId, reason) => expired.push({ runId, reason, at: clock.now() }) > 0,
    leadMs,
    warn: warnWith,
  });
}

/** Attempt n of r1 made an instance now, billed `dph`. */
function created(n: number, dph: number): void {
  journal.begin({ runId: 'r1', n, offerId: n, machineId: n * 10, dphTotal: dph }, clock.now());
  journal.adopt('r1', n, 500 + n, clock.now());
}
const status = (n: number, actual_status: string, dph: number) =>
  journal.record(
    'r1',
    {
      type: 'attempt.status',
      n,
      status: {
        id: 500 + n,
        actual_status,
        intended_status: null,
        cur_state: null,
        status_msg: null,
        ssh_host: null,
        ssh_port: null,
        dph_total: dph,
      },
    },
    clock.now(),
  );
const ended = (n: number) => {
  journal.record('r1', { type: 'destroy.confirmed', n, instanceId: 500 + n }, clock.now());
  journal.record(
    'r1',
    { type: 'attempt.ended', n, offerId: n, machineId: n * 10, instanceId: 500 + n, outcome: 'lost', detail: '' },
    clock.now(),
  );
};

describe('budget_usd', () => {
  it('warns once when 80% of the budget is spent, at that moment, before it expires', async () => {
    const guard = guardFor(specWith({ budget_usd: 0.01 }));
    created(1, MILLI_PER_S);
    guard.check('r1');
    const t0 = clock.now();
    await clock.advance(7_999);
    expect(warnings).toEqual([]);
    await clock.advance(1);
    // $0.008 of $0.01 after 8 s at $0.001/s.
    expect(warnings.map((w) => [w.at - t0, w.message])).toEqual([
      [8_000, expect.stringMatching(/^80% of budget_usd spent: \$0\.0080 of \$0\.0100; at \$3\.600\/h it is spent in about 0 min\.$/)],
    ]);
    guard.check('r1');
    await clock.advance(1_000);
    expect(warnings).toHaveLength(1);
    expect(expired.map((e) => e.at - t0)).toEqual([9_000]);
  });

  it('still expires the run when its warning cannot be stored, and tries the warning again', async () => {
    let refusals = 0;
    const refusing = (runId: string, message: string) => {
      if (refusals < 2) {
        refusals++;
        throw new Error('SQLITE_FULL: database or disk is full');
      }
      return warn(runId, message);
    };
    const guard = guardFor(specWith({ budget_usd: 0.01 }), 1000, refusing);
    created(1, MILLI_PER_S);
    guard.check('r1');
    const t0 = clock.now();
    await clock.advance(8_000);
    expect(refusals).toBe(1);
    guard.check('r1'); // the next check (a poll) tries the warning again
    await clock.advance(1_000);
    guard.check('r1');
    expect(warnings.map((w) => w.at - t0)).toEqual([9_000]);
    expect(expired.map((e) => e.at - t0)).toEqual([9_000]);
  });

  it('sends EXPIRE one poll interval before the budget would be reached at the current price, once', async () => {
    const guard = guardFor(specWith({ budget_usd: 0.01 }));
    created(1, MILLI_PER_S);
    guard.check('r1');
    const t0 = clock.now();
    await clock.advance(8_999);
    expect(expired).toEqual([]);
    // Spend 0.009 at 9 s, and the destroy's lead (1 s at $0.001/s) makes 0.01.
    await clock.advance(1);
    expect(expired.map((e) => [e.reason.kind, e.at - t0])).toEqual([['budget', 9_000]]);
    expect(expired[0]!.reason.message).toMatch(/budget_usd \(\$0\.0100\)/);
    guard.check('r1');
    await clock.advance(60_000);
    expect(expired).toHaveLength(1);
  });

  it('moves the moment when the price changes (a bid raised), counting the money at the old price', async () => {
    const guard = guardFor(specWith({ budget_usd: 0.01 }));
    const t0 = clock.now();
    created(1, MILLI_PER_S);
    guard.check('r1');
    await clock.advance(4_000);
    journal.record(
      'r1',
      { type: 'bid.raised', n: 1, instanceId: 501, price: 2 * MILLI_PER_S - 0.1, dphTotal: 2 * MILLI_PER_S },
      clock.now(),
    );
    guard.check('r1');
    // 0.004 spent; at $0.002/s, 0.004 + 0.002 × (t + 1 s lead) = 0.01 at t = 2 s.
    await clock.advance(3_000);
    expect(expired.map((e) => e.at - t0)).toEqual([6_000]);
  });

  it('counts every attempt, failed ones too, and carries on across a restart from the table alone', async () => {
    const spec = specWith({ budget_usd: 0.01 });
    let guard = guardFor(spec);
    const t0 = clock.now();
    created(1, MILLI_PER_S);
    status(1, 'loading', MILLI_PER_S);
    await clock.advance(3_000);
    ended(1);
    guard.check('r1');
    // No instance bills now: no timer, however long.
    await clock.advance(100_000);
    expect(expired).toEqual([]);
    created(2, MILLI_PER_S);
    guard.check('r1');
    guard.stop(); // the daemon dies
    await clock.advance(2_000);
    guard = new MoneyGuard({
      store,
      clock,
      log: silentLogger(),
      specs: { get: () => spec },
      expire: (runId, reason) => expired.push({ runId, reason, at: clock.now() }) > 0,
      leadMs: 1000,
      warn,
    });
    guard.check('r1');
    // 0.003 + 0.001 × (t - 103 s) + 0.001 lead = 0.01 at t = 109 s.
    await clock.advance(10_000);
    expect(expired.map((e) => e.at - t0)).toEqual([109_000]);
  });

  it('expires at once a run found past its budget (the daemon was down when it was reached)', async () => {
    const guard = guardFor(specWith({ budget_usd: 0.002 }));
    created(1, MILLI_PER_S);
    await clock.advance(5_000);
    guard.check('r1');
    expect(expired.map((e) => e.reason.kind)).toEqual(['budget']);
  });
});

describe('max_runtime_s', () => {
  it('counts only time running, across attempts, and expires when the total reaches the limit', async () => {
    const guard = guardFor(specWith({ max_runtime_s: 10 }));
    const t0 = clock.now();
    created(1, 1);
    await clock.advance(2_000);
    status(1, 'running', 1);
    guard.check('r1');
    await clock.advance(3_000);
    // Lost after 3 s running: the clock stops while the run searches again.
    ended(1);
    guard.check('r1');
    await clock.advance(20_000);
    expect(expired).toEqual([]);
    created(2, 1);
    await clock.advance(1_000);
    status(2, 'running', 1);
    guard.check('r1');
    await clock.advance(6_999);
    expect(expired).toEqual([]);
    await clock.advance(1);
    expect(expired.map((e) => [e.reason.kind, e.at - t0])).toEqual([['max_runtime', 33_000]]);
    expect(expired[0]!.reason.message).toMatch(/max_runtime_s \(10 s\)/);
  });
});

describe('an expiry the run could not take (issue #18 item 1)', () => {
  it('is delivered again every second until the run takes it, then never again', async () => {
    const spec = specWith({ max_runtime_s: 5 });
    store.runs.insert({ id: 'r1', name: 'm', specJson: JSON.stringify(spec), createdAt: clock.now() });
    const tries: number[] = [];
    let takes = false;
    const guard = new MoneyGuard({
      store,
      clock,
      log: silentLogger(),
      specs: { get: () => spec },
      // As the supervisor answers while the store refuses the write that would start a held run.
      expire: () => (tries.push(clock.now()), takes),
      leadMs: 1000,
      warn,
    });
    const t0 = clock.now();
    created(1, 1);
    status(1, 'running', 1);
    guard.check('r1');
    await clock.advance(7_000);
    expect(tries.map((t) => t - t0)).toEqual([5_000, 6_000, 7_000]);
    takes = true;
    await clock.advance(1_000);
    guard.check('r1'); // the run moved: a run that took its expiry is not told twice
    await clock.advance(10_000);
    expect(tries.map((t) => t - t0)).toEqual([5_000, 6_000, 7_000, 8_000]);
    guard.stop();
  });

  it('is delivered again when delivering it threw', async () => {
    const spec = specWith({ max_runtime_s: 1 });
    store.runs.insert({ id: 'r1', name: 'm', specJson: JSON.stringify(spec), createdAt: clock.now() });
    let calls = 0;
    const guard = new MoneyGuard({
      store,
      clock,
      log: silentLogger(),
      specs: { get: () => spec },
      expire: () => {
        if (++calls === 1) throw new Error('database is locked');
        return true;
      },
      leadMs: 1000,
      warn,
    });
    created(1, 1);
    status(1, 'running', 1);
    guard.check('r1');
    await clock.advance(5_000);
    expect(calls).toBe(2);
    guard.stop();
  });
});

describe('affordability of offers', () => {
  const c = (offerId: number, dphTotal: number): Candidate => ({ offerId, machineId: offerId * 10, dphTotal, minBid: null, diskDph: 0 });

  it('keeps the offers whose price over boot_timeout_s the rest of the budget pays, and says when none is', async () => {
    const guard = guardFor(specWith({ budget_usd: 0.01 }));
    created(1, MILLI_PER_S);
    await clock.advance(4_000);
    ended(1);
    // $0.006 left; boot_timeout_s 10: $3.6/h costs 0.01, $1.8/h 0.005.
    expect(guard.affordable('r1', [c(1, MILLI_PER_S), c(2, MILLI_PER_S / 2)])).toEqual({ candidates: [c(2, MILLI_PER_S / 2)] });
    const none = guard.affordable('r1', [c(1, MILLI_PER_S), c(3, 2 * MILLI_PER_S)]);
    expect(none.candidates).toEqual([]);
    expect(none.exhausted).toMatchObject({ kind: 'budget' });
    expect(none.exhausted!.message).toMatch(/\$0\.0060 left of budget_usd.*cheapest, \$3\.600\/h/);
    // Nothing matched at all: not a budget matter.
    expect(guard.affordable('r1', [])).toEqual({ candidates: [] });
  });

  it('refuses a raised bid the rest of the budget cannot pay to boot again, and passes one it can', async () => {
    const guard = guardFor(specWith({ budget_usd: 0.01 }));
    created(1, MILLI_PER_S);
    await clock.advance(4_000);
    // $0.006 left; boot_timeout_s 10: $3.6/h costs 0.01, $1.8/h 0.005.
    expect(guard.bidRefusal('r1', MILLI_PER_S / 2)).toBeNull();
    expect(guard.bidRefusal('r1', MILLI_PER_S)).toMatch(/\$0\.0060 left of budget_usd .* cannot pay for it to boot again/);
  });

  it('passes every offer of a run without a budget', () => {
    const guard = guardFor(specWith({}));
    expect(guard.affordable('r1', [c(1, 100)])).toEqual({ candidates: [c(1, 100)] });
    expect(guard.bidRefusal('r1', 100)).toBeNull();
  });
});
