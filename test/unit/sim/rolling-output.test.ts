// A container's output kept as docker logs keeps it: the last bytes, whole lines, each run apart.
import { expect, test } from 'vitest';
import { RollingOutput } from '../../../src/sim/rolling-output.js';

const b = (s: string) => Buffer.from(s);

test('keeps every byte under the cap, each run in its own segment', () => {
  const out = new RollingOutput(100);
  out.begin(3);
  out.add(3, b('one\n'));
  out.begin(7);
  out.add(7, b('two\n'));
  out.add(3, b('late\n')); // a killed run's last bytes still land in its own segment
  expect([...out.texts()]).toEqual([
    [3, 'one\nlate\n'],
    [7, 'two\n'],
  ]);
});

test('past the cap the oldest bytes go, and the cut line with them', () => {
  const out = new RollingOutput(20);
  out.begin(1);
  for (let i = 0; i < 10; i++) out.add(1, b(`line-${i}\n`)); // 7 bytes each
  expect(out.texts().get(1)).toBe('line-8\nline-9\n');
});

test('the oldest run is emptied first; a later run keeps its whole tail', () => {
  const out = new RollingOutput(12);
  out.begin(1);
  out.add(1, b('aaaa\nbbbb\n'));
  out.begin(2);
  out.add(2, b('cccc\ndddd\n'));
  expect([...out.texts()]).toEqual([
    [1, ''],
    [2, 'cccc\ndddd\n'],
  ]);
});

test('a chatty run keeps its last lines however long each is', () => {
  const out = new RollingOutput(64 * 1024);
  out.begin(0);
  const long = 'x'.repeat(6000);
  for (let i = 0; i < 200; i++) out.add(0, b(`${i} ${long}\n`));
  out.add(0, b('the last line\n'));
  const lines = out.texts().get(0)!.trimEnd().split('\n');
  expect(lines.at(-1)).toBe('the last line');
  expect(lines.at(-2)).toBe(`199 ${long}`);
  expect(lines.every((l) => l === 'the last line' || /^\d+ x{6000}$/.test(l))).toBe(true);
});

test('each line is kept with the moment its first byte was written, a cut first line left out', () => {
  const out = new RollingOutput(14);
  out.begin(0);
  out.add(0, b('old\npart'), 1);
  out.add(0, b('ial\nnext\n'), 2);
  out.add(0, b('open'), 3);
  // 'old\n' and part of 'partial' were dropped for the cap: 'partial' goes whole.
  expect(out.lines().get(0)).toEqual([
    { at: 2, text: 'next' },
    { at: 3, text: 'open' },
  ]);
  const whole = new RollingOutput(100);
  whole.begin(0);
  whole.add(0, b('a\nb'), 5);
  whole.add(0, b('c\n'), 6);
  expect(whole.lines().get(0)).toEqual([
    { at: 5, text: 'a' },
    { at: 5, text: 'bc' },
  ]);
  expect(whole.texts().get(0)).toBe('a\nbc\n');
});
