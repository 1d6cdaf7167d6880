// Many tasks ending together against the real simulator (issue #39): the destroys that would wait
// for the destroy group go in the official client's bulk destroy (`DELETE /api/v0/instances/` with
// `instance_ids`, vast-cli `vastai/api/instances.py`), and nothing is left billing.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../../src/wire/control-api.js';
import { everyGroup, isEnded, isRunning, jobSpec, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
let gate: string | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
  if (gate) rmSync(gate, { recursive: true, force: true });
});

const RUNS = 8;

describe('many tasks ending together (#39)', () => {
  it('their destroys go in bulk calls once single destroys would wait; every run succeeds and nothing bills', async () => {
    world = await startWorld({
      sim: { logs: { upload_delay_s: 0 }, onstart_exec: { enabled: true, timeout_s: 60 } },
      config: {
        // One destroy a second: the second of eight ending together would wait for its own call.
        rate_limits: { ...everyGroup(50, 10), destroy: { per_s: 1, burst: 1 } },
      },
    });
    // The tasks run as real processes on this machine (as `nobody` when root): each waits for one
    // file, in /tmp itself (the test's own TMPDIR is private to this user).
    gate = mkdtempSync('/tmp/berth-gate-');
    chmodSync(gate, 0o755);
    const go = join(gate, 'go');
    const runs = await Promise.all(
      Array.from({ length: RUNS }, (_, i) =>
        submit(
          world!,
          jobSpec({ name: `bulk-${i}`, ready_when: 'status', run: `while [ ! -f ${go} ]; do sleep 0.05; done; echo ended ${i}` }),
        ),
      ),
    );
    await Promise.all(runs.map((r) => world!.waitFor(r.id, isRunning, 60_000)));
    writeFileSync(go, '');
    const done: Run[] = await Promise.all(runs.map((r) => world!.waitFor(r.id, isEnded, 60_000)));
    expect(done.map((r) => r.state)).toEqual(runs.map(() => 'succeeded'));

    const { requests } = world.sim.stats();
    const bulk = requests['DELETE /api/v0/instances/'] ?? 0;
    const single = requests['DELETE /api/v0/instances/{id}/'] ?? 0;
    expect(bulk).toBeGreaterThanOrEqual(1);
    expect(single).toBeLessThan(RUNS);
    // Every instance berth made is destroyed: none bills, none is left.
    expect(world.sim.billingNow()).toEqual([]);
    const ids = done.flatMap((r) => r.attempts.map((a) => a.instance_id!));
    expect(world.sim.history().filter((h) => ids.includes(h.id) && h.destroyed_at === null)).toEqual([]);
  }, 120_000);
});
