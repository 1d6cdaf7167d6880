import { describe, expect, it } from 'vitest';
import { usdText } from '../../src/usd-text.js';

describe('usdText', () => {
  it('puts the sign before the dollar', () => {
    expect(usdText(-0.0072)).toBe('-$0.0072');
    expect(usdText(-12.345)).toBe('-$12.35');
  });

  it('keeps four decimals below a dollar and two above', () => {
    expect(usdText(0.0072)).toBe('$0.0072');
    expect(usdText(1.5)).toBe('$1.50');
  });

  it('shows an amount that rounds to zero as zero, without a sign', () => {
    expect(usdText(-0.00001)).toBe('$0.0000');
    expect(usdText(0)).toBe('$0.0000');
  });
});
