import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'] as const;
const KNOWN = new Set([200, 201, 400, 401, 403, 404, 405, 409, 413, 414, 415, 429]);

/**
 * Random requests against every route shape: bodies of any JSON or none, garbage text, odd
 * path segments, wrong content types. The server must never answer 5xx, must always answer
 * the envelope, and must keep answering.
 */
describe('request decoding under random input', () => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const segment = fc.oneof(
    fc.constantFrom('default', 'x', '..', '%00', '%ZZ', 'ü', 'a'.repeat(300), '0', '-1', 'null'),
    fc.string({ minLength: 1, maxLength: 20 }).map((t) => encodeURIComponent(t)),
  );

  const path = fc
    .tuple(segment, segment)
    .chain(([a, b]) =>
      fc.constantFrom(
        '/api/workspaces',
        `/api/workspaces/${a}`,
        `/api/workspaces/${a}/members`,
        `/api/workspaces/${a}/members/${b}`,
        `/api/workspaces/${a}/invitations`,
        `/api/workspaces/${a}/invitations/${b}`,
        `/api/workspaces/${a}/api-keys`,
        `/api/workspaces/${a}/api-keys/${b}`,
        `/api/invitations/accept`,
        `/api/${a}`,
        `/${a}/${b}`,
      ),
    );

  const body = fc.oneof(
    fc.constant(undefined),
    fc.jsonValue().map((v) => ({ raw: JSON.stringify(v), type: 'application/json' })),
    fc.dictionary(fc.constantFrom('name', 'slug', 'role', 'email', 'user_id', 'token', 'expires_in_days', 'settings', 'x'), fc.jsonValue()).map((v) => ({
      raw: JSON.stringify(v),
      type: 'application/json',
    })),
    fc.string().map((t) => ({ raw: t, type: 'application/json' })),
    fc.string().map((t) => ({ raw: t, type: 'text/plain' })),
  );

  it('never crashes and always answers the envelope', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...METHODS), path, body, fc.boolean(), async (method, p, b, withKey) => {
        const headers: Record<string, string> = {};
        if (withKey) headers['x-api-key'] = w.owner.key;
        if (b !== undefined) headers['content-type'] = b.type;
        const res = await fetch(s.url + p.replace('default', w.slug), {
          method,
          headers,
          ...(b === undefined || method === 'GET' ? {} : { body: b.raw }),
        });
        const text = await res.text();
        expect(KNOWN.has(res.status), `${method} ${p} → ${res.status.toString()} ${text}`).toBe(true);
        const parsed = JSON.parse(text) as { success: unknown; error?: unknown; data?: unknown };
        expect(typeof parsed.success, `${method} ${p} → ${text}`).toBe('boolean');
        if (parsed.success === false) expect(typeof parsed.error).toBe('string');
      }),
      { numRuns: 400 },
    );
    expect((await s.request('GET', '/healthz')).status).toBe(200);
    expect(s.logs.some((l) => l.includes('"level":50'))).toBe(false);
  });
});
