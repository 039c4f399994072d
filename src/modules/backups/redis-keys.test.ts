import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { restoreProblem, toolsFor, toolsOfManifest } from './engines.js';
import { encodeRecord, KeyRecordReader, keysHeader, redisKeys, type KeyRecord } from './redis-keys.js';

async function read(chunks: Buffer[]): Promise<KeyRecord[]> {
  const out: KeyRecord[] = [];
  for await (const r of Readable.from(chunks).pipe(new KeyRecordReader()) as AsyncIterable<KeyRecord>) out.push(r);
  return out;
}

const records: KeyRecord[] = [
  { key: Buffer.from('item:1'), pttl: -1, payload: Buffer.from([0, 1, 2, 255]) },
  { key: Buffer.from([0xff, 0x00, 0x3a]), pttl: 3_600_000, payload: Buffer.alloc(20_000, 7) },
  { key: Buffer.from(''), pttl: 1, payload: Buffer.alloc(0) },
];

describe('the Redis key records of a shared tenant', () => {
  it('reads back every record written, binary keys and ttls included, however the stream is cut', async () => {
    const whole = Buffer.concat([keysHeader(), ...records.map(encodeRecord)]);
    expect(await read([whole])).toEqual(records);
    // one byte at a time: a record split anywhere is put together again
    const bytes = [...whole.subarray(0, 200)].map((b) => Buffer.from([b]));
    expect(await read([...bytes, whole.subarray(200)])).toEqual(records);
    expect(await read([keysHeader()])).toEqual([]);
  });

  it('refuses a stream that is not one, or that is cut short, with a sentence', async () => {
    await expect(read([Buffer.from('REDIS0011 not ours at all')])).rejects.toThrow('this is not a backup of Redis keys (its header is wrong).');
    const whole = Buffer.concat([keysHeader(), ...records.map(encodeRecord)]);
    await expect(read([whole.subarray(0, whole.length - 5)])).rejects.toThrow('the backup of Redis keys ends in the middle of a record: it is damaged.');
    await expect(read([Buffer.alloc(0)])).rejects.toThrow('ends in the middle of a record');
    // a length past what Redis allows is refused before anything that large is awaited
    const huge = Buffer.alloc(4);
    huge.writeUInt32BE(0xffffffff);
    await expect(read([keysHeader(), huge])).rejects.toThrow('holds a key longer than Redis allows');
  });

  it("restores a tenant's keys anywhere, and a whole server's snapshot only into a server of its own", () => {
    expect(toolsFor('redis', 'shared')).toBe(redisKeys);
    expect(toolsFor('redis', 'container')).not.toBe(redisKeys);
    expect(toolsFor('postgresql', 'shared')).toBe(toolsFor('postgresql', 'container'));
    expect(toolsOfManifest({ database: { type: 'redis' }, layout: 'tenant' })).toBe(redisKeys);
    expect(toolsOfManifest({ database: { type: 'redis' } })).not.toBe(redisKeys);
    expect(restoreProblem({ database: { type: 'redis' }, layout: 'server' }, 'shared')).toMatch(/snapshot of a whole Redis server/);
    expect(restoreProblem({ database: { type: 'redis' } }, 'shared')).toMatch(/snapshot of a whole Redis server/);
    expect(restoreProblem({ database: { type: 'redis' }, layout: 'tenant' }, 'container')).toBeNull();
    expect(restoreProblem({ database: { type: 'postgresql' }, layout: 'server' }, 'shared')).toBeNull();
  });
});
