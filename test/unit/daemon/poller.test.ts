import { afterEach, describe, expect, it } from 'vitest';
import type { Instance, MarketClient } from '../../../src/client/types.js';
import { BerthError } from '../../../src/errors.js';
import { InstancePoller } from '../../../src/daemon/poller.js';
import { silentLogger } from '../../../src/logger.js';

function fakeClient(fail = false) {
  const calls: number[] = [];
  const client = {
    async listInstances(): Promise<Instance[]> {
      calls.push(Date.now());
      await new Promise((r) => setTimeout(r, 5));
      if (fail) throw new BerthError('auth', 'bad key');
      return [{ id: calls.length, label: null, machine_id: 1, actual_status: 'running' }];
    },
  } as unknown as MarketClient;
  return { client, calls };
}

let poller: InstancePoller | undefined;
afterEach(async () => {
  await poller?.stop();
  poller = undefined;
});

describe('the shared poller', () => {
  it('lists once per interval and hands every list to onList', async () => {
    const { client, calls } = fakeClient();
    const seen: number[] = [];
    poller = new InstancePoller({ client, intervalMs: 100, log: silentLogger(), onList: (l) => void seen.push(l[0]!.id) });
    poller.start();
    await new Promise((r) => setTimeout(r, 350));
    expect(calls.length).toBeGreaterThanOrEqual(2); // timers run late on a loaded machine, never early
    expect(calls.length).toBeLessThanOrEqual(5);
    expect(seen).toEqual(calls.map((_, i) => i + 1));
  });

  it('serves waiters from one list started after they asked, waking the poller early', async () => {
    const { client, calls } = fakeClient();
    poller = new InstancePoller({ client, intervalMs: 60_000, log: silentLogger(), onList: () => undefined });
    poller.start();
    await new Promise((r) => setTimeout(r, 20)); // the first poll is done; the next is a minute away
    const asked = Date.now();
    const [a, b] = await Promise.all([poller.next(asked), poller.next(asked)]);
    expect(a).toBe(b);
    expect(calls).toHaveLength(2);
    expect(calls[1]!).toBeGreaterThanOrEqual(asked);
  });

  it('does not spin when the list keeps failing, and rejects waiters on stop', async () => {
    const { client, calls } = fakeClient(true);
    poller = new InstancePoller({ client, intervalMs: 200, log: silentLogger(), onList: () => undefined });
    poller.start();
    const waiting = poller.next(Date.now());
    await new Promise((r) => setTimeout(r, 450));
    expect(calls.length).toBeLessThanOrEqual(4);
    await poller.stop();
    await expect(waiting).rejects.toMatchObject({ code: 'aborted' });
  });
});
