// The S3 backup destination's client (src/modules/backups/s3.ts, the official @aws-sdk/client-s3)
// against a local S3-protocol server (s3rver) behind a proxy that can refuse an upload or corrupt
// a read: the "test" action's canary round trip and the provider's own error codes, a streamed
// artifact with its size, and the address guard on endpoints. Unit tier: in-process servers only.
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointProblem, s3Error, S3Destination, type S3Settings } from '../../src/modules/backups/s3.js';
import { S3_KEYS, startLocalS3, type LocalS3 } from '../factories/s3.js';

describe('S3 backup destination', () => {
  let s3: LocalS3;
  const settings = (over: Partial<S3Settings> = {}): S3Settings => ({
    id: 'dst-test',
    endpoint: s3.endpoint,
    region: 'us-east-1',
    bucket: s3.bucket,
    prefix: 'team-a/',
    pathStyle: true,
    accessKeyId: S3_KEYS.access_key_id,
    secretAccessKey: S3_KEYS.secret_access_key,
    ...over,
  });

  beforeAll(async () => {
    s3 = await startLocalS3();
  });
  afterAll(async () => {
    await s3.close();
  });

  it('passes the test action: a canary written, listed, read back and deleted, leaving nothing', async () => {
    const r = await new S3Destination(settings(), true).test();
    expect(r).toEqual({ ok: true, code: null, steps: ['write', 'list', 'read back', 'delete'].map((step) => ({ step, ok: true, error: null })) });
    expect(await s3.keys()).toEqual([]);
  });

  it.each([
    ['an unknown access key', { accessKeyId: 'NOBODY' }, 'InvalidAccessKeyId'],
    ['a bucket that does not exist', { bucket: 'no-such-bucket' }, 'NoSuchBucket'],
    ['a host that does not resolve', { endpoint: 'http://no-such-host.invalid:9' }, 'ENOTFOUND'],
  ] as const)("fails the test action on %s with the provider's own code, at the first step", async (_what, over, code) => {
    const r = await new S3Destination(settings(over), true).test();
    expect(r.ok).toBe(false);
    expect(r.code).toBe(code);
    expect(r.steps).toHaveLength(1);
    expect(r.steps[0]).toMatchObject({ step: 'write', ok: false });
    expect(r.steps[0]?.error).toContain(code);
  });

  it('refuses a loopback endpoint unless the operator allows private addresses, when saved and at connect time', async () => {
    expect(endpointProblem(s3.endpoint, false)).toMatch(/loopback|this machine/);
    expect(endpointProblem('http://localhost:9000', false)).toMatch(/this machine/);
    expect(endpointProblem('http://169.254.169.254', false)).toMatch(/169\.254\.169\.254/);
    expect(endpointProblem('https://s3.eu-west-1.amazonaws.com', false)).toBeNull();
    expect(endpointProblem('https://user:pw@s3.example.com', false)).toMatch(/user name or password/);
    expect(endpointProblem('https://s3.example.com/bucket', false)).toMatch(/address only/);
    expect(endpointProblem('ftp://s3.example.com', false)).toMatch(/http or https/);
    const r = await new S3Destination(settings(), false).test();
    expect(r).toMatchObject({ ok: false, code: 'EndpointRefused' });
    expect(await s3.keys()).toEqual([]);
  });

  it('stores a streamed artifact of a known size whole under its prefix, reads it back, sizes and deletes it', async () => {
    const d = new S3Destination(settings(), true);
    const body = randomBytes(3 * 1024 * 1024 + 17);
    const key = 'ws1/db1/b1.slwb';
    const parts: Buffer[] = [];
    for (let i = 0; i < body.length; i += 64 * 1024) parts.push(body.subarray(i, i + 64 * 1024));
    await d.put(key, Readable.from(parts), body.length);
    expect(await s3.keys()).toEqual(['team-a/ws1/db1/b1.slwb']);
    expect(await d.size(key)).toBe(body.length);
    const chunks: Buffer[] = [];
    for await (const c of await d.get(key)) chunks.push(c as Buffer);
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(sha(Buffer.concat(chunks))).toBe(sha(body));

    // the proxy corrupts the next read: the bytes differ (the worker's read-back catches it)
    s3.corruptNextRead();
    const bad: Buffer[] = [];
    for await (const c of await d.get(key)) bad.push(c as Buffer);
    expect(sha(Buffer.concat(bad))).not.toBe(sha(body));

    expect(await d.delete(key)).toBe(true);
    expect(await d.size(key)).toBeNull();
    expect(await d.delete(key)).toBe(false);
  });

  it("reports a refused upload with the provider's code, and stores nothing", async () => {
    const d = new S3Destination(settings(), true);
    s3.refuseNextUpload();
    const err = await d.put('ws1/db1/b2.slwb', Readable.from([randomBytes(1000)]), 1000).then(() => null, (e: unknown) => e);
    expect(s3Error(err)).toMatchObject({ code: 'AccessDenied' });
    expect(s3Error(err).message).toMatch(/^AccessDenied \(HTTP 403\): /);
    expect(await s3.keys()).toEqual([]);
  });
});
