import { describe, expect, it } from 'vitest';
import { LINE_MAX, LiveOutput, RATE_PER_S } from '../../../../src/daemon/task-end/live-output.js';
import type { StreamOutput } from '../../../../src/wire/control-api.js';
import { FakeClock } from '../../../helpers/fake-clock.js';

const t = { runId: 'r1', n: 1 };

function watched() {
  const clock = new FakeClock();
  const live = new LiveOutput(clock);
  const got: StreamOutput[] = [];
  const stop = live.watch('r1', (o) => got.push(o));
  return { clock, live, got, stop };
}

describe('a followed task’s output, live', () => {
  it('sends each batch of lines with the bytes it spans, to the watchers of its run only', () => {
    const { live, got } = watched();
    const other: StreamOutput[] = [];
    live.watch('r2', (o) => other.push(o));
    live.publish(t, 0, 12, 'one\ntwo\nthree\n');
    expect(got).toEqual([{ run_id: 'r1', n: 1, from: 0, to: 12, lines: ['one', 'two', 'three'], left_out: 0 }]);
    expect(other).toEqual([]);
  });

  it('sends nothing once its watchers have gone', () => {
    const { live, got, stop } = watched();
    stop();
    live.publish(t, 0, 4, 'one\n');
    expect(got).toEqual([]);
  });

  it('cuts a long line', () => {
    const { live, got } = watched();
    live.publish(t, 0, 10_001, 'x'.repeat(10_000) + '\n');
    expect(got[0]!.lines[0]).toBe('x'.repeat(LINE_MAX) + ' …');
  });

  it('past its rate, sends a batch’s last lines and counts the ones before them, and those of batches left out whole', async () => {
    const { clock, live, got } = watched();
    const line = 'y'.repeat(996); // 1000 characters with its place in the message
    const batch = Array.from({ length: 100 }, () => line).join('\n') + '\n';
    // 100 KB at once: the bucket (64 KiB) takes the last 65 lines.
    live.publish(t, 0, 99_700, batch);
    expect(got[0]!.lines).toHaveLength(65);
    expect(got[0]!.left_out).toBe(35);
    // At once again: what the bucket has left (536) takes neither line: the batch is left out whole, and counted.
    live.publish(t, 99_700, 99_711, `${'z'.repeat(600)}\n${'z'.repeat(600)}\n`);
    expect(got).toHaveLength(1);
    // A second later: the rate's worth is back, and the next batch says what was left out before it.
    await clock.advance(1000);
    live.publish(t, 99_711, 99_716, 'next\n');
    expect(got[1]).toMatchObject({ from: 99_711, lines: ['next'], left_out: 2 });
    // Over a long flood, what is sent stays within the rate.
    for (let s = 0; s < 60; s++) {
      await clock.advance(1000);
      for (let k = 0; k < 10; k++) live.publish(t, 0, 1, batch);
    }
    const sent = got.slice(2).reduce((n, o) => n + o.lines.reduce((m, l) => m + l.length + 4, 0), 0);
    expect(sent).toBeLessThanOrEqual(60 * RATE_PER_S);
  });
});
