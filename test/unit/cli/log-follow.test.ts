import { describe, expect, it } from 'vitest';
import { linesOf, newLines } from '../../../src/cli/log-follow.js';

describe('berth logs --follow: what is new in a read', () => {
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
