// A cancel of a run nobody holds, on a store several daemons share: the cancel is stored before
// the placement takes the run, so a lease lost while taking it (the daemon's own renewal late under
// load: chaos-pg once answered the user's cancel with a 500) leaves the run to the next daemon that
// takes it, and the cancel is still answered.
import { describe, expect, it, vi } from 'vitest';
import { LeaseLostError } from '../../../../src/errors.js';
import { SharedPlacement, type SharedPlacementDeps } from '../../../../src/daemon/runs/shared-placement.js';
import type { DrivenRuns } from '../../../../src/daemon/runs/run-placement.js';
import type { RunRow } from '../../../../src/store/index.js';

const row = { id: 'runaaaaaaaaa', ended_at: null, cancel_requested_at: 1, spec_json: '{}' } as unknown as RunRow;

function placement(take: () => boolean) {
  const runs = { has: () => false, open: () => true, count: () => 0 } as unknown as DrivenRuns;
  const info = vi.fn();
  const deps = {
    store: { runs: { get: () => ({ ...row, ended_at: 1 }) } },
    log: { info, warn: vi.fn() },
    ownership: { take, release: vi.fn() },
  } as unknown as SharedPlacementDeps;
  return { p: new SharedPlacement(runs, deps), info };
}

describe('SharedPlacement.cancelled', () => {
  it('answers a cancel although the lease was lost while taking the run, and says who ends it', () => {
    const { p, info } = placement(() => {
      throw new LeaseLostError(row.id);
    });
    expect(() => p.cancelled(row)).not.toThrow();
    expect(info).toHaveBeenCalledWith({ runId: row.id }, expect.stringContaining('the daemon that takes it next ends it'));
  });

  it('lets any other failure through (the store failing is the caller’s to answer)', () => {
    const { p } = placement(() => {
      throw new Error('disk full');
    });
    expect(() => p.cancelled(row)).toThrow('disk full');
  });
});
