// The limits a run's machine gets from its job spec and the daemon's configuration (issue #12's
// fields: readiness and the bid policy).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../../src/config/load.js';
import { runLimits } from '../../../../src/daemon/runs/run-limits.js';
import { parseJobSpec } from '../../../../src/job-spec/validate.js';
import { planRun, readStoredPlan, storedSpecText } from '../../../../src/job-spec/run-plan.js';

const { config } = loadConfig({ overrides: { readiness: { ssh_timeout_s: 90 }, runs: { rebid_wait_s: 12 } } }, {});
const limitsOf = (spec: Record<string, unknown>) =>
  runLimits(planRun(parseJobSpec({ name: 'j', image: 'i', max_price_per_hour: 0.8, ...spec }), config.runs), config);

describe('runLimits', () => {
  it('waits for SSH by default, for readiness.ssh_timeout_s, and by status when the spec says so', () => {
    expect(limitsOf({})).toMatchObject({ readyWhen: 'ssh', sshTimeoutS: 90, bid: null, maxPricePerHour: 0.8 });
    expect(limitsOf({ ready_when: 'status' }).readyWhen).toBe('status');
  });

  it('reads a spec stored before ready_when existed as waiting for SSH', () => {
    // As a version-1 row holds it: the resolved spec without a version, and without ready_when.
    const {
      berth_spec_version: _v,
      ready_when: _r,
      ...old
    } = JSON.parse(storedSpecText(planRun(parseJobSpec({ name: 'j', image: 'i', max_price_per_hour: 0.8 }), config.runs))) as Record<
      string,
      unknown
    >;
    expect(runLimits(readStoredPlan(JSON.stringify(old)), config).readyWhen).toBe('ssh');
  });

  it('builds the bid policy of an interruptible run: its price, step and outbid policy, with the defaults', () => {
    const bid = { search: { type: 'bid' } };
    expect(limitsOf({ ...bid, bid_price: 'min' }).bid).toEqual({ price: 'min', stepPct: 10, onOutbid: 'rebid', rebidWaitS: 12 });
    expect(limitsOf({ ...bid, bid_price: 0.3, bid_step_pct: 50, on_outbid: 'on_demand' }).bid).toEqual({
      price: 0.3,
      stepPct: 50,
      onOutbid: 'on_demand',
      rebidWaitS: 12,
    });
  });
});
