import { describe, expect, it } from 'vitest';
import { linesOf, newLines, newLinesAcrossSources, StreamedLog } from '../../../src/cli/log-follow.js';

describe('berth logs --follow: what is new in a read', () => {
  it("the first read of the follower's out-file after the container's log: an sshd line printed from the log does not hide the overlap", () => {
    const printed = ['Server listening on 0.0.0.0 port 22.', 'step one', 'Accepted publickey for root from 127.0.0.1 port 49150 ssh2'];
    // Read as one log, the sshd line ends the overlap and the task's output would all print again.
    expect(newLines(printed, ['step one']).lines).toEqual(['step one']);
    expect(newLinesAcrossSources(printed, ['step one'])).toEqual({ lines: [], gap: false });
    expect(newLinesAcrossSources(printed, ['step one', 'step two'])).toEqual({ lines: ['step two'], gap: false });
  });

  it('prints only the lines after the overlap with what was printed', () => {
    expect(newLines(['a', 'b', 'c'], ['b', 'c', 'd', 'e'])).toEqual({ lines: ['d', 'e'], gap: false });
    expect(newLines(['a', 'b', 'c'], ['a', 'b', 'c'])).toEqual({ lines: [], gap: false });
    expect(newLines([], ['a'])).toEqual({ lines: ['a'], gap: false });
  });

  it('takes the longest overlap, so repeated lines are not printed twice', () => {
    expect(newLines(['x', 'tick', 'tick'], ['tick', 'tick', 'tick'])).toEqual({ lines: ['tick'], gap: false });
    expect(newLines(['x', 'tick', 'tick'], ['tick', 'tick', 'done'])).toEqual({ lines: ['done'], gap: false });
  });

  it('says so when more lines came than one read holds', () => {
    expect(newLines(['a', 'b'], ['e', 'f'])).toEqual({ lines: ['e', 'f'], gap: true });
    expect(newLines(['a'], [])).toEqual({ lines: [], gap: false });
  });

  it('reads a text into lines without an empty last one', () => {
    expect(linesOf('a\nb\n')).toEqual(['a', 'b']);
    expect(linesOf('')).toEqual([]);
  });
});

describe('berth logs --follow: a streamed log, by byte offset', () => {
  const batch = (n: number, from: number, to: number, lines: string[], left_out = 0) => ({ n, from, to, lines, left_out });

  it('prints a batch once, from the offset the stored log was read at on', () => {
    const log = new StreamedLog({ n: 1, offset: 10 });
    // Kept before the read: already printed by it.
    expect(log.take(batch(1, 0, 10, ['a']))).toEqual({ lines: [], gap: false });
    expect(log.take(batch(1, 10, 14, ['b', 'c']))).toEqual({ lines: ['b', 'c'], gap: false });
    expect(log.take(batch(1, 10, 14, ['b', 'c']))).toEqual({ lines: [], gap: false });
  });

  it('says so when lines were left out or a batch is missing', () => {
    const log = new StreamedLog({ n: 1, offset: 0 });
    expect(log.take(batch(1, 0, 4, ['d'], 3))).toEqual({ lines: ['d'], gap: true });
    expect(log.take(batch(1, 9, 12, ['e']))).toEqual({ lines: ['e'], gap: true });
  });

  it('starts a later attempt’s output at its first byte, and skips an earlier attempt’s', () => {
    const log = new StreamedLog({ n: 1, offset: 50 });
    expect(log.take(batch(2, 0, 2, ['x']))).toEqual({ lines: ['x'], gap: false });
    expect(log.take(batch(1, 50, 60, ['old']))).toEqual({ lines: [], gap: false });
    expect(log.attempt).toBe(2);
  });
});
