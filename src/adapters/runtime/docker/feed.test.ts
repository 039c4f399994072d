import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Channel } from './feed.js';

describe('Channel', () => {
  it('hands items over in order and ends', async () => {
    const c = new Channel<number>();
    c.push(1);
    c.push(2);
    c.end();
    const got: number[] = [];
    for await (const n of c) got.push(n);
    expect(got).toEqual([1, 2]);
  });

  it('pauses a stream source while its reader is behind, and resumes it once half is read', async () => {
    let i = 0;
    // an endless source: only a pause keeps it from filling memory
    const source = new Readable({ objectMode: true, read() { this.push(++i); } });
    const c = new Channel<number>(() => { source.destroy(); }, {
      highWater: 100,
      onPressure: (full) => { if (full) source.pause(); else source.resume(); },
    });
    source.on('data', (n: number) => { c.push(n); });
    await new Promise((r) => setTimeout(r, 50));
    // paused at the high water mark: what the source produced stopped there (its own small buffer aside)
    expect(source.isPaused()).toBe(true);
    const produced = i;
    expect(produced).toBeLessThan(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(i).toBe(produced);

    const it = c[Symbol.asyncIterator]();
    const first: number[] = [];
    for (let n = 0; n < 49; n++) first.push(((await it.next()) as IteratorYieldResult<number>).value);
    expect(source.isPaused()).toBe(true);
    first.push(((await it.next()) as IteratorYieldResult<number>).value);
    expect(source.isPaused()).toBe(false);
    expect(first).toEqual(Array.from({ length: 50 }, (_, k) => k + 1));
    c.close();
  });
});
