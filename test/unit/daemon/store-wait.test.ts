// A start-up step that meets berth.db locked by another program waits and tries again, saying so;
// anything else is thrown at once (issue #18 item 3). Fake clock: no sleeps.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { StoreError, StoreWriteError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { whileStoreBusy } from '../../../src/daemon/store-wait.js';
import { FakeClock } from '../../helpers/fake-clock.js';

function capture() {
  const lines: Array<{ level: number; msg: string }> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  return { lines, log: createLogger({ destination }) };
}

const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
const settle = () => new Promise((r) => setImmediate(r));

/** A resume step that throws `failures` in turn, then resumes; `tries()` counts its calls. */
function failingFirst(...failures: Error[]) {
  let tries = 0;
  return {
    tries: () => tries,
    step: () => {
      const failure = failures[tries++];
      if (failure) throw failure;
      return 'resumed';
    },
  };
}

describe('whileStoreBusy', () => {
  it('tries again after growing pauses while berth.db is locked, warns once, and says when it is free', async () => {
    const clock = new FakeClock();
    const { lines, log } = capture();
    const { tries, step } = failingFirst(busy(), new StoreWriteError('SQLITE_BUSY_SNAPSHOT'), new StoreWriteError('SQLITE_BUSY_SNAPSHOT'));
    const done = whileStoreBusy('resume the runs', step, { clock, log });
    await settle();
    expect(tries()).toBe(1);
    await clock.advance(249);
    expect(tries()).toBe(1);
    await clock.advance(1);
    expect(tries()).toBe(2);
    await clock.advance(500);
    expect(tries()).toBe(3);
    await clock.advance(1000);
    expect(await done).toBe('resumed');
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, expect.stringMatching(/^berth\.db is locked by another program .*waiting for it to resume the runs/)],
      [30, 'berth.db is free again after 1.8 s: went on to resume the runs'],
    ]);
  });

  it('waits out a Postgres store that does not answer (its server restarting), but not a Postgres error that is a bug', async () => {
    const clock = new FakeClock();
    const { lines, log } = capture();
    const { tries, step } = failingFirst(new StoreWriteError('ECONNREFUSED'), new StoreWriteError('57P01'));
    const done = whileStoreBusy('resume the runs', step, { clock, log });
    await settle();
    await clock.advance(250);
    expect(tries()).toBe(2);
    await clock.advance(500);
    expect(await done).toBe('resumed');
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, expect.stringMatching(/^the Postgres store does not answer .*waiting for it to resume the runs/)],
      [30, 'the Postgres store answers again after 0.8 s: went on to resume the runs'],
    ]);
    // A unique violation is no outage: thrown at once.
    await expect(whileStoreBusy('resume the runs', failingFirst(new StoreWriteError('23505')).step, { clock, log })).rejects.toMatchObject({
      sqliteCode: '23505',
    });
  });

  it('throws anything else at once: a damaged or foreign store is not waited for', async () => {
    const clock = new FakeClock();
    const { lines, log } = capture();
    const damaged = new StoreError('berth.db is damaged (SQLITE_CORRUPT: ...)');
    await expect(
      whileStoreBusy(
        'open the store',
        () => {
          throw damaged;
        },
        { clock, log },
      ),
    ).rejects.toBe(damaged);
    expect(lines).toEqual([]);
  });

  it('ends when its signal fires (a stop asked for while waiting)', async () => {
    const clock = new FakeClock();
    const stop = new AbortController();
    const done = whileStoreBusy(
      'open the store',
      () => {
        throw busy();
      },
      { clock, log: capture().log, signal: stop.signal },
    );
    await settle();
    stop.abort();
    await expect(done).rejects.toMatchObject({ code: 'aborted' });
  });
});
