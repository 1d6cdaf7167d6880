// An instance its task stopped before its outputs were taken, started again (issue #48 item 2):
// ready once a list shows it running and a login works; a start that leaves it stopped is sent
// again, the user told once that it is kept, until files.stopped_keep_s. Fake time throughout.
import { describe, expect, it } from 'vitest';
import type { Instance } from '../../../../src/client/types.js';
import { startStopped, type StoppedStartDeps } from '../../../../src/daemon/task-end/stopped-start.js';
import type { FileShells } from '../../../../src/daemon/task-end/task-shells.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

function world(clock: FakeClock, opts: { runsAfterStarts?: number; loginFails?: number } = {}) {
  const starts: number[] = [];
  const kept: string[] = [];
  let logins = 0;
  const shells = {
    open: async () => {
      logins++;
      if (logins <= (opts.loginFails ?? 0)) throw new Error('connection refused');
      return { close: () => {} };
    },
  } as unknown as FileShells;
  const deps: StoppedStartDeps = {
    clock,
    start: async () => {
      starts.push(clock.now());
    },
    lookAt: async (id) =>
      ({ id, actual_status: starts.length >= (opts.runsAfterStarts ?? 1) ? 'running' : 'stopped' }) as unknown as Instance,
    shells,
    lookEveryMs: 10_000,
    retryEveryMs: 60_000,
    keptStopped: (why) => kept.push(why),
  };
  return { deps, starts, kept };
}

describe('startStopped', () => {
  it('starts the instance and answers once it runs and berth can log in', async () => {
    const clock = new FakeClock();
    const w = world(clock, { loginFails: 1 });
    const done = startStopped(w.deps, { runId: 'r1', n: 1, instanceId: 7, keepUntil: clock.now() + 600_000 }, new AbortController().signal);
    await clock.advance(10_000);
    expect(await done).toBeNull();
    expect(w.starts).toHaveLength(1);
    expect(w.kept).toEqual([]);
  });

  it('a start that leaves it stopped is sent again every minute, the user told once, until the keep ends', async () => {
    const clock = new FakeClock();
    const w = world(clock, { runsAfterStarts: 99 });
    const t0 = clock.now();
    let answer: string | null | undefined;
    void startStopped(w.deps, { runId: 'r1', n: 1, instanceId: 7, keepUntil: t0 + 180_000 }, new AbortController().signal).then(
      (a) => (answer = a),
    );
    await clock.advance(0);
    expect(w.kept).toEqual(['it stayed stopped after a start (queued, or the machine has no free GPU)']);
    await clock.advance(180_000);
    expect(answer).toBe('it stayed stopped after a start (queued, or the machine has no free GPU), until files.stopped_keep_s passed');
    expect(w.starts.map((s) => s - t0)).toEqual([0, 60_000, 120_000]);
    expect(w.kept).toHaveLength(1);
  });

  it('a start that works on a later try answers then', async () => {
    const clock = new FakeClock();
    const w = world(clock, { runsAfterStarts: 2 });
    let answer: string | null | undefined;
    void startStopped(w.deps, { runId: 'r1', n: 1, instanceId: 7, keepUntil: clock.now() + 600_000 }, new AbortController().signal).then(
      (a) => (answer = a),
    );
    await clock.advance(60_000);
    expect(answer).toBeNull();
    expect(w.starts).toHaveLength(2);
    expect(w.kept).toHaveLength(1);
  });
});
