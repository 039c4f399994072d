import { createCipheriv, createDecipheriv, createHash, type Hash } from 'node:crypto';
import { PassThrough, Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';

/**
 * A backup's artifact at rest (docs/backups.md#artifacts): the dump, compressed, sealed with a
 * key of its own (derived from the installation's secret key and the backup's id) in records of
 * at most 64 KiB, each AES-256-GCM with its own tag. The nonce is the record's number and a
 * final flag, so a record cut off, dropped, repeated or moved fails to open, and so does an
 * artifact that ends before its final record. Nothing is written out before it was checked.
 */
export const MAGIC = Buffer.from('SLWBACKUP1\n', 'latin1');
const RECORD = 64 * 1024;
const TAG = 16;
/** the most a record may claim to hold (a corrupted length never makes us buffer gigabytes) */
const MAX_RECORD = RECORD + TAG;

const nonce = (n: number, final: boolean): Buffer => {
  const iv = Buffer.alloc(12);
  iv.writeUIntBE(n, 0, 6);
  iv[11] = final ? 1 : 0;
  return iv;
};

/** Seals a plaintext stream into the artifact form. */
export class Seal extends Transform {
  private pending: Buffer = Buffer.alloc(0);
  private n = 0;
  private started = false;

  constructor(private readonly key: Buffer) {
    super();
    if (key.length !== 32) throw new Error('a backup key is 32 bytes');
  }

  private record(plain: Buffer, final: boolean): void {
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce(this.n++, final));
    const body = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    this.push(len);
    this.push(body);
  }

  override _transform(chunk: Buffer, _e: BufferEncoding, done: TransformCallback): void {
    if (!this.started) {
      this.started = true;
      this.push(MAGIC);
    }
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    // the last full record waits: it is the final one when nothing follows
    while (this.pending.length > RECORD) {
      this.record(this.pending.subarray(0, RECORD), false);
      this.pending = this.pending.subarray(RECORD);
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    if (!this.started) this.push(MAGIC);
    this.record(this.pending, true);
    done();
  }
}

/** Opens the artifact form; fails (with a sentence) on a wrong key, a changed byte, or a cut. */
export class Open extends Transform {
  private pending: Buffer = Buffer.alloc(0);
  private n = 0;
  private magic = false;
  private done = false;

  constructor(private readonly key: Buffer) {
    super();
  }

  override _transform(chunk: Buffer, _e: BufferEncoding, callback: TransformCallback): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    try {
      this.drain(false);
      callback();
    } catch (err) {
      callback(err as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    try {
      this.drain(true);
      if (!this.done) throw new Error('the backup artifact is cut short: its final record is missing.');
      callback();
    } catch (err) {
      callback(err as Error);
    }
  }

  private drain(end: boolean): void {
    if (!this.magic) {
      if (this.pending.length < MAGIC.length) {
        if (end) throw new Error('not a Slipway backup artifact.');
        return;
      }
      if (!this.pending.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error('not a Slipway backup artifact.');
      this.pending = this.pending.subarray(MAGIC.length);
      this.magic = true;
    }
    while (this.pending.length >= 4) {
      if (this.done) throw new Error('the backup artifact has bytes after its final record.');
      const len = this.pending.readUInt32BE(0);
      if (len < TAG || len > MAX_RECORD) throw new Error('the backup artifact is corrupted (a record of an impossible size).');
      if (this.pending.length < 4 + len) return;
      const body = this.pending.subarray(4, 4 + len);
      this.pending = this.pending.subarray(4 + len);
      // a record is the final one when nothing follows it: try that reading first at the end of what arrived
      const last = end && this.pending.length === 0;
      const plain = this.open(body, last) ?? this.open(body, !last);
      if (plain === null) throw new Error('the backup artifact does not open: it was changed, or sealed with another key.');
      this.push(plain.data);
      if (plain.final) this.done = true;
      this.n++;
    }
  }

  private open(body: Buffer, final: boolean): { data: Buffer; final: boolean } | null {
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, nonce(this.n, final));
      decipher.setAuthTag(body.subarray(body.length - TAG));
      const data = Buffer.concat([decipher.update(body.subarray(0, body.length - TAG)), decipher.final()]);
      return { data, final };
    } catch {
      return null;
    }
  }
}

/** Counts and hashes what passes through. */
export class Digest extends Transform {
  readonly hash: Hash = createHash('sha256');
  size = 0;

  override _transform(chunk: Buffer, _e: BufferEncoding, done: TransformCallback): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }

  hex(): string {
    return this.hash.copy().digest('hex');
  }
}

/**
 * A digest that fails the stream at its end when the SHA-256 is not `expected`: the check of an
 * artifact as it is read, instead of a read of its own first. Its records are authenticated one by
 * one as they are opened anyway; this names a changed artifact in the backup's own terms.
 */
export class Checked extends Digest {
  constructor(private readonly expected: string) {
    super();
  }

  override _flush(done: TransformCallback): void {
    done(this.hex() === this.expected ? null : new Error('the stored artifact does not match its checksum: it was changed or damaged since it was taken.'));
  }
}

/**
 * The size and SHA-256 (hex) of a stream read in full. The digest is the pipeline's last stage,
 * so its readable side is drained here: left unread, it would stop the read at its buffer's size.
 */
export async function digestOf(stream: Readable): Promise<{ size: number; hex: string }> {
  const digest = new Digest();
  digest.resume();
  await pipeline(stream, digest);
  return { size: digest.size, hex: digest.hex() };
}

/** The SHA-256 (hex) of a stored artifact, read in full. */
export async function storedChecksum(stored: Readable): Promise<string> {
  return (await digestOf(stored)).hex;
}

/**
 * A stored artifact as the engine's tool reads it: opened with its backup's key, then
 * decompressed when its manifest says gzip. `stored` is fetched when the stream is made; any
 * failure (of the store, of a record, of gunzip) destroys the stream with its error.
 */
export function openArtifact(stored: () => Promise<Readable>, key: Buffer, compression: 'gzip' | 'none', sha256?: string): Readable {
  const out = new PassThrough();
  void (async () => {
    const stages: NodeJS.ReadWriteStream[] = [...(sha256 === undefined ? [] : [new Checked(sha256)]), new Open(key)];
    if (compression === 'gzip') stages.push(createGunzip());
    await pipeline([await stored(), ...stages, out]);
  })().catch((err: unknown) => { out.destroy(err as Error); });
  return out;
}
