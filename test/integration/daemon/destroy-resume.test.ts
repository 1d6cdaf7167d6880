// A run resumed while destroying destroys first (the chaos test's overspent budget run: a daemon
// killed every few seconds spent each life's first seconds asking for a failed container's log,
// and the instance billed 46 s past the decision to destroy it). The daemon that decided the destroy
// asked for the log; the one that resumes it asks nothing and destroys. In-process daemon, real
// SQLite file, the simulator.
import { afterEach, describe, expect, it } from 'vitest';
import { isRunning, jobSpec, offersInTryOrder, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const LOGS = 'PUT /api/v0/instances/request_logs/{id}/';
const DESTROYS = 'DELETE /api/v0/instances/{id}/';

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a run resumed while destroying', () => {
  it('destroys without asking for the failed container log again, then goes on', async () => {
    world = await startWorld();
    const spec = jobSpec();
    const [first] = await offersInTryOrder(world, spec);
    world.sim.setOfferProfile(first!.id, 'exited');
    // Every destroy answers 200 {success: false}: the run stays in destroying across the restart.
    world.sim.setFaults({ unsuccessful_200_rate: 1 });
    const run = await submit(world, spec);
    const requests = () => world!.sim.stats().requests;
    await until('the failed attempt to be destroyed, its log asked for', () => (requests()[DESTROYS] ?? 0) > 0 && requests()[LOGS] === 1);

    await world.restartDaemon();
    const destroysBefore = requests()[DESTROYS] ?? 0;
    await until('the resumed run to destroy again', () => (requests()[DESTROYS] ?? 0) > destroysBefore);
    expect((await world.api<{ state: string }>('GET', `/v1/runs/${run.id}`)).body.state).toBe('destroying');
    expect(requests()[LOGS]).toBe(1);

    world.sim.setFaults({ unsuccessful_200_rate: 0 });
    const running = await world.waitFor(run.id, isRunning, 30_000);
    expect(running.attempts.map((a) => a.outcome)).toEqual(['exited', 'running']);
    expect(requests()[LOGS]).toBe(1);
  });
});
