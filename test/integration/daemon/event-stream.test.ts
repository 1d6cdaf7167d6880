// GET /v1/events/stream of a real daemon (in process) against the simulator: events as they are
// stored, resumed with Last-Event-ID without a gap or a repeat, heartbeats, the end of a run's
// stream, a clean end when the daemon stops; and `berth events RUN --follow` on top of it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsCommand } from '../../../src/cli/commands/events.js';
import type { Io } from '../../../src/cli/io.js';
import type { Run, RunEvent, StreamEvent } from '../../../src/wire/control-api.js';
import { openSse, type SseClient } from '../../helpers/sse.js';
import { jobSpec, startWorld, type World } from '../../helpers/world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld({ daemon: { streamHeartbeatMs: 100 } });
  await world.daemon.ready;
});
afterAll(async () => {
  await world?.close();
});

const auth = () => ({ authorization: `Bearer ${world.daemon.token}` });
const stream = (query = '', headers: Record<string, string> = {}) =>
  openSse(`${world.daemon.url}/v1/events/stream${query}`, { ...auth(), ...headers });
const data = (c: SseClient) => c.messages.filter((m) => m.event === 'message').map((m) => JSON.parse(m.data) as StreamEvent);
const submit = async (name: string, changes: Record<string, unknown> = {}) =>
  (await world.api<Run>('POST', '/v1/runs', jobSpec({ name, ...changes }))).body;
const stored = async (runId: string) => (await world.api<RunEvent[]>('GET', `/v1/runs/${runId}/events`)).body;

describe('GET /v1/events/stream', () => {
  it('needs the token', async () => {
    const c = await openSse(`${world.daemon.url}/v1/events/stream`, {});
    expect(c.status).toBe(401);
    c.close();
  });

  it("streams one run's events from its first, each with the event-log id, and ends after its last once the run has ended", async () => {
    const run = await submit('sse-one', { max_price_per_hour: 0.001 }); // no offer: it fails at once
    const c = await stream(`?run=${run.id}`);
    expect(c.status).toBe(200);
    expect(await c.ended).toBe(true);
    expect(c.messages.at(-1)?.event).toBe('end');
    const got = data(c);
    expect(got.map((e) => e.id)).toEqual((await stored(run.id)).map((e) => e.id));
    expect(c.messages.filter((m) => m.event === 'message').map((m) => m.id)).toEqual(got.map((e) => String(e.id)));
    expect(got.every((e) => e.run_id === run.id)).toBe(true);
    expect(got.at(-1)).toMatchObject({ type: 'state', data: { to: 'failed' } });
  });

  it('resumes after Last-Event-ID without a gap or a repeat, for all runs while they move', async () => {
    const first = await stream();
    const runs = await Promise.all([0, 1, 2].map((i) => submit(`sse-all-${i}`)));
    // Cut the stream in the middle of the runs' progress...
    await first.until((m) => m.length >= 6);
    first.close();
    const seen = data(first);
    const lastId = seen.at(-1)!.id;
    // ...and resume from the last event received while they go on.
    const second = await stream('', { 'last-event-id': String(lastId) });
    await Promise.all(runs.map((r) => world.waitFor(r.id, (x) => x.state === 'running')));
    const ids = runs.map((r) => r.id);
    const all = (await Promise.all(ids.map(stored))).flat().sort((a, b) => a.id - b.id);
    await second.until(() => data(second).some((e) => e.id === all.at(-1)!.id));
    second.close();
    const received = [...seen, ...data(second)].filter((e) => ids.includes(e.run_id));
    expect(received.map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect(new Set(received.map((e) => e.id)).size).toBe(received.length);
    for (const r of runs) await world.api('POST', `/v1/runs/${r.id}/cancel`);
    await Promise.all(runs.map((r) => world.waitFor(r.id, (x) => x.state === 'cancelled')));
  });

  it('takes ?after= as Last-Event-ID, and sends heartbeats while nothing happens', async () => {
    const run = await submit('sse-after', { max_price_per_hour: 0.001 });
    await world.waitFor(run.id, (r) => r.state === 'failed');
    const events = await stored(run.id);
    const c = await stream(`?run=${run.id}&after=${events[1]!.id}`);
    await c.ended;
    expect(data(c).map((e) => e.id)).toEqual(events.slice(2).map((e) => e.id));
    const idle = await stream();
    await idle.until(() => idle.comments.filter((x) => x === 'heartbeat').length >= 2);
    idle.close();
    const bad = await stream('?after=-1');
    expect(bad.status).toBe(400);
    bad.close();
  });

  it('berth events RUN --follow prints every event of the run as it is stored, and returns once it has ended', async () => {
    const run = await submit('sse-follow');
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(`ERR ${l}`), live: false, write: () => undefined, columns: 100 };
    const followed = eventsCommand(run.id, { follow: true, json: true }, io, { BERTH_HOME: world.home });
    await world.waitFor(run.id, (r) => r.state === 'running');
    await world.api('POST', `/v1/runs/${run.id}/cancel`);
    expect(await followed).toBe(0);
    const printed = lines.map((l) => JSON.parse(l) as RunEvent);
    expect(printed.map((e) => e.id)).toEqual((await stored(run.id)).map((e) => e.id));
    expect(printed.at(-1)).toMatchObject({ type: 'state', data: { to: 'cancelled' } });
    expect(printed[0]).not.toHaveProperty('run_id');
  });

  it('ends every stream cleanly when the daemon stops', async () => {
    const c = await stream();
    await c.until(() => c.comments.length >= 1);
    await world.restartDaemon();
    expect(await c.ended).toBe(true);
  });
});
