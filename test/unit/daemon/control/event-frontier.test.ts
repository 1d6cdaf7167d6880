// The event frontier of a shared store (src/daemon/control/event-frontier.ts) over a list of ids:
// present ids pass at once, a missing id holds it until no other transaction writes events or it
// has been missing for the settle time.
import { describe, expect, it } from 'vitest';
import { EventFrontier } from '../../../../src/daemon/control/event-frontier.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

/** The events table's ids; `writing`: another connection holds a write transaction (true unless a test ends it). */
function ids(initial: number[]) {
  const present = new Set(initial);
  const state = { writing: true };
  return {
    present,
    state,
    othersWriting: () => state.writing,
    idsAfter: (after: number, limit: number) =>
      [...present]
        .filter((id) => id > after)
        .sort((a, b) => a - b)
        .slice(0, limit),
    latestId: () => Math.max(0, ...present),
  };
}

describe('event frontier', () => {
  it('passes contiguous ids at once and waits at a gap until it commits', () => {
    const clock = new FakeClock();
    const log = ids([]);
    const f = new EventFrontier(log, clock, 1000);
    expect(f.value).toBe(0);
    log.present.add(1).add(2).add(4);
    expect(f.advance()).toBe(true);
    expect(f.value).toBe(2);
    log.present.add(3);
    f.advance();
    expect(f.value).toBe(4);
  });

  it('passes a gap once it has been missing for the settle time, timed from when it appeared', async () => {
    const clock = new FakeClock();
    const log = ids([1]);
    const f = new EventFrontier(log, clock, 1000);
    log.present.add(3);
    f.advance();
    expect(f.value).toBe(1);
    await clock.advance(600);
    log.present.add(5);
    f.advance();
    expect(f.value).toBe(1);
    await clock.advance(400);
    // 2 has been missing for 1000 ms; 4 only for 400 ms.
    f.advance();
    expect(f.value).toBe(3);
    await clock.advance(600);
    f.advance();
    expect(f.value).toBe(5);
  });

  it('looks again at the last ids below the newest at start, which may still be in flight', async () => {
    const clock = new FakeClock();
    const log = ids([1, 2, 3, 5]);
    const f = new EventFrontier(log, clock, 1000);
    expect(f.value).toBe(3);
    log.present.add(4);
    f.advance();
    expect(f.value).toBe(5);
  });

  it('reads nothing on a commit while a gap holds it (the poll looks again), and reads on when clear', () => {
    const clock = new FakeClock();
    const log = ids([1]);
    let reads = 0;
    const counted = { ...log, idsAfter: (after: number, limit: number) => (reads++, log.idsAfter(after, limit)) };
    const f = new EventFrontier(counted, clock, 1000);
    log.present.add(3);
    f.advance();
    reads = 0;
    expect(f.advanceIfClear()).toBe(false);
    expect(reads).toBe(0);
    log.present.add(2);
    expect(f.advance()).toBe(true);
    expect(f.value).toBe(3);
    log.present.add(4);
    expect(f.advanceIfClear()).toBe(true);
    expect(f.value).toBe(4);
  });

  it('passes a gap it has seen once no other transaction writes events, without waiting for the settle time', () => {
    const clock = new FakeClock();
    const log = ids([1]);
    const f = new EventFrontier(log, clock, 60_000);
    log.present.add(3);
    f.advance();
    expect(f.value).toBe(1);
    log.state.writing = false;
    // 2 was drawn before 3 was seen; with no writer left, it is gone. 5's gap (4) is new: it waits.
    log.present.add(5);
    f.advance();
    expect(f.value).toBe(3);
    f.advance();
    expect(f.value).toBe(5);
  });
});
