// The CLI's exit code for a task's run at its end (issue #50): the task's own, as docs/cli.md's table says.
import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeForTask } from '../../../src/cli/exit-codes.js';

describe('exitCodeForTask', () => {
  it('is 0 when the task succeeded', () => {
    expect(exitCodeForTask({ state: 'succeeded', error: null })).toBe(0);
  });

  it("is the task's own code when it failed with one (a signal's 128 + N included)", () => {
    for (const code of [1, 3, 137, 255])
      expect(exitCodeForTask({ state: 'failed', error: { kind: 'task_failed', exit_code: code } })).toBe(code);
  });

  it("is berth's own when the run ended without a task's code", () => {
    expect(exitCodeForTask({ state: 'failed', error: { kind: 'exit_unknown' } })).toBe(EXIT.runEnded);
    expect(exitCodeForTask({ state: 'failed', error: { kind: 'no_offers' } })).toBe(EXIT.runEnded);
    expect(exitCodeForTask({ state: 'cancelled', error: null })).toBe(EXIT.runEnded);
    expect(exitCodeForTask({ state: 'expired', error: { kind: 'max_runtime' } })).toBe(EXIT.runEnded);
    expect(exitCodeForTask({ state: 'failed', error: { kind: 'auth' } })).toBe(EXIT.serviceAuth);
    // A code that is no process's (a store from elsewhere): never passed on as is.
    expect(exitCodeForTask({ state: 'failed', error: { kind: 'task_failed', exit_code: 0 } })).toBe(EXIT.runEnded);
    expect(exitCodeForTask({ state: 'failed', error: { kind: 'task_failed', exit_code: 300 } })).toBe(EXIT.runEnded);
  });
});
