// The price increase watch on fake time with a scripted client: what a raise would bill, which
// increases are rejected or accepted under each policy, that the decision is on record before the
// answer is sent, that instances no run holds are left alone, and that nothing is read while no
// run holds an instance.
import { describe, expect, it } from 'vitest';
import type { PendingPriceIncrease } from '../../../../src/client/types.js';
import {
  decide,
  priceAfter,
  PriceIncreaseWatch,
  type Holder,
  type PriceIncreasePolicy,
} from '../../../../src/daemon/money/price-increases.js';
import { BerthError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logger.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const row = (id: number, contract: number, oldDph: number, newDph: number): PendingPriceIncrease => ({
  pending_price_increase_id: id,
  contract_id: contract,
  old_gpu_costpersec: oldDph / 3600,
  new_gpu_costpersec: newDph / 3600,
  old_disk_ram_costpersec: null,
  new_disk_ram_costpersec: null,
});

function watch(
  policy: PriceIncreasePolicy,
  rows: PendingPriceIncrease[],
  holders: Map<number, Holder>,
  failNote = false,
  daemonCapHold: (extra: number) => string | null = () => null,
) {
  const clock = new FakeClock();
  const log: string[] = [];
  let reads = 0;
  const w = new PriceIncreaseWatch({
    client: {
      pendingPriceIncreases: async () => {
        reads++;
        log.push('read');
        return { rows, truncated: false, malformed: 0 };
      },
      answerPriceIncrease: async (id, answer) => {
        log.push(`${answer} ${id}`);
        return 'done';
      },
    },
    clock,
    log: silentLogger(),
    policy,
    intervalMs: 60_000,
    holders: () => holders,
    daemonCapHold,
    note: (runId, type, message) => {
      if (failNote) throw new BerthError('store', 'database is locked');
      log.push(`note ${runId} ${type}: ${message}`);
    },
  });
  return { w, clock, log, reads: () => reads };
}

describe('priceAfter and decide', () => {
  it('moves the price by the GPU and disk/RAM deltas (null: unchanged) and by a rising platform fee', () => {
    expect(priceAfter(row(1, 5, 0.4, 0.6), 0.45)).toBeCloseTo(0.65, 9);
    expect(
      priceAfter({ ...row(1, 5, 0.4, 0.4), old_disk_ram_costpersec: 0.05 / 3600, new_disk_ram_costpersec: 0.1 / 3600 }, 0.45),
    ).toBeCloseTo(0.5, 9);
    expect(priceAfter({ ...row(1, 5, 0.4, 0.4), old_platform_fee: 0.1, new_platform_fee: 0.21 }, 1.1)).toBeCloseTo(1.21, 9);
    expect(priceAfter({ pending_price_increase_id: 1, contract_id: 5 }, 0.45)).toBe(0.45);
  });

  it('rejects past the cap under every policy; within it, rejects under "reject" and accepts under "accept_within_cap"', () => {
    const holder = { runId: 'r', maxPricePerHour: 1, dphTotal: 0.5 };
    expect(decide('accept_within_cap', 1.01, holder)).toMatchObject({
      answer: 'reject',
      why: expect.stringMatching(/would pass max_price_per_hour \(\$1\/h\)/),
    });
    expect(decide('reject', 1.01, holder).answer).toBe('reject');
    expect(decide('reject', 0.8, holder)).toMatchObject({ answer: 'reject', why: expect.stringMatching(/policy is "reject"/) });
    expect(decide('accept_within_cap', 1, holder)).toMatchObject({ answer: 'accept', why: expect.stringMatching(/stays within/) });
  });
});

describe('PriceIncreaseWatch', () => {
  it('answers each increase on a held instance once, its decision on record first, and leaves other instances alone', async () => {
    const holders = new Map<number, Holder>([
      [5, { runId: 'a', maxPricePerHour: 1, dphTotal: 0.5 }],
      [6, { runId: 'b', maxPricePerHour: 1, dphTotal: 0.5 }],
    ]);
    const t = watch('accept_within_cap', [row(11, 5, 0.45, 0.6), row(12, 6, 0.45, 1.2), row(13, 99, 0.1, 9)], holders);
    t.w.start();
    await t.clock.advance(60_000);
    expect(t.log).toEqual([
      'read',
      expect.stringMatching(
        /^note a price_increase.accepted: the host of instance 5 asks for a price increase \(11\): accepting it: \$0\.6500\/h/,
      ),
      'accept 11',
      expect.stringMatching(/^note b price_increase.rejected: .*\(12\): rejecting it: \$1\.2500\/h .* would pass max_price_per_hour/),
      'reject 12',
    ]);
    // Listed once more before the service drops them: not answered again.
    await t.clock.advance(60_000);
    expect(t.log.slice(5)).toEqual(['read']);
    t.w.stop();
  });

  it("rejects an increase within the run's cap that would pass budget.max_usd_per_hour", async () => {
    const holders = new Map<number, Holder>([[5, { runId: 'a', maxPricePerHour: 1, dphTotal: 0.5 }]]);
    const extras: number[] = [];
    const t = watch('accept_within_cap', [row(11, 5, 0.45, 0.6)], holders, false, (extra) => {
      extras.push(extra);
      return 'budget.max_usd_per_hour ($0.6/h) would be passed';
    });
    t.w.start();
    await t.clock.advance(60_000);
    expect(extras[0]).toBeCloseTo(0.15, 9);
    expect(t.log).toEqual(['read', expect.stringMatching(/rejecting it: \$0\.6500\/h .*budget\.max_usd_per_hour/), 'reject 11']);
    t.w.stop();
  });

  it('sends nothing when the decision cannot be recorded, and tries again at the next read', async () => {
    const holders = new Map<number, Holder>([[5, { runId: 'a', maxPricePerHour: 1, dphTotal: 0.5 }]]);
    const t = watch('reject', [row(11, 5, 0.45, 0.6)], holders, true);
    t.w.start();
    await t.clock.advance(120_000);
    expect(t.log).toEqual(['read', 'read']);
    t.w.stop();
  });

  it('reads nothing while no run holds an instance', async () => {
    const holders = new Map<number, Holder>();
    const t = watch('reject', [row(11, 5, 0.45, 0.6)], holders);
    t.w.start();
    await t.clock.advance(300_000);
    expect(t.reads()).toBe(0);
    holders.set(5, { runId: 'a', maxPricePerHour: 1, dphTotal: 0.5 });
    await t.clock.advance(60_000);
    expect(t.log).toEqual(['read', expect.stringMatching(/^note a price_increase.rejected/), 'reject 11']);
    t.w.stop();
  });
});
