import { Transform, type Readable, type TransformCallback, type Writable } from 'node:stream';
import type { DatabaseAddress } from '../../domain/database.js';
import { connectRedis } from '../databases/servers.js';
import type { Contents, EngineTools, SharedScope, ToolContext } from './engines.js';

/**
 * Backups of a Redis tenant on a shared server (docs/backups.md#shared-servers): only the keys
 * under its prefix, never the server's whole data set. The administrative login lists the
 * tenant's keys (SCAN, which tenants may not run); the tenant's own login reads each one (DUMP
 * and PTTL, which its ACL allows under its prefix only). What is written is a stream of records,
 * each key without the prefix, so a backup restores under another tenant's prefix, or into a
 * server of its own (no prefix). RESTORE is in Redis's `@dangerous` category, which tenants are
 * denied: a restore runs on the administrative login, with names Slipway makes (prefix + key).
 */

const MAGIC = Buffer.from('SLIPWAY-REDIS-KEYS/1\n');
/** Redis's own limits: a key or a value of at most 512 MiB; past them the stream is damaged. */
const MAX_KEY = 512 * 1024 * 1024;
const MAX_PAYLOAD = 512 * 1024 * 1024;
const SCAN_COUNT = 1000;
const RESTORE_BATCH = 500;

export interface KeyRecord {
  /** without the tenant's prefix */
  key: Buffer;
  /** milliseconds to live; -1: no expiry */
  pttl: number;
  /** DUMP's serialized value (RDB format with its checksum) */
  payload: Buffer;
}

/** One record as written: key length, key, ttl (ms, -1 none), payload length, payload. */
export function encodeRecord(r: KeyRecord): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(r.key.length);
  const mid = Buffer.alloc(12);
  mid.writeBigInt64BE(BigInt(r.pttl), 0);
  mid.writeUInt32BE(r.payload.length, 8);
  return Buffer.concat([head, r.key, mid, r.payload]);
}

export const keysHeader = (): Buffer => Buffer.from(MAGIC);

/**
 * Reads the stream back into records (objectMode out), with bounded sizes: a record claiming
 * more than Redis allows, a wrong header or a stream cut short fail with a sentence.
 */
export class KeyRecordReader extends Transform {
  private chunks: Buffer[] = [];
  private length = 0;
  /** the bytes the next step needs: chunks are only joined once that many have come (a large value is copied once) */
  private needed = MAGIC.length;
  private headerSeen = false;

  constructor() {
    super({ readableObjectMode: true });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    try {
      if (this.length >= this.needed) this.drain();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    if (!this.headerSeen || this.length > 0) {
      done(new Error('the backup of Redis keys ends in the middle of a record: it is damaged.'));
      return;
    }
    done();
  }

  private drain(): void {
    let buf = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.length);
    try {
      if (!this.headerSeen) {
        if (buf.length < MAGIC.length) return;
        if (!buf.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error('this is not a backup of Redis keys (its header is wrong).');
        buf = buf.subarray(MAGIC.length);
        this.headerSeen = true;
      }
      for (;;) {
        this.needed = 4;
        if (buf.length < 4) return;
        const keyLen = buf.readUInt32BE(0);
        if (keyLen > MAX_KEY) throw new Error('the backup of Redis keys holds a key longer than Redis allows: it is damaged.');
        this.needed = 4 + keyLen + 12;
        if (buf.length < this.needed) return;
        const pttl = Number(buf.readBigInt64BE(4 + keyLen));
        const payloadLen = buf.readUInt32BE(4 + keyLen + 8);
        if (payloadLen > MAX_PAYLOAD) throw new Error('the backup of Redis keys holds a value larger than Redis allows: it is damaged.');
        this.needed = 4 + keyLen + 12 + payloadLen;
        if (buf.length < this.needed) return;
        const key = Buffer.from(buf.subarray(4, 4 + keyLen));
        const payload = Buffer.from(buf.subarray(4 + keyLen + 12, this.needed));
        buf = buf.subarray(this.needed);
        this.push({ key, pttl, payload } satisfies KeyRecord);
      }
    } finally {
      this.chunks = buf.length === 0 ? [] : [buf];
      this.length = buf.length;
    }
  }
}

type RedisClient = import('ioredis').Redis;

/** A connected client of a Redis server, by URL (a shared server's administrative login) or address; fails with the reason. */
export async function redisLogin(url: string | DatabaseAddress): Promise<RedisClient> {
  const { Redis } = await import('ioredis');
  const options = { connectTimeout: 10_000, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false } as const;
  const client =
    typeof url === 'string' ? new Redis(url, options) : new Redis({ host: url.host, port: url.port, username: url.username, password: url.password, ...options });
  await connectRedis(client);
  return client;
}

/** Every key under `prefix` (SCAN on the administrative login), a batch at a time. */
async function* scan(admin: RedisClient, prefix: string): AsyncGenerator<Buffer[]> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  let cursor = '0';
  do {
    const [next, keys] = (await admin.callBuffer('SCAN', cursor, 'MATCH', pattern, 'COUNT', String(SCAN_COUNT))) as [Buffer, Buffer[]];
    cursor = next.toString();
    if (keys.length > 0) yield keys;
  } while (cursor !== '0');
}

const write = (out: Writable, chunk: Buffer): Promise<void> =>
  out.write(chunk)
    ? Promise.resolve()
    : new Promise((resolve, reject) => {
        const onDrain = (): void => { out.off('error', onError); resolve(); };
        const onError = (err: Error): void => { out.off('drain', onDrain); reject(err); };
        out.once('drain', onDrain);
        out.once('error', onError);
      });

function scopeOf(ctx: Pick<ToolContext, 'shared'>): SharedScope {
  if (ctx.shared === undefined) throw new Error('a backup of Redis keys needs the shared server it is on.');
  return ctx.shared;
}

/** Where a restore writes: the tenant's prefix on a shared server (administrative login), or a server of its own (its login, no prefix). */
async function target(ctx: Pick<ToolContext, 'shared' | 'direct'>): Promise<{ client: RedisClient; prefix: Buffer }> {
  if (ctx.shared !== undefined) return { client: await redisLogin(ctx.shared.admin), prefix: Buffer.from(ctx.shared.prefix) };
  return { client: await redisLogin(ctx.direct), prefix: Buffer.alloc(0) };
}

/** The keys a server holds (DBSIZE), or, on a shared server, those under the tenant's prefix (SCAN on the administrative login). */
export async function countKeys(direct: DatabaseAddress, shared?: SharedScope): Promise<Contents> {
  if (shared === undefined) {
    const c = await redisLogin(direct);
    try {
      return { kind: 'keys', keys: await c.dbsize() };
    } finally {
      c.disconnect();
    }
  }
  const admin = await redisLogin(shared.admin);
  try {
    let keys = 0;
    for await (const batch of scan(admin, shared.prefix)) keys += batch.length;
    return { kind: 'keys', keys };
  } finally {
    admin.disconnect();
  }
}

export const redisKeys: EngineTools = {
  compress: true,
  extension: 'keys',
  restoreWhen: 'after-ready',
  async dump(ctx, out) {
    const shared = scopeOf(ctx);
    const admin = await redisLogin(shared.admin);
    const tenant = await redisLogin(ctx.direct);
    let keys = 0;
    let version = 'unknown';
    try {
      version = /^redis_version:(.*)$/m.exec(await admin.info('server'))?.[1]?.trim() ?? 'unknown';
      const prefix = Buffer.from(shared.prefix);
      await write(out, keysHeader());
      for await (const batch of scan(admin, shared.prefix)) {
        if (ctx.signal.aborted) throw new Error('Slipway is stopping');
        // the values are read with the tenant's own login: its ACL reaches nothing outside its prefix
        const p = tenant.pipeline();
        for (const k of batch) {
          p.dumpBuffer(k);
          p.pttl(k);
        }
        const replies = (await p.exec()) ?? [];
        for (const [i, k] of batch.entries()) {
          const [dumpErr, payload] = replies[2 * i] ?? [new Error('no reply'), null];
          const [, pttl] = replies[2 * i + 1] ?? [null, -2];
          if (dumpErr !== null) throw new Error(`DUMP of a key was refused: ${dumpErr.message}`);
          // a key that expired or was deleted since the SCAN is not in the backup
          if (payload === null || Number(pttl) === -2) continue;
          if (!k.subarray(0, prefix.length).equals(prefix)) continue;
          await write(out, encodeRecord({ key: k.subarray(prefix.length), pttl: Number(pttl), payload: payload as Buffer }));
          keys++;
        }
      }
      out.end();
    } finally {
      admin.disconnect();
      tenant.disconnect();
    }
    return { engineVersion: `Redis ${version}`, tool: 'SCAN of the key prefix, DUMP and PTTL per key', contents: { kind: 'keys', keys } };
  },
  async restore(ctx, source) {
    await restoreRecords(ctx, source);
  },
  async replace(ctx, source) {
    // the tenant's keys removed first (not atomic: docs/backups.md#shared-servers), then the backup's
    const shared = scopeOf(ctx);
    const admin = await redisLogin(shared.admin);
    try {
      for await (const batch of scan(admin, shared.prefix)) await admin.callBuffer('UNLINK', ...batch);
    } finally {
      admin.disconnect();
    }
    await restoreRecords(ctx, source);
  },
  count: countKeys,
};

async function restoreRecords(ctx: Pick<ToolContext, 'shared' | 'direct' | 'signal'>, source: Readable): Promise<void> {
  const { client, prefix } = await target(ctx);
  const reader = new KeyRecordReader();
  source.once('error', (err) => reader.destroy(err));
  source.pipe(reader);
  try {
    let batch = client.pipeline();
    let n = 0;
    const flush = async (): Promise<void> => {
      if (n === 0) return;
      const replies = (await batch.exec()) ?? [];
      const failed = replies.find(([err]) => err !== null)?.[0];
      if (failed) throw new Error(`RESTORE of a key was refused: ${failed.message}`);
      batch = client.pipeline();
      n = 0;
    };
    for await (const r of reader as AsyncIterable<KeyRecord>) {
      if (ctx.signal.aborted) throw new Error('Slipway is stopping');
      batch.restore(Buffer.concat([prefix, r.key]), r.pttl < 0 ? 0 : Math.max(1, r.pttl), r.payload, 'REPLACE');
      if (++n >= RESTORE_BATCH) await flush();
    }
    await flush();
  } finally {
    client.disconnect();
  }
}
