// The limits a run's machine gets from its job spec and the daemon's configuration (issue #12's
// fields: readiness and the bid policy).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { runLimits } from '../../../src/daemon/runs/run-driver.js';
import { parseJobSpec, resolveJobSpec } from '../../../src/job-spec/validate.js';

const { config } = loadConfig({ overrides: { readiness: { ssh_timeout_s: 90 }, runs: { rebid_wait_s: 12 } } }, {});
const limitsOf = (spec: Record<string, unknown>) =>
  runLimits(resolveJobSpec(parseJobSpec({ name: 'j', image: 'i', max_price_per_hour: 0.8, ...spec }), config.runs), config);

describe('runLimits', () => {
  it('waits for SSH by default, for readiness.ssh_timeout_s, and by status when the spec says so', () => {
    expect(limitsOf({})).toMatchObject({ readyWhen: 'ssh', sshTimeoutS: 90, bid: null, maxPricePerHour: 0.8 });
    expect(limitsOf({ ready_when: 'status' }).readyWhen).toBe('status');
  });

  it('reads a spec stored before ready_when existed as waiting for SSH', () => {
    const stored = resolveJobSpec(parseJobSpec({ name: 'j', image: 'i', max_price_per_hour: 0.8 }), config.runs);
    delete (stored as { ready_when?: string }).ready_when;
    expect(runLimits(stored, config).readyWhen).toBe('ssh');
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
