// What an attempt and a run cost and how long they ran, from attempts rows: pure arithmetic on
// the times the journal records, so every case is exact.
import { describe, expect, it } from 'vitest';
import { attemptPrice, attemptSpend, costView, runMoney, type SpendRow } from '../../../src/store/spend.js';

const H = 3_600_000;

function row(over: Partial<SpendRow> = {}): SpendRow {
  return {
    create_state: 'created',
    started_at: 0,
    instance_created_at: 0,
    destroy_confirmed_at: null,
    dph_total: 1,
    usd_before: 0,
    dph_since: null,
    first_running_at: null,
    ended_at: null,
    ...over,
  };
}

describe('attemptSpend', () => {
  it('bills the price from the create to the confirmed destroy, or to now', () => {
    expect(attemptSpend(row({ destroy_confirmed_at: 2 * H }), null, 10 * H)).toBeCloseTo(2);
    expect(attemptSpend(row(), null, 3 * H)).toBeCloseTo(3);
    expect(attemptPrice(row(), null)).toBe(1);
    expect(attemptPrice(row({ destroy_confirmed_at: 2 * H }), null)).toBe(0);
  });

  it('counts a create in flight from its intent, and nothing for a create that made no instance', () => {
    expect(attemptSpend(row({ create_state: 'intent', instance_created_at: null, started_at: H }), null, 2 * H)).toBeCloseTo(1);
    expect(attemptSpend(row({ create_state: 'offer_gone', instance_created_at: null }), null, 5 * H)).toBe(0);
    expect(attemptSpend(row({ create_state: 'failed', instance_created_at: null }), null, 5 * H)).toBe(0);
    expect(attemptPrice(row({ create_state: 'failed', instance_created_at: null }), null)).toBe(0);
  });

  it('stops at the end of its run when no destroy was ever confirmed (the sweep destroys what an ended run left)', () => {
    expect(attemptSpend(row(), 4 * H, 10 * H)).toBeCloseTo(4);
    expect(attemptPrice(row(), 4 * H)).toBe(0);
  });

  it('keeps what accrued at an earlier price and bills the new one from its change', () => {
    // $1/h for 2 h, then $3/h from 2 h on: at 3 h, 2 + 3.
    const a = row({ dph_total: 3, usd_before: 2, dph_since: 2 * H });
    expect(attemptSpend(a, null, 3 * H)).toBeCloseTo(5);
    // A window from 1 h: half of the earlier $2 (spread over 0..2 h) and the $3 after.
    expect(attemptSpend(a, null, 3 * H, 1 * H)).toBeCloseTo(4);
    // A window from 2.5 h: only half an hour at $3.
    expect(attemptSpend(a, null, 3 * H, 2.5 * H)).toBeCloseTo(1.5);
  });

  it('cuts a window: only what billed after its start counts', () => {
    expect(attemptSpend(row({ destroy_confirmed_at: 4 * H }), null, 10 * H, 3 * H)).toBeCloseTo(1);
    expect(attemptSpend(row({ destroy_confirmed_at: 4 * H }), null, 10 * H, 5 * H)).toBe(0);
  });
});

describe('runMoney', () => {
  it('sums every attempt, failed ones too, and the runtime of each from running to its end', () => {
    const attempts = [
      // Failed after 30 min billed, 10 min of it running.
      row({ destroy_confirmed_at: 0.5 * H, first_running_at: 0.3 * H, ended_at: 0.5 * H, dph_total: 2 }),
      // Made nothing.
      row({ create_state: 'offer_gone', instance_created_at: null, started_at: 0.5 * H }),
      // Running since 1 h, at $1/h, made at 0.6 h.
      row({ instance_created_at: 0.6 * H, started_at: 0.6 * H, first_running_at: 1 * H }),
    ];
    const m = runMoney(attempts, null, 2 * H);
    expect(m.usd).toBeCloseTo(1 + 1.4);
    expect(m.usdPerHour).toBe(1);
    expect(m.runtimeMs).toBe(0.2 * H + 1 * H);
    expect(m.runningNow).toBe(true);
    expect(costView(attempts, null, 2 * H)).toEqual({ usd: 2.4, usd_per_hour: 1 });
  });

  it('reads an ended run as billing nothing and running no more', () => {
    const attempts = [row({ destroy_confirmed_at: H, first_running_at: 0.5 * H, ended_at: H })];
    const m = runMoney(attempts, H, 5 * H);
    expect(m).toEqual({ usd: 1, usdPerHour: 0, runtimeMs: 0.5 * H, runningNow: false });
  });
});
