import { createHash, randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { Digest, digestOf, MAGIC, Open, openArtifact, Seal, storedChecksum } from './artifact.js';

const key = randomBytes(32);

async function collect(stages: NodeJS.ReadWriteStream[], input: Buffer[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (c: Buffer) => chunks.push(c));
  await pipeline([Readable.from(input), ...stages, sink]);
  return Buffer.concat(chunks);
}

const seal = (plain: Buffer, k = key, pieces = 7): Promise<Buffer> => {
  const size = Math.max(1, Math.ceil(plain.length / pieces));
  const parts: Buffer[] = [];
  for (let i = 0; i < plain.length; i += size) parts.push(plain.subarray(i, i + size));
  return collect([new Seal(k)], parts);
};

describe('backup artifacts', () => {
  it.each([0, 1, 65_535, 65_536, 65_537, 300_000])('open to exactly what was sealed (%i bytes), whatever the chunking', async (n) => {
    const plain = randomBytes(n);
    const sealed = await seal(plain);
    expect(sealed.subarray(0, MAGIC.length).equals(MAGIC)).toBe(true);
    expect(sealed.includes(plain.subarray(0, Math.min(64, n))) && n >= 16).toBe(false);
    // read back in odd pieces
    const pieces: Buffer[] = [];
    for (let i = 0; i < sealed.length; i += 1_000) pieces.push(sealed.subarray(i, i + 1_000));
    expect((await collect([new Open(key)], pieces)).equals(plain)).toBe(true);
  });

  it('refuse a changed byte, another key, a cut at a record boundary, a cut inside one, and bytes after the end', async () => {
    const plain = randomBytes(200_000);
    const sealed = await seal(plain);
    const flipped = Buffer.from(sealed);
    flipped[100_000] = (flipped[100_000] ?? 0) ^ 1;
    await expect(collect([new Open(key)], [flipped])).rejects.toThrow(/does not open|impossible size/);
    await expect(collect([new Open(randomBytes(32))], [sealed])).rejects.toThrow(/does not open/);
    // the records are 4 + 65,536 + 16 bytes: cut after the first two
    const boundary = MAGIC.length + 2 * (4 + 65_536 + 16);
    await expect(collect([new Open(key)], [sealed.subarray(0, boundary)])).rejects.toThrow(/cut short/);
    await expect(collect([new Open(key)], [sealed.subarray(0, sealed.length - 5)])).rejects.toThrow(/cut short|does not open/);
    await expect(collect([new Open(key)], [Buffer.concat([sealed, Buffer.from('more')])])).rejects.toThrow(/after its final record/);
    await expect(collect([new Open(key)], [Buffer.from('PGDMP not ours')])).rejects.toThrow(/not a Slipway backup/);
  });

  it('digest what passes, unchanged', async () => {
    const d = new Digest();
    const out = await collect([d], [Buffer.from('abc'), Buffer.from('def')]);
    expect(out.toString()).toBe('abcdef');
    expect(d.size).toBe(6);
    expect(d.hex()).toBe('bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721');
  });

  it('reads a stored artifact far larger than a stream buffer to its end for its checksum (the read-back of a large backup)', async () => {
    const big = randomBytes(8 * 1024 * 1024 + 3);
    const pieces: Buffer[] = [];
    for (let i = 0; i < big.length; i += 64 * 1024) pieces.push(big.subarray(i, i + 64 * 1024));
    const want = createHash('sha256').update(big).digest('hex');
    expect(await digestOf(Readable.from(pieces))).toEqual({ size: big.length, hex: want });
    expect(await storedChecksum(Readable.from(pieces))).toBe(want);
  });

  it('open as they are read, checked against their checksum at the end: a different one fails the stream', async () => {
    const plain = randomBytes(200_000);
    const sealed = await seal(plain);
    const sum = createHash('sha256').update(sealed).digest('hex');
    const read = async (sha: string): Promise<Buffer> => {
      const chunks: Buffer[] = [];
      for await (const c of openArtifact(() => Promise.resolve(Readable.from([sealed])), key, 'none', sha)) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    };
    expect((await read(sum)).equals(plain)).toBe(true);
    await expect(read('0'.repeat(64))).rejects.toThrow('the stored artifact does not match its checksum');
  });
});
