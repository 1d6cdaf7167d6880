// The mark of an ended run whose outputs were not all taken (issue #48 item 3): its cause and fix,
// from the last attempt that had an instance and that attempt's manifest.
import { describe, expect, it } from 'vitest';
import { outputsMissing, specNamesOutputs } from '../../../../src/daemon/runs/outputs-missing.js';

const run = (state: string, more: Partial<{ ended: boolean; outputs: boolean }> = {}) => ({
  id: 'r1',
  state,
  ended: true,
  outputs: true,
  ...more,
});
const attempt = (
  n: number,
  more: Partial<{ instance_id: number | null; outcome: string; detail: string; ready_at: number | null }> = {},
) => ({
  n,
  instance_id: 100 + n,
  outcome: 'succeeded',
  detail: null,
  ready_at: 1,
  ...more,
});

describe('outputsMissing', () => {
  it('is null for a live run, a run without outputs, one that never rented, or outputs kept or copied', () => {
    expect(outputsMissing(run('running', { ended: false }), [attempt(1)], [])).toBeNull();
    expect(outputsMissing(run('succeeded', { outputs: false }), [attempt(1)], [])).toBeNull();
    expect(outputsMissing(run('failed'), [attempt(1, { instance_id: null })], [])).toBeNull();
    expect(outputsMissing(run('succeeded'), [attempt(1)], [{ attempt: 1, state: 'kept', detail: null }])).toBeNull();
    expect(outputsMissing(run('succeeded'), [attempt(1)], [{ attempt: 1, state: 'copied', detail: 'my-s3' }])).toBeNull();
  });

  it('judges the last attempt with an instance: an earlier one kept is not enough', () => {
    const m = outputsMissing(
      run('succeeded'),
      [attempt(1, { outcome: 'task_failed' }), attempt(2)],
      [{ attempt: 1, state: 'kept', detail: null }],
    );
    expect(m).toMatchObject({ attempt: 2, state: 'not_taken' });
  });

  it('a daemon away at the task end: none came, the instance stopped; the fix says keep it running or use outputs.cloud', () => {
    const detail = 'the instance was stopped (by its task) before berth could log in to take them: nothing to download from';
    expect(outputsMissing(run('succeeded'), [attempt(1)], [{ attempt: 1, state: 'failed', detail }])).toEqual({
      attempt: 1,
      state: 'failed',
      cause: `none came from attempt 1: ${detail}`,
      fix: expect.stringMatching(/keep the daemon running.*outputs\.cloud/),
    });
  });

  it('partial at the size cap names the cap; cancelled without them names --no-outputs; an unfinished transfer says so', () => {
    expect(
      outputsMissing(
        run('succeeded'),
        [attempt(1)],
        [{ attempt: 1, state: 'partial', detail: 'files.outputs_max_mb reached: x kept in part' }],
      ),
    ).toMatchObject({ state: 'partial', fix: expect.stringMatching(/outputs_max_mb/) });
    expect(outputsMissing(run('cancelled'), [attempt(1, { outcome: 'cancelled' })], [])).toMatchObject({
      state: 'not_taken',
      cause: expect.stringMatching(/--no-outputs/),
    });
    expect(outputsMissing(run('failed'), [attempt(1)], [{ attempt: 1, state: 'collecting', detail: null }])).toMatchObject({
      state: 'unfinished',
    });
    expect(outputsMissing(run('cancelled'), [attempt(1, { outcome: 'cancelled', ready_at: null })], [])).toMatchObject({
      cause: expect.stringMatching(/before its task ran/),
    });
  });
});

describe('specNamesOutputs', () => {
  it('reads both forms of outputs', () => {
    expect(specNamesOutputs({ outputs: ['out/'] })).toBe(true);
    expect(specNamesOutputs({ outputs: { paths: ['out/'], cloud: {} } })).toBe(true);
    expect(specNamesOutputs({ outputs: [] })).toBe(false);
    expect(specNamesOutputs({})).toBe(false);
  });
});
