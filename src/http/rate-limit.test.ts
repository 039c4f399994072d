import { describe, expect, it } from 'vitest';
import { TokenBuckets } from './rate-limit.js';

class ManualClock {
  constructor(public ms = 1_000_000) {}
  now(): Date {
    return new Date(this.ms);
  }
}

describe('TokenBuckets', () => {
  it('lets a burst through, then refuses with the seconds to wait', () => {
    const clock = new ManualClock();
    const b = new TokenBuckets({ rate: 2, burst: 3 }, clock);
    expect([b.take('k'), b.take('k'), b.take('k')]).toEqual([0, 0, 0]);
    expect(b.take('k')).toBe(1);
    clock.ms += 500;
    expect(b.take('k')).toBe(0);
    expect(b.take('k')).toBe(1);
  });

  it('keeps separate buckets per key', () => {
    const b = new TokenBuckets({ rate: 1, burst: 1 }, new ManualClock());
    expect(b.take('a')).toBe(0);
    expect(b.take('b')).toBe(0);
    expect(b.take('a')).toBe(1);
  });

  it('reports whole seconds until a token exists at slow rates', () => {
    const b = new TokenBuckets({ rate: 0.1, burst: 1 }, new ManualClock());
    expect(b.take('a')).toBe(0);
    expect(b.take('a')).toBe(10);
  });

  it('survives a clock that steps backwards', () => {
    const clock = new ManualClock();
    const b = new TokenBuckets({ rate: 1, burst: 2 }, clock);
    expect(b.take('a')).toBe(0);
    clock.ms -= 86_400_000;
    expect(b.take('a')).toBe(0);
    expect(b.take('a')).toBe(1);
  });
});
