// A count and its noun (src/count-text.ts), as the daemon's messages and the CLI print them.
import { describe, expect, it } from 'vitest';
import { countText } from '../../src/count-text.js';

describe('countText', () => {
  it('says one thing in the singular and every other count in the plural', () => {
    expect(countText(1, 'offer')).toBe('1 offer');
    expect(countText(0, 'offer')).toBe('0 offers');
    expect(countText(2, 'live run')).toBe('2 live runs');
    expect(countText(3, 'entry', 'entries')).toBe('3 entries');
  });
});
