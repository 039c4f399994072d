import { describe, expect, it } from 'vitest';
import { scaledDecimal, scaledNumber } from './money.js';

// Issue 26 item 9: amounts are scaled to minor units exactly, never through a float product.
describe('scaledDecimal / scaledNumber', () => {
  it.each([
    ['10', 2, 1000n],
    ['12.5', 2, 1250n],
    ['12.50', 2, 1250n],
    ['12.500', 2, 1250n],
    ['1.15', 2, 115n],
    ['4.35', 2, 435n],
    ['1e3', 0, 1000n],
    ['1.5e+3', 2, 150000n],
    ['1E-2', 2, 1n],
    ['1e+21', 2, 100000000000000000000000n],
    ['0', 2, 0n],
    ['-3.25', 2, -325n],
    ['1000', 0, 1000n],
  ])('%s with %d decimals is %s', (text, decimals, scaled) => {
    expect(scaledDecimal(text, decimals)).toBe(scaled);
  });

  it.each([
    ['0.999999999', 2],
    ['1.005', 2],
    ['10.001', 2],
    ['1e-7', 2],
    ['1000.5', 0],
    ['1.0000000000000001', 2],
    ['', 2],
    ['1.', 2],
    ['.5', 2],
    ['0x10', 2],
    ['Infinity', 2],
    ['1e', 2],
  ])('%s with %d decimals is refused', (text, decimals) => {
    expect(scaledDecimal(text, decimals)).toBeNull();
  });

  it('reads a JSON number by its shortest exact decimal form, with no float rounding', () => {
    expect(scaledNumber(0.999999999, 2)).toBeNull();
    expect(scaledNumber(1e-7, 2)).toBeNull();
    expect(scaledNumber(1.005, 2)).toBeNull();
    expect(scaledNumber(1.15, 2)).toBe(115n);
    expect(scaledNumber(4.35, 2)).toBe(435n);
    expect(scaledNumber(Number.MAX_VALUE, 2)).toBe(17976931348623157n * 10n ** 294n);
    expect(scaledNumber(Number.NaN, 2)).toBeNull();
    expect(scaledNumber(Number.POSITIVE_INFINITY, 2)).toBeNull();
  });
});
