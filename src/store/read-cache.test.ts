import { describe, expect, it } from 'vitest';
import { ReadCache } from './read-cache.js';

describe('ReadCache', () => {
  const clock = () => {
    const c = { t: 0, now: () => c.t };
    return c;
  };

  it('answers from memory until the entry has lived ttlMs from when its load began, then loads again', async () => {
    const c = clock();
    const cache = new ReadCache<string>(1000, 10, c.now);
    let loads = 0;
    const load = () => {
      loads += 1;
      return Promise.resolve(`v${String(loads)}`);
    };
    expect(await cache.get('k', load)).toBe('v1');
    c.t = 999;
    expect(await cache.get('k', load)).toBe('v1');
    c.t = 1000;
    expect(await cache.get('k', load)).toBe('v2');
    expect(loads).toBe(2);
  });

  it('keeps no misses', async () => {
    const cache = new ReadCache<string>(1000, 10, clock().now);
    let loads = 0;
    const miss = () => {
      loads += 1;
      return Promise.resolve(undefined);
    };
    expect(await cache.get('k', miss)).toBeUndefined();
    expect(await cache.get('k', miss)).toBeUndefined();
    expect(loads).toBe(2);
  });

  it('forgets everything on invalidate, including a load that was under way', async () => {
    const cache = new ReadCache<string>(1000, 10, clock().now);
    expect(await cache.get('a', () => Promise.resolve('old'))).toBe('old');
    cache.invalidate();
    expect(await cache.get('a', () => Promise.resolve('new'))).toBe('new');

    let release: (v: string) => void = () => undefined;
    const pending = cache.get('b', () => new Promise<string>((r) => { release = r; }));
    cache.invalidate();
    release('read before the write');
    expect(await pending).toBe('read before the write');
    expect(await cache.get('b', () => Promise.resolve('after'))).toBe('after');
  });

  it('holds at most max entries, dropping the oldest', async () => {
    const cache = new ReadCache<string>(1000, 2, clock().now);
    await cache.get('a', () => Promise.resolve('a'));
    await cache.get('b', () => Promise.resolve('b'));
    await cache.get('c', () => Promise.resolve('c'));
    expect(cache.size).toBe(2);
    expect(await cache.get('a', () => Promise.resolve('a2'))).toBe('a2');
    expect(await cache.get('c', () => Promise.resolve('c2'))).toBe('c');
  });
});
