import { describe, expect, it } from 'vitest';
import { intervalMs, nextRun, scheduleProblem } from './schedule.js';

describe('backup schedules', () => {
  it('take five-field cron expressions in a time zone, at most hourly', () => {
    expect(scheduleProblem('0 3 * * *', 'UTC')).toBeNull();
    expect(scheduleProblem('15 */6 * * 1-5', 'Europe/Paris')).toBeNull();
    expect(scheduleProblem('0 0 3 * * *', 'UTC')).toMatch(/five fields/);
    expect(scheduleProblem('*/5 * * * *', 'UTC')).toBe('"schedule" may run at most once an hour.');
    expect(scheduleProblem('0 3 * * *', 'Mars/Olympus')).toMatch(/IANA time zone/);
    expect(scheduleProblem('0 25 * * *', 'UTC')).toMatch(/not a valid cron expression/);
  });

  it('give the next run and the interval', () => {
    expect(nextRun('0 3 * * *', 'UTC', new Date('2026-12-07T04:00:00Z'))?.toISOString()).toBe('2026-12-08T03:00:00.000Z');
    expect(nextRun('0 3 * * *', 'Europe/Paris', new Date('2026-12-07T04:00:00Z'))?.toISOString()).toBe('2026-12-08T02:00:00.000Z');
    expect(intervalMs('0 */6 * * *', 'UTC', new Date('2026-12-07T04:00:00Z'))).toBe(6 * 3600_000);
  });
});
