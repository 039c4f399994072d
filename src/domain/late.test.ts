import { describe, expect, it } from 'vitest';
import { Late } from './late.js';

describe('Late', () => {
  it('is the idle stand-in until set, the value while set, and the idle one again once cleared', () => {
    const idle = { name: 'idle' };
    const leader = { name: 'leader' };
    const late = new Late(idle);
    expect(late.get()).toBe(idle);
    late.set(leader);
    expect(late.get()).toBe(leader);
    late.clear();
    expect(late.get()).toBe(idle);
  });
});
