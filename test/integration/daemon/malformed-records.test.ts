// A daemon whose every search and instance list holds one malformed record (the simulator's
// `malformed_record` fault) still rents and runs: the bad offer is not tried, the bad instance
// record is kept with its unreadable field unknown, and /metrics counts both (issue #18 item 5).
import { afterEach, describe, expect, it } from 'vitest';
import { parsePrometheus, sampleValue } from '../../helpers/prometheus.js';
import { cancelAndCheckNothingBills, isRunning, jobSpec, offersInTryOrder, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

async function metrics(w: World) {
  const res = await fetch(`${w.daemon.url}/metrics`);
  return parsePrometheus(await res.text());
}

describe('one malformed record in every answer', () => {
  it('a run still reaches running on another offer, and /metrics counts what was left out or repaired', async () => {
    world = await startWorld({ seed: 31 });
    const spec = jobSpec();
    const [first] = await offersInTryOrder(world, spec);
    world.sim.setFaults({ malformed_record: 'number_as_string' });
    const run = await submit(world, spec);
    const running = await world.waitFor(run.id, isRunning, 20_000);
    // The cheapest offer came with "dph_total": "0.5": it was never tried.
    expect(running.attempts.map((a) => a.offer_id)).not.toContain(first!.id);
    expect(running.attempts.every((a) => a.outcome === 'running' || a.outcome === null)).toBe(true);
    const m = await metrics(world);
    expect(sampleValue(m, 'berth_service_malformed_records_total', { group: 'search', outcome: 'dropped' })).toBeGreaterThanOrEqual(1);
    expect(sampleValue(m, 'berth_service_malformed_records_total', { group: 'list', outcome: 'repaired' })).toBeGreaterThanOrEqual(1);
    await cancelAndCheckNothingBills(world, run.id);
  });
});
