import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodePayload, MAX_COMMIT_MESSAGE, parsePush, payloadDigest, PayloadError, sign, verifySignature } from './github-protocol.js';

const SECRET = "It's a Secret to Everybody";
const SHA = 'a'.repeat(40);

describe('GitHub signatures', () => {
  it('matches the example of GitHub\u2019s documentation', () => {
    // docs.github.com "Validating webhook deliveries": secret, payload and expected signature.
    expect(sign(SECRET, 'Hello, World!')).toBe('sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17');
  });

  it('accepts the signature of the exact body, in either case of hex', () => {
    const body = Buffer.from('{"zen":"Keep it logically awesome."}');
    const header = sign(SECRET, body);
    expect(verifySignature(SECRET, body, header)).toEqual({ ok: true });
    expect(verifySignature(SECRET, body, `sha256=${header.slice(7).toUpperCase()}`)).toEqual({ ok: true });
  });

  it('refuses a missing, malformed, foreign or stale signature', () => {
    const body = Buffer.from('{}');
    const sha1 = `sha1=${createHmac('sha1', SECRET).update(body).digest('hex')}`;
    expect(verifySignature(SECRET, body, undefined)).toEqual({ ok: false, problem: 'missing' });
    expect(verifySignature(SECRET, body, '')).toEqual({ ok: false, problem: 'missing' });
    expect(verifySignature(SECRET, body, sha1)).toEqual({ ok: false, problem: 'malformed' });
    expect(verifySignature(SECRET, body, createHmac('sha256', SECRET).update(body).digest('hex'))).toEqual({ ok: false, problem: 'malformed' });
    expect(verifySignature(SECRET, body, `${sign(SECRET, body)}00`)).toEqual({ ok: false, problem: 'malformed' });
    expect(verifySignature(SECRET, body, [sign(SECRET, body)])).toEqual({ ok: false, problem: 'malformed' });
    expect(verifySignature(SECRET, body, sign('another secret', body))).toEqual({ ok: false, problem: 'mismatch' });
    expect(verifySignature(SECRET, Buffer.from('{ }'), sign(SECRET, body))).toEqual({ ok: false, problem: 'mismatch' });
    expect(verifySignature('', body, sign('', body))).toEqual({ ok: false, problem: 'mismatch' });
  });
});

describe('GitHub payloads', () => {
  it('reads JSON bodies and form-encoded `payload` fields', () => {
    expect(decodePayload(Buffer.from('{"a":1}'), 'application/json')).toEqual({ a: 1 });
    const form = new URLSearchParams({ payload: '{"a":"x&y"}' }).toString();
    expect(decodePayload(Buffer.from(form), 'application/x-www-form-urlencoded')).toEqual({ a: 'x&y' });
    expect(() => decodePayload(Buffer.from('{'), 'application/json')).toThrow(new PayloadError('The request body is not valid JSON.'));
    expect(() => decodePayload(Buffer.from('a=1'), 'application/x-www-form-urlencoded')).toThrow(PayloadError);
  });

  const push = (over: Record<string, unknown> = {}) => ({
    ref: 'refs/heads/main',
    after: SHA,
    deleted: false,
    repository: { full_name: 'acme/web' },
    head_commit: { id: SHA, message: 'Fix the thing' },
    ...over,
  });

  it('reads a push to a branch, branch names with slashes included', () => {
    expect(parsePush(push())).toEqual({ kind: 'branch', repoFullName: 'acme/web', branch: 'main', commitSha: SHA, commitMessage: 'Fix the thing' });
    expect(parsePush(push({ ref: 'refs/heads/feature/x', head_commit: null }))).toMatchObject({ kind: 'branch', branch: 'feature/x', commitMessage: undefined });
    const long = parsePush(push({ head_commit: { message: 'x'.repeat(MAX_COMMIT_MESSAGE + 10) } }));
    expect(long.kind === 'branch' ? long.commitMessage?.length : 0).toBe(MAX_COMMIT_MESSAGE);
  });

  it('reads the installation of a GitHub App delivery, and only a positive integer as one', () => {
    expect(parsePush(push({ installation: { id: 42, node_id: 'x' } }))).toMatchObject({ kind: 'branch', installationId: 42 });
    expect(parsePush(push())).toMatchObject({ kind: 'branch', installationId: undefined });
    for (const id of ['42', 0, -1, 1.5, null, 2 ** 60]) {
      expect(parsePush(push({ installation: { id } }))).toMatchObject({ kind: 'branch', installationId: undefined });
    }
  });

  it('digests the raw body: the same bytes, the same digest', () => {
    expect(payloadDigest(Buffer.from('{"a":1}'))).toBe(payloadDigest(Buffer.from('{"a":1}')));
    expect(payloadDigest(Buffer.from('{"a":1}'))).not.toBe(payloadDigest(Buffer.from('{"a": 1}')));
    expect(payloadDigest(Buffer.from(''))).toMatch(/^[0-9a-f]{64}$/);
  });

  it('ignores tags and branch deletions', () => {
    expect(parsePush(push({ ref: 'refs/tags/v1.0.0' }))).toMatchObject({ kind: 'ignored', reason: 'refs/tags/v1.0.0 is not a branch; only pushes to branches deploy.' });
    expect(parsePush(push({ deleted: true, after: '0'.repeat(40), head_commit: null }))).toMatchObject({ kind: 'ignored', reason: 'The branch main was deleted; there is nothing to deploy.' });
    expect(parsePush(push({ after: '0'.repeat(40) }))).toMatchObject({ kind: 'ignored' });
    expect(parsePush(push({ ref: 'refs/heads/' }))).toMatchObject({ kind: 'ignored' });
  });

  it('refuses payloads without what every push carries', () => {
    expect(() => parsePush([])).toThrow('The push payload must be a JSON object.');
    expect(() => parsePush(push({ repository: undefined }))).toThrow('The push payload has no "repository.full_name".');
    expect(() => parsePush(push({ ref: 42 }))).toThrow('The push payload has no "ref".');
    expect(() => parsePush(push({ after: '--upload-pack=evil' }))).toThrow('"after" must be a full commit id');
    expect(() => parsePush(push({ after: 'A'.repeat(40) }))).toThrow(PayloadError);
  });
});
