// The instance's own key (CONTAINER_API_KEY) never reaches a failed attempt's kept log, whatever
// path found the instance (issue #18 item 2): the create's answer, a label look-up after a create
// whose answer was lost (the key came only in that answer), or a daemon restarted in between (the
// key is read back from the store). The container prints its key; the simulator shows the test.
import { afterEach, describe, expect, it } from 'vitest';
import type { Run as RunView } from '../../../src/wire/control-api.js';
import { cancelAndCheckNothingBills, jobSpec, offersInTryOrder, startWorld, submit, type World } from '../../helpers/world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const SPEC = jobSpec({
  boot_timeout_s: 20,
  onstart: 'echo "started with CONTAINER_API_KEY=$CONTAINER_API_KEY"; echo "$CONTAINER_API_KEY"',
});

/** The key the container printed (its onstart's output), once it ran. */
async function printedKey(w: World, instanceId: number): Promise<string> {
  let key = '';
  await expect
    .poll(
      () =>
        (key =
          w.sim
            .history()
            .find((h) => h.id === instanceId)
            ?.onstart?.stdout.trim()
            .split('\n')
            .at(-1) ?? ''),
      { timeout: 10_000 },
    )
    .toMatch(/^[0-9a-f]{32,}$/);
  return key;
}

async function keptLogs(w: World, runId: string): Promise<string> {
  const logsOf = async () => (await w.api<RunView>('GET', `/v1/runs/${runId}`)).body.attempts[0]?.logs ?? null;
  await expect.poll(logsOf, { timeout: 15_000 }).toMatch(/started with CONTAINER_API_KEY=/);
  return (await logsOf())!;
}

describe('instance keys in attempts[].logs', { timeout: 60_000 }, () => {
  it('an instance adopted by its label after a lost create answer: its key is not in the kept log', async () => {
    world = await startWorld({
      sim: { onstart_exec: { enabled: true, timeout_s: 10 }, faults: { ambiguous_create_rate: 1 } },
      config: { readiness: { ssh_timeout_s: 2 } },
    });
    // SSH never answers: the attempt ends unreachable and its log is kept.
    world.sim.setOfferProfile((await offersInTryOrder(world, SPEC))[0]!.id, 'ssh_no_banner');
    const run = await submit(world, SPEC);
    await expect
      .poll(async () => (await world!.api<RunView>('GET', `/v1/runs/${run.id}`)).body.attempts[0]?.instance_id ?? null, { timeout: 15_000 })
      .not.toBeNull();
    const instanceId = (await world.api<RunView>('GET', `/v1/runs/${run.id}`)).body.attempts[0]!.instance_id!;
    const key = await printedKey(world, instanceId);
    const logs = await keptLogs(world, run.id);
    expect(logs).toContain('started with CONTAINER_API_KEY=[redacted]');
    expect(logs.toLowerCase()).not.toContain(key.slice(0, 12));
    world.sim.setFaults({ ambiguous_create_rate: 0 });
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('an instance created before a daemon restart: its key, kept in the store, is scrubbed by the new process', async () => {
    world = await startWorld({
      sim: { onstart_exec: { enabled: true, timeout_s: 10 } },
      config: { readiness: { ssh_timeout_s: 4 } },
    });
    world.sim.setOfferProfile((await offersInTryOrder(world, SPEC))[0]!.id, 'ssh_no_banner');
    const run = await submit(world, SPEC);
    const booting = await world.waitFor(run.id, (r) => r.state === 'booting' && r.instance !== null, 15_000);
    const key = await printedKey(world, booting.instance!.id);
    // A new daemon process: nothing of the first one's memory, the same berth.db.
    await world.restartDaemon();
    const logs = await keptLogs(world, run.id);
    expect(logs).toContain('started with CONTAINER_API_KEY=[redacted]');
    expect(logs.toLowerCase()).not.toContain(key.slice(0, 12));
    // The sim's Digest line (a hex run too) is kept: this key was known, nothing sought by shape.
    expect(logs).toMatch(/Digest: sha256:[0-9a-f]{64}/);
    await cancelAndCheckNothingBills(world, run.id);
  });

  it('berth logs after a daemon restart: the live log of a running instance is scrubbed of its key too', async () => {
    world = await startWorld({ sim: { onstart_exec: { enabled: true, timeout_s: 10 } } });
    const run = await submit(world, jobSpec({ ready_when: 'status', onstart: SPEC.onstart }));
    const running = await world.waitFor(run.id, (r) => r.state === 'running', 20_000);
    const key = await printedKey(world, running.instance!.id);
    await world.restartDaemon();
    type Logs = { source: string; text: string };
    let live: Logs | undefined;
    await expect
      .poll(async () => (live = (await world!.api<Logs>('GET', `/v1/runs/${run.id}/logs?tail=50`)).body).text, { timeout: 15_000 })
      .toContain('started with CONTAINER_API_KEY=');
    expect(live!.source).toBe('live');
    expect(live!.text).toContain('started with CONTAINER_API_KEY=[redacted]');
    expect(live!.text.toLowerCase()).not.toContain(key.slice(0, 12));
    await cancelAndCheckNothingBills(world, run.id);
  });
});
