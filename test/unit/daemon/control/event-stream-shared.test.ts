// The event stream on a store several daemons share (issue #21): events another daemon writes reach
// every open stream within a poll, and an event whose transaction commits after one with a higher
// id (Postgres draws ids from a sequence) is still sent, once, in id order. Two stores opened on one
// real Postgres database (test/helpers/pg-server.ts) stand for two daemons; time is a fake clock.
import { mkdtempSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EventStreams } from '../../../../src/daemon/control/event-stream.js';
import { openStore, type Store } from '../../../../src/store/index.js';
import { FakeClock } from '../../../helpers/fake-clock.js';
import { createPgDatabase, type PgDatabase } from '../../../helpers/pg-database.js';

const POLL_MS = 200;
const SETTLE_MS = 10_000;

let database: PgDatabase;
const closers: Array<() => void> = [];
beforeEach(async () => {
  database = await createPgDatabase();
});
afterEach(async () => {
  closers.splice(0).forEach((close) => close());
  await database.drop();
});

function open(): Store {
  const home = mkdtempSync(join(tmpdir(), 'berth-stream-'));
  const s = openStore({ home, pg: { url: database.url } });
  closers.push(() => {
    s.close();
    rmSync(home, { recursive: true, force: true });
  });
  return s;
}

/** A response that keeps what the stream wrote (the SSE messages' ids). */
function response(): { res: ServerResponse; ids: () => number[]; ended: () => boolean } {
  let text = '';
  let ended = false;
  const res = {
    writeHead: () => res,
    write: (chunk: string) => {
      text += chunk;
      return true;
    },
    on: () => res,
    end: () => {
      ended = true;
    },
    destroy: () => {
      ended = true;
    },
  };
  return {
    res: res as unknown as ServerResponse,
    ids: () => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])),
    ended: () => ended,
  };
}

const event = (runId: string, message: string) => ({ runId, at: 1, type: 'note', message });

describe('event stream on a shared Postgres store', () => {
  let clock: FakeClock;
  let mine: Store;
  let other: Store;
  let streams: EventStreams;
  beforeEach(() => {
    clock = new FakeClock();
    mine = open();
    other = open();
    streams = new EventStreams({ store: mine, clock, heartbeatMs: 60_000, storePollMs: POLL_MS, storeSettleMs: SETTLE_MS });
    closers.unshift(() => streams.closeAll());
  });

  it("sends another daemon's events within a poll", async () => {
    const c = response();
    streams.serve({} as never, c.res, { after: streams.startOf(undefined) });
    const id = other.transaction(() => other.events.append(event('r1', 'elsewhere')));
    expect(c.ids()).toEqual([]);
    await clock.advance(POLL_MS);
    expect(c.ids()).toEqual([id]);
  });

  it('sends an event whose transaction commits after a higher id, each once and in id order', async () => {
    mine.runs.insert({ id: 'r1', name: 'x', specJson: '{}', createdAt: 1 });
    const all = response();
    const run = response();
    streams.serve({} as never, all.res, { after: streams.startOf(undefined) });
    streams.serve({} as never, run.res, { runId: 'r1', after: 0 });
    let held = 0;
    let later = 0;
    // The other daemon draws an id and has not committed yet...
    other.transaction(() => {
      held = other.events.append(event('r1', 'slow'));
      // ...while this one stores the next id and commits, and its streams read at once.
      later = mine.transaction(() => mine.events.append(event('r1', 'fast')));
      streams.recheck();
    });
    expect(later).toBeGreaterThan(held);
    await clock.advance(POLL_MS);
    expect(all.ids()).toEqual([held, later]);
    expect(run.ids()).toEqual([held, later]);
    await clock.advance(SETTLE_MS * 2);
    expect(all.ids()).toEqual([held, later]);
  });

  /** Another program's connection to the store's database, for a transaction held across awaits. */
  async function connection(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: database.url });
    await c.connect();
    closers.unshift(() => void c.end());
    return c;
  }

  it('holds a higher id back while a lower one is in flight across polls, then sends both in order', async () => {
    const c = response();
    streams.serve({} as never, c.res, { after: streams.startOf(undefined) });
    const slow = await connection();
    await slow.query('BEGIN');
    const held = Number(
      (await slow.query(`INSERT INTO events (run_id, at, type, message) VALUES ('r1', 1, 'note', 'slow') RETURNING id`)).rows[0].id,
    );
    const later = mine.transaction(() => mine.events.append(event('r1', 'fast')));
    await clock.advance(SETTLE_MS / 2);
    expect(c.ids()).toEqual([]);
    await slow.query('COMMIT');
    await clock.advance(POLL_MS);
    expect(c.ids()).toEqual([held, later]);
  });

  it('passes an id whose transaction rolled back at the next poll once no other transaction writes events', async () => {
    const c = response();
    streams.serve({} as never, c.res, { after: streams.startOf(undefined) });
    expect(() =>
      other.transaction(() => {
        other.events.append(event('r1', 'rolled back'));
        throw new Error('no');
      }),
    ).toThrow('no');
    const id = mine.transaction(() => mine.events.append(event('r1', 'after the gap')));
    await clock.advance(POLL_MS * 2);
    expect(c.ids()).toEqual([id]);
    // Without a gap below, an event goes at once (this daemon's commit) or within a poll (another's).
    const next = mine.transaction(() => mine.events.append(event('r2', 'no gap')));
    await new Promise((r) => setImmediate(r));
    expect(c.ids()).toEqual([id, next]);
  });

  it('while another transaction writes events all along, passes a missing id only after the settle time', async () => {
    const c = response();
    streams.serve({} as never, c.res, { after: streams.startOf(undefined) });
    const busy = await connection();
    await busy.query('BEGIN');
    await busy.query('LOCK TABLE events IN ROW EXCLUSIVE MODE'); // as an INSERT in flight holds it
    expect(() =>
      other.transaction(() => {
        other.events.append(event('r1', 'rolled back'));
        throw new Error('no');
      }),
    ).toThrow('no');
    const id = mine.transaction(() => mine.events.append(event('r1', 'after the gap')));
    await clock.advance(SETTLE_MS - POLL_MS);
    expect(c.ids()).toEqual([]);
    await clock.advance(POLL_MS * 2);
    expect(c.ids()).toEqual([id]);
    await busy.query('ROLLBACK');
  });

  it("ends a run's stream only after the run's last event, which may lie past the frontier", async () => {
    mine.runs.insert({ id: 'r9', name: 'x', specJson: '{}', createdAt: 1 });
    const c = response();
    streams.serve({} as never, c.res, { runId: 'r9', after: 0 });
    let last = 0;
    other.transaction(() => {
      other.events.append(event('r0', 'in flight'));
      // The run ends with its last event while a lower id is in flight.
      last = mine.transaction(() => {
        mine.runs.setState('r9', 'failed', null, 2);
        return mine.events.append(event('r9', 'last'));
      });
      streams.recheck();
      expect(c.ended()).toBe(false);
    });
    await clock.advance(POLL_MS);
    expect(c.ids()).toEqual([last]);
    expect(c.ended()).toBe(true);
  });
});
