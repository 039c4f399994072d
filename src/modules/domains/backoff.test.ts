import { describe, expect, it } from 'vitest';
import { askEveryMs, isDue } from './domains.service.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

describe('how often a pending domain is asked about', () => {
  it('every pass in its first hour, hourly to its seventh day, daily after', () => {
    expect(askEveryMs(59 * MIN)).toBe(0);
    expect(askEveryMs(HOUR)).toBe(HOUR);
    expect(askEveryMs(7 * DAY - 1)).toBe(HOUR);
    expect(askEveryMs(7 * DAY)).toBe(DAY);
  });

  it('is due once per period of its age, at the first pass after the period ends', () => {
    expect(isDue(0, 30 * MIN, 29 * MIN)).toBe(true);
    expect(isDue(0, 2 * HOUR + 10 * MIN, 2 * HOUR)).toBe(false);
    expect(isDue(0, 3 * HOUR, 2 * HOUR + 59 * MIN)).toBe(true);
    expect(isDue(0, 10 * DAY + HOUR, 10 * DAY)).toBe(false);
    expect(isDue(0, 11 * DAY, 10 * DAY + 23 * HOUR)).toBe(true);
    // a pass missed for hours, the first pass in this process, a clock that went back: ask
    expect(isDue(0, 9 * HOUR, 3 * HOUR)).toBe(true);
    expect(isDue(0, 9 * HOUR, undefined)).toBe(true);
    expect(isDue(0, 9 * HOUR, 10 * HOUR)).toBe(true);
  });
});
