import { describe, expect, it } from 'vitest';
import { addToRollup, evaluate, UPTIME_BUCKETS_MS } from './uptime.worker.js';
import { DEFAULT_UPTIME_RULES } from './policy.js';

type Status = 'unknown' | 'up' | 'down' | 'paused';
const run = (results: ('ok' | 'fail' | 'ignored')[], start: Status = 'up') => {
  let state = { status: start, failures: 0, successes: 0 };
  const seen: { status: Status; transition: string | null; recheck: boolean }[] = [];
  for (const r of results) {
    const e = evaluate(state, r === 'ok', r !== 'ignored', DEFAULT_UPTIME_RULES);
    state = e.state;
    seen.push({ status: e.state.status, transition: e.transition, recheck: e.recheck });
  }
  return seen;
};

describe('the uptime state machine', () => {
  it('goes down only after two consecutive failures, the first asking for a quick re-check', () => {
    expect(run(['fail', 'fail', 'fail'])).toEqual([
      { status: 'up', transition: null, recheck: true },
      { status: 'down', transition: 'down', recheck: false },
      { status: 'down', transition: null, recheck: false },
    ]);
  });

  it('ignores a single failure between successes', () => {
    expect(run(['fail', 'ok', 'fail', 'ok']).map((s) => s.transition)).toEqual([null, null, null, null]);
    expect(run(['fail', 'ok', 'fail', 'ok']).at(-1)?.status).toBe('up');
  });

  it('comes back up only after two consecutive successes, and says so once', () => {
    expect(run(['fail', 'fail', 'ok', 'fail', 'ok', 'ok', 'ok']).map((s) => s.transition)).toEqual([null, 'down', null, null, null, 'up', null]);
  });

  it('does not count failures during the project\'s own rollouts', () => {
    expect(run(['ignored', 'ignored', 'ignored', 'fail']).map((s) => s.status)).toEqual(['up', 'up', 'up', 'up']);
  });

  it('takes the first answer of an unknown or paused monitor without a notice', () => {
    for (const start of ['unknown', 'paused'] as const) {
      expect(run(['ok'], start)).toEqual([{ status: 'up', transition: null, recheck: false }]);
      expect(run(['fail', 'fail'], start).map((s) => s.transition)).toEqual([null, 'down']);
    }
  });
});

describe('hourly sums', () => {
  it('counts checks and failures and puts each response time in its bucket', () => {
    let r = { hour: 'h', checks: 0, failures: 0, sum_ms: 0, histogram: [] as number[] };
    for (const [ok, ms] of [[true, 5], [true, 30], [true, 30], [false, null], [true, 60_000]] as const) r = addToRollup(r, ok, ms);
    expect(r).toMatchObject({ checks: 5, failures: 1, sum_ms: 60_065 });
    expect(r.histogram).toHaveLength(UPTIME_BUCKETS_MS.length + 1);
    expect(r.histogram[0]).toBe(1);
    expect(r.histogram[2]).toBe(2);
    expect(r.histogram.at(-1)).toBe(1);
  });
});
