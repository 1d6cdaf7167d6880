// How loud the daemon's log says an attempt ended (issue #50): an end the user asked for (its task
// succeeded, a cancel) is info; an end that went wrong is a warning.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RunEmitted } from '../../../../machines/run-machine.js';
import { recordEmitted } from '../../../../src/daemon/runs/event-log.js';
import type { ResolvedJobSpec } from '../../../../src/job-spec/schema.js';
import { openStore, type Store } from '../../../../src/store/index.js';

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-evlog-'));
  store = openStore({ home: dir, lock: false });
  store.runs.insert({ id: 'r1', name: 'a', specJson: '{}', createdAt: 1 });
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const ended = (outcome: Extract<RunEmitted, { type: 'attempt.ended' }>['outcome']) =>
  recordEmitted(
    store,
    { relax: [] } as unknown as ResolvedJobSpec,
    'r1',
    { type: 'attempt.ended', n: 1, offerId: 10, machineId: 1, instanceId: 100, outcome, detail: '' } as Extract<
      RunEmitted,
      { type: 'attempt.ended' }
    >,
    2,
  );

it('logs `attempt #1 ended: succeeded` at info, and a failed or lost attempt at warn', () => {
  expect(ended('succeeded')).toMatchObject({ message: 'attempt #1 ended: succeeded', level: 'info' });
  expect(ended('cancelled').level).toBe('info');
  for (const outcome of ['task_failed', 'lost', 'outbid', 'exit_unknown', 'create_failed'] as const)
    expect(ended(outcome).level).toBe('warn');
});
