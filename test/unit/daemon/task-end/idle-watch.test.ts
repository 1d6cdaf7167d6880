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
    w.observe('r1', spec, running(0.004), 0);
    w.observe('r1', spec, running(-1), 30_000);
    w.observe('r1', spec, running(0.004), 40_000);
    w.observe('r1', spec, running(0.004), 90_000);
    expect(expired).toEqual([]);
    w.observe('r1', spec, running(0.004), 100_000);
    expect(expired.map(([id, e]) => [id, e.kind])).toEqual([['r1', 'idle']]);
  });

  it('a busy GPU reporting its utilisation as a fraction (0.97, as show_instance.yaml types it) is never taken for idle', () => {
    const { w, expired } = watch();
    for (let t = 0; t <= 600_000; t += 10_000) w.observe('r1', spec, running(0.97), t);
    expect(expired).toEqual([]);
  });

  it('a figure idle in both readings (0, or 0.004: 0.4% of a fraction) expires after idle_timeout_s', () => {
    for (const util of [0, 0.004]) {
      const { w, expired } = watch();
      w.observe('r1', spec, running(util), 0);
      w.observe('r1', spec, running(util), 59_000);
      expect(expired).toEqual([]);
      w.observe('r1', spec, running(util), 60_000);
      expect(expired.map(([id, e]) => [id, e.kind])).toEqual([['r1', 'idle']]);
    }
  });
});
