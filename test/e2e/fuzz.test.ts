import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { startFakeGitHub, type FakeGitHub } from '../factories/fake-github.js';
import { githubIntegration } from '../factories/github-link.js';

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
  let fake: FakeGitHub;
  beforeAll(async () => {
    // every feature configured, so that a refusal is about the request, not a missing setting (503)
    fake = await startFakeGitHub();
    s = await startTestServer('sqlite', { githubWebhookSecret: 'fuzz-secret', github: githubIntegration(fake) });
    w = await makeWorkspace(s);
  });
  afterAll(async () => {
    await s.close();
    await fake.close();
  });

  const segment = fc.oneof(
    fc.constantFrom('default', 'x', '..', '%00', '%ZZ', 'ü', 'a'.repeat(300), '0', '-1', 'null'),
    fc.string({ minLength: 1, maxLength: 20 }).map((t) => encodeURIComponent(t)),
  );

  /** Every registered route, its parameters filled with random segments (or real ones). */
  const path = fc.constant(null).chain(() => {
    // The two documents that are deliberately not the envelope: Prometheus text and OpenAPI.
    const urls = [...new Set(s.app.routeTable.map((r) => r.url))].filter((u) => u !== '/metrics' && u !== '/api/openapi.json');
    return fc.tuple(fc.constantFrom(...urls), fc.array(fc.oneof(segment, fc.constantFrom(w.slug, 'app')), { minLength: 4, maxLength: 4 })).map(([url, values]) => {
      let i = 0;
      return url.replace(/:[a-z_]+/g, () => values[i++ % values.length] ?? 'x');
    });
  });

  const body = fc.oneof(
    fc.constant(undefined),
    fc.jsonValue().map((v) => ({ raw: JSON.stringify(v), type: 'application/json' })),
    fc.dictionary(fc.constantFrom('name', 'slug', 'role', 'email', 'user_id', 'token', 'expires_in_days', 'settings', 'port', 'replicas', 'cpu', 'ram', 'key', 'value', 'is_secret', 'variables', 'merge', 'domain', 'repo_full_name', 'branch', 'enabled', 'check_interval_sec', 'chat_webhook_url', 'threshold', 'x'), fc.jsonValue()).map((v) => ({
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
        const res = await fetch(s.url + p, {
          method,
          headers,
          ...(b === undefined || method === 'GET' ? {} : { body: b.raw }),
        });
        const text = await res.text();
        expect(KNOWN.has(res.status), `${method} ${p} → ${res.status.toString()} ${text.slice(0, 300)}`).toBe(true);
        const parsed = JSON.parse(text) as { success: unknown; error?: unknown; data?: unknown };
        expect(typeof parsed.success, `${method} ${p} → ${text.slice(0, 300)}`).toBe('boolean');
        if (parsed.success === false) expect(typeof parsed.error).toBe('string');
      }),
      { numRuns: 400 },
    );
    expect((await s.request('GET', '/healthz')).status).toBe(200);
    expect(s.logs.some((l) => l.includes('"level":50'))).toBe(false);
  });
});
