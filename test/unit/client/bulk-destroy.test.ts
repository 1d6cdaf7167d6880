// Destroys that would wait go in the official client's bulk destroy (`DELETE /api/v0/instances/`
// with `instance_ids`, vast-cli `vastai/api/instances.py`), issue #39. A real HTTP fake server, and
// the rate limits on a fake clock: which call goes when is exact, whatever the machine's load.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ServerResponse } from 'node:http';
import { createMarketClient, type MarketplaceClient } from '../../../src/client/marketplace-client.js';
import type { ClientEvent } from '../../../src/client/events.js';
import { FakeClock } from '../../helpers/fake-clock.js';
import { json, startFakeServer, testConfig, type FakeServer } from './fake-server.js';

const BULK = '/api/v0/instances/';
let server: FakeServer;
let client: MarketplaceClient;
let clock: FakeClock;
let events: ClientEvent[];
/** How the bulk endpoint answers; one-by-one destroys answer 200 unless `goneIds` holds the id. */
let bulkAnswer: (res: ServerResponse) => void;
let goneIds: Set<number>;

const bulkBodies = () => server.requests.filter((q) => q.url === BULK).map((q) => (q.body as { instance_ids: number[] }).instance_ids);
const oneByOne = () => server.requests.filter((q) => q.url !== BULK).map((q) => Number(/\/(\d+)\/$/.exec(q.url)![1]));

function makeClient(destroyPerS: number, bulkPerS = 1): void {
  client = createMarketClient({
    baseUrl: server.url,
    apiKey: 'sk-unit-test-key-0123456789',
    config: testConfig({ rate: { destroy: { per_s: destroyPerS, burst: 1 }, destroy_bulk: { per_s: bulkPerS, burst: 1 } } }),
    onEvent: (e) => events.push(e),
    clock,
  });
}

/** Lets the real sockets turn, time standing still. */
async function ioTurns(n = 50): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

async function untilTrue(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; !ok(); i++) {
    if (i > 20_000) throw new Error(`never: ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** Moves the fake clock a second at a time until every promise settled. */
async function drive<T>(all: Promise<T>, stepMs = 1000): Promise<T> {
  let done = false;
  void all.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; !done; i++) {
    if (i > 200) throw new Error('never settled');
    await ioTurns();
    if (!done) await clock.advance(stepMs);
  }
  return all;
}

beforeEach(async () => {
  events = [];
  goneIds = new Set();
  bulkAnswer = (res) => json(res, 200, { success: true, msg: 'destroying instances' });
  clock = new FakeClock(0, { timeoutTurns: 20 });
  server = await startFakeServer((q, res) => {
    if (q.method !== 'DELETE') return json(res, 404, { success: false, error: 'not_found', msg: 'no' });
    if (q.url === BULK) return bulkAnswer(res);
    const id = Number(/\/(\d+)\/$/.exec(q.url)![1]);
    return goneIds.has(id)
      ? json(res, 404, { success: false, error: 'not_found', msg: 'Instance not found' })
      : json(res, 200, { success: true, msg: 'Instance destroyed successfully' });
  });
});
afterEach(async () => {
  await client.close();
  await server.close();
});

describe('destroys batched in bulk when many wait (#39)', () => {
  it('a lone destroy goes by its own call at once: no batch, no wait', async () => {
    makeClient(1);
    expect(await client.destroyInstance(7)).toBe('destroyed');
    expect(server.requests.map((q) => `${q.method} ${q.url}`)).toEqual(['DELETE /api/v0/instances/7/']);
  });

  it('ten destroys at once: the first by its own call, the nine that would wait in one bulk call, every caller resolved', async () => {
    makeClient(1);
    const ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    const all = Promise.all(ids.map((id) => client.destroyInstance(id)));
    // Neither call waits for the clock: the destroy token goes to the first, the bulk token to the rest.
    await untilTrue('two calls', () => server.requests.length === 2);
    expect(await all).toEqual(ids.map(() => 'destroyed'));
    expect(oneByOne()).toEqual([1]);
    expect(bulkBodies()).toEqual([[2, 3, 4, 5, 6, 7, 8, 9, 10]]);
    const bulk = server.requests.find((q) => q.url === BULK)!;
    expect(bulk.method).toBe('DELETE');
    expect(bulk.headers['content-type']).toBe('application/json');
    expect(client.stats().groups.destroy_bulk).toMatchObject({ sent: 1 });
  });

  it('at most 64 ids a bulk call (the official client splits by 64); ids joining while a batch waits for its token go in it', async () => {
    makeClient(0.01);
    const ids = Array.from({ length: 70 }, (_, i) => i + 1);
    const all = Promise.all(ids.map((id) => client.destroyInstance(id)));
    await untilTrue('the first bulk call', () => bulkBodies().length === 1);
    // Three more while the second batch waits a second for the bulk token.
    const later = Promise.all([71, 72, 73].map((id) => client.destroyInstance(id)));
    await drive(Promise.all([all, later]));
    expect(oneByOne()).toEqual([1]);
    expect(bulkBodies()).toEqual([ids.slice(1, 65), [...ids.slice(65), 71, 72, 73]]);
    expect(await later).toEqual(['destroyed', 'destroyed', 'destroyed']);
  });

  it('a bulk call that fails sends each of its ids one by one: every caller still gets destroyed or gone', async () => {
    makeClient(1);
    bulkAnswer = (res) => json(res, 404, { success: false, error: 'not_found', msg: 'Instance not found' });
    goneIds.add(3);
    const outcomes = await drive(Promise.all([1, 2, 3, 4].map((id) => client.destroyInstance(id))));
    expect(outcomes).toEqual(['destroyed', 'destroyed', 'gone', 'destroyed']);
    expect(bulkBodies()).toEqual([[2, 3, 4]]);
    expect(oneByOne()).toEqual([1, 2, 3, 4]);
    // An id already gone explains the failure: bulk stays on.
    expect(events.some((e) => e.type === 'bulk_destroy_off')).toBe(false);
  });

  it('two bulk failures in a row where one-by-one destroys worked turn bulk off for good, with one event', async () => {
    makeClient(1);
    bulkAnswer = (res) => json(res, 200, { success: false, error: 'request_failed', msg: 'could not be completed' });
    for (const round of [0, 1, 2]) {
      const ids = [1, 2, 3].map((i) => round * 10 + i);
      expect(await drive(Promise.all(ids.map((id) => client.destroyInstance(id))))).toEqual(['destroyed', 'destroyed', 'destroyed']);
      await clock.advance(1000);
    }
    // Rounds 0 and 1 tried bulk and failed; round 2 went one by one.
    expect(bulkBodies()).toEqual([
      [2, 3],
      [12, 13],
    ]);
    expect(oneByOne()).toEqual([1, 2, 3, 11, 12, 13, 21, 22, 23]);
    expect(events.filter((e) => e.type === 'bulk_destroy_off')).toEqual([{ type: 'bulk_destroy_off', code: 'unsuccessful', status: 200 }]);
  });

  it('a success between two failures keeps bulk on', async () => {
    makeClient(1);
    const answers = [404, 200, 404, 200];
    bulkAnswer = (res) =>
      answers.shift() === 200 ? json(res, 200, { success: true }) : json(res, 404, { success: false, error: 'not_found', msg: 'x' });
    for (const round of [0, 1, 2, 3]) {
      const ids = [1, 2, 3].map((i) => round * 10 + i);
      await drive(Promise.all(ids.map((id) => client.destroyInstance(id))));
      await clock.advance(1000);
    }
    expect(bulkBodies()).toHaveLength(4);
    expect(events.some((e) => e.type === 'bulk_destroy_off')).toBe(false);
  });

  it('a caller that gives up before its batch is sent is not in its body; once every caller left, nothing is sent', async () => {
    makeClient(0.01);
    const first = Promise.all([1, 2, 3].map((id) => client.destroyInstance(id)));
    await untilTrue('the first bulk call', () => bulkBodies().length === 1);
    // The next batch waits a second for the bulk token.
    const leaving = new AbortController();
    const left = client.destroyInstance(4, { signal: leaving.signal });
    const stays = client.destroyInstance(5);
    leaving.abort();
    await expect(left).rejects.toMatchObject({ code: 'aborted' });
    expect(await drive(stays)).toBe('destroyed');
    expect(await first).toEqual(['destroyed', 'destroyed', 'destroyed']);
    expect(bulkBodies()).toEqual([[2, 3], [5]]);

    const alone = new AbortController();
    const gone = client.destroyInstance(6, { signal: alone.signal });
    alone.abort();
    await expect(gone).rejects.toMatchObject({ code: 'aborted' });
    await clock.advance(5000);
    await ioTurns();
    expect(bulkBodies()).toHaveLength(2);
    expect(oneByOne()).toEqual([1]);
  });

  it('a caller that gives up after its batch was sent only stops waiting: the others are destroyed', async () => {
    makeClient(0.01);
    let answer!: () => void;
    bulkAnswer = (res) => (answer = () => json(res, 200, { success: true }));
    const leaving = new AbortController();
    void client.destroyInstance(1);
    const left = client.destroyInstance(2, { signal: leaving.signal });
    const stays = client.destroyInstance(3);
    await untilTrue('the bulk call', () => bulkBodies().length === 1);
    leaving.abort();
    await expect(left).rejects.toMatchObject({ code: 'aborted' });
    answer();
    expect(await stays).toBe('destroyed');
    expect(bulkBodies()).toEqual([[2, 3]]);
  });
});
