import { createHash } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { blockedAddress } from '../../adapters/notify/ssrf.js';
import type { Destination } from './destinations.js';

/** An S3-compatible bucket as a workspace configured it (docs/backups.md#destinations); credentials opened. */
export interface S3Settings {
  id: string;
  endpoint: string;
  region: string;
  bucket: string;
  prefix: string;
  pathStyle: boolean;
  accessKeyId: string;
  secretAccessKey: string;
}

const HINT = 'the operator can allow such endpoints with --backup-allow-private yes';
const LOCALHOST = /^(localhost|.+\.localhost)\.?$/i;

/** Why an endpoint may not be used, as a sentence naming `endpoint`; null when it may. Checked when saved, and every address again at connect time. */
export function endpointProblem(endpoint: string, allowPrivate: boolean): string | null {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    return '"endpoint" must be an http or https URL, like https://s3.eu-west-1.amazonaws.com.';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return '"endpoint" must be an http or https URL.';
  if (u.username !== '' || u.password !== '') return '"endpoint" must not contain a user name or password: give the keys as access_key_id and secret_access_key.';
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '') return '"endpoint" must be the server\'s address only (scheme, host and port); the bucket and prefix have fields of their own.';
  if (allowPrivate) return null;
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0) {
    const reason = blockedAddress(host);
    if (reason !== null) return `"endpoint" points at ${reason} (${host}); backups may go only to public addresses (${HINT}).`;
  } else if (LOCALHOST.test(host)) {
    return `"endpoint" points at this machine (${host}); backups may go only to public addresses (${HINT}).`;
  }
  return null;
}

/** A DNS lookup that refuses blocked addresses: the connection goes to the address that was checked. */
function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
      if (err !== null) {
        callback(err, '', 4);
        return;
      }
      const list = addresses;
      for (const a of list) {
        const reason = allowPrivate ? null : blockedAddress(a.address);
        if (reason !== null) {
          const refused = Object.assign(new Error(`the endpoint's host resolves to ${reason} (${a.address}); ${HINT}`), { code: 'EndpointRefused' });
          callback(refused, '', 4);
          return;
        }
      }
      if (options.all === true) callback(null, list);
      else callback(null, list[0]?.address ?? '', list[0]?.family ?? 4);
    });
  };
}

/** The provider's own error code (AccessDenied, NoSuchBucket, ENOTFOUND…) and its message. */
export function s3Error(err: unknown): { code: string; message: string } {
  const e = err as { name?: string; Code?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } } | null;
  const code = e?.Code ?? (e?.name !== undefined && e.name !== 'Error' ? e.name : undefined) ?? e?.code ?? 'Error';
  const status = e?.$metadata?.httpStatusCode;
  const message = (e?.message ?? String(err)).slice(0, 300);
  return { code, message: `${code}${status === undefined ? '' : ` (HTTP ${String(status)})`}: ${message}` };
}

const quiet = (): void => undefined;
const SILENT = { trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet };

/** A bucket of an S3-compatible service, through the official client. */
export class S3Destination implements Destination {
  readonly id: string;
  private client: S3Client | null = null;

  constructor(
    private readonly s: S3Settings,
    private readonly allowPrivate: boolean,
  ) {
    this.id = s.id;
  }

  private async s3(): Promise<{ client: S3Client; m: typeof import('@aws-sdk/client-s3') }> {
    // the client is loaded only when an S3 destination is used (it is large)
    const m = await import('@aws-sdk/client-s3');
    if (this.client === null) {
      const problem = endpointProblem(this.s.endpoint, this.allowPrivate);
      if (problem !== null) throw Object.assign(new Error(problem), { code: 'EndpointRefused' });
      const { NodeHttpHandler } = await import('@smithy/node-http-handler');
      const lookup = guardedLookup(this.allowPrivate);
      this.client = new m.S3Client({
        endpoint: this.s.endpoint,
        region: this.s.region,
        forcePathStyle: this.s.pathStyle,
        credentials: { accessKeyId: this.s.accessKeyId, secretAccessKey: this.s.secretAccessKey },
        maxAttempts: 2,
        // the client's own warnings would go to the console; every failure is in the backup's record
        logger: SILENT,
        // checksums only where the operation requires one: the aws-chunked encoding the client
        // otherwise sends is not understood by many S3-compatible servers (docs/backups.md#destinations)
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        requestHandler: new NodeHttpHandler({ httpAgent: new HttpAgent({ keepAlive: true, lookup }), httpsAgent: new HttpsAgent({ keepAlive: true, lookup }), connectionTimeout: 10_000, requestTimeout: 300_000 }),
      });
    }
    return { client: this.client, m };
  }

  /** The access key id's first four characters (listings show only those). */
  accessKeyHint(): string {
    return `${this.s.accessKeyId.slice(0, 4)}…`;
  }

  private key(key: string): string {
    return `${this.s.prefix}${key}`;
  }

  async put(key: string, body: Readable, size?: number): Promise<void> {
    const { client, m } = await this.s3();
    if (size === undefined) {
      // small objects (manifests, canaries): read whole
      const chunks: Buffer[] = [];
      for await (const c of body) chunks.push(c as Buffer);
      const data = Buffer.concat(chunks);
      await client.send(new m.PutObjectCommand({ Bucket: this.s.bucket, Key: this.key(key), Body: data, ContentLength: data.length }));
      return;
    }
    await client.send(new m.PutObjectCommand({ Bucket: this.s.bucket, Key: this.key(key), Body: body, ContentLength: size }));
  }

  async get(key: string): Promise<Readable> {
    const { client, m } = await this.s3();
    const r = await client.send(new m.GetObjectCommand({ Bucket: this.s.bucket, Key: this.key(key) }));
    if (r.Body === undefined) throw new Error('the provider answered without a body');
    return r.Body as Readable;
  }

  async size(key: string): Promise<number | null> {
    const { client, m } = await this.s3();
    try {
      const r = await client.send(new m.HeadObjectCommand({ Bucket: this.s.bucket, Key: this.key(key) }));
      return r.ContentLength ?? null;
    } catch (err) {
      const { code } = s3Error(err);
      if (code === 'NotFound' || code === 'NoSuchKey') return null;
      throw err;
    }
  }

  /**
   * The objects under one workspace's part of the destination (the sweep's view), keys without
   * the destination's prefix; at most `limit` of them a pass.
   */
  async files(workspaceId: string, limit = 10_000): Promise<{ key: string; modifiedMs: number }[]> {
    const { client, m } = await this.s3();
    const out: { key: string; modifiedMs: number }[] = [];
    let token: string | undefined;
    do {
      const r = await client.send(new m.ListObjectsV2Command({ Bucket: this.s.bucket, Prefix: this.key(`${workspaceId}/`), ContinuationToken: token, MaxKeys: 1000 }));
      for (const o of r.Contents ?? []) {
        if (o.Key === undefined || !o.Key.startsWith(this.s.prefix)) continue;
        out.push({ key: o.Key.slice(this.s.prefix.length), modifiedMs: o.LastModified?.getTime() ?? 0 });
      }
      token = r.IsTruncated === true ? r.NextContinuationToken : undefined;
    } while (token !== undefined && out.length < limit);
    return out;
  }

  async delete(key: string): Promise<boolean> {
    const { client, m } = await this.s3();
    const there = (await this.size(key)) !== null;
    await client.send(new m.DeleteObjectCommand({ Bucket: this.s.bucket, Key: this.key(key) }));
    return there;
  }

  /**
   * The "test" action: a canary object written, listed, read back and deleted through the same
   * calls a backup makes. Each step's outcome, and the provider's own error code at the first
   * that fails.
   */
  async test(): Promise<{ ok: boolean; steps: { step: string; ok: boolean; error: string | null }[]; code: string | null }> {
    const steps: { step: string; ok: boolean; error: string | null }[] = [];
    const key = `slipway-canary/${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}.txt`;
    const content = Buffer.from(`Slipway backup destination test ${new Date().toISOString()}\n`);
    const run = async (step: string, fn: () => Promise<void>): Promise<boolean> => {
      try {
        await fn();
        steps.push({ step, ok: true, error: null });
        return true;
      } catch (err) {
        const e = s3Error(err);
        steps.push({ step, ok: false, error: e.message });
        code = e.code;
        return false;
      }
    };
    let code: string | null = null;
    const ok =
      (await run('write', async () => { await this.put(key, Readable.from([content])); })) &&
      (await run('list', async () => {
        const { client, m } = await this.s3();
        const r = await client.send(new m.ListObjectsV2Command({ Bucket: this.s.bucket, Prefix: this.key('slipway-canary/'), MaxKeys: 1000 }));
        if (!(r.Contents ?? []).some((o) => o.Key === this.key(key))) throw Object.assign(new Error('the object just written is not listed'), { Code: 'NotListed' });
      })) &&
      (await run('read back', async () => {
        const chunks: Buffer[] = [];
        for await (const c of await this.get(key)) chunks.push(c as Buffer);
        const got = Buffer.concat(chunks);
        const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
        if (sha(got) !== sha(content)) throw Object.assign(new Error(`the object read back differs from what was written (${String(got.length)} bytes where ${String(content.length)} were written)`), { Code: 'ReadBackMismatch' });
      })) &&
      (await run('delete', async () => { await this.delete(key); }));
    return { ok, steps, code };
  }
}
