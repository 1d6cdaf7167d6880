// Idle autostop's reading of gpu_util (issue #30, case 2): the service's -1 means "unknown" and
// never starts an idle stretch, whatever reaches the watch; a real low figure does.
import { describe, expect, it } from 'vitest';
import type { Instance } from '../../../../src/client/types.js';
import type { RunError } from '../../../../src/errors.js';
import { IdleWatch } from '../../../../src/daemon/task-end/idle-watch.js';

const spec = { timeoutS: 60, gpuUtilPct: 5 };
const running = (gpu_util: number | null): Instance => ({ id: 7, label: 'berth:s:r:1', machine_id: 1, actual_status: 'running', gpu_util });

function watch() {
  const expired: Array<[string, RunError]> = [];
  const w = new IdleWatch({ warnBeforeMs: 10_000, warn: () => undefined, expire: (runId, reason) => expired.push([runId, reason]) });
  return { w, expired };
}

describe('idle watch', () => {
  it('never expires a run whose host reports gpu_util -1 (unknown), however long', () => {
    const { w, expired } = watch();
    for (let t = 0; t <= 600_000; t += 10_000) w.observe('r1', spec, running(-1), t);
    expect(expired).toEqual([]);
  });

  it('a -1 between idle readings ends the stretch instead of extending it', () => {
    const { w, expired } = watch();
    w.observe('r1', spec, running(0.4), 0);
    w.observe('r1', spec, running(-1), 30_000);
    w.observe('r1', spec, running(0.4), 40_000);
    w.observe('r1', spec, running(0.4), 90_000);
    expect(expired).toEqual([]);
    w.observe('r1', spec, running(0.4), 100_000);
    expect(expired.map(([id, e]) => [id, e.kind])).toEqual([['r1', 'idle']]);
  });
});
