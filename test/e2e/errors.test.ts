import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';

/** A client of its own: `rounds` POSTs of `mib` MiB by Node's fetch, each with a Content-Length and chunked; each answer's status and body, or the error. */
const CLIENT = `
const [url, key, mib, rounds] = process.argv.slice(1);
const bytes = Buffer.alloc(Number(mib) * 1024 * 1024, 120);
const out = [];
for (let i = 0; i < Number(rounds); i++) {
  for (const chunked of [false, true]) {
    const init = { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key } };
    if (chunked) {
      init.body = new ReadableStream({ start(c) { for (let at = 0; at < bytes.length; at += 65536) c.enqueue(bytes.subarray(at, at + 65536)); c.close(); } });
      init.duplex = 'half';
    } else init.body = bytes;
    try {
      const res = await fetch(url, init);
      out.push({ status: res.status, body: await res.json() });
    } catch (err) {
      out.push({ error: String(err.cause?.code ?? err) });
    }
  }
}
console.log(JSON.stringify(out));
`;

async function fetchFromAnotherProcess(url: string, key: string, mib: number, rounds: number): Promise<unknown[]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CLIENT, url, key, String(mib), String(rounds)], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout) as unknown[];
}

describe('over-limit bodies', () => {
  let b: TestServer;
  let big: TestWorkspace;
  beforeAll(async () => {
    b = await startTestServer('sqlite');
    big = await makeWorkspace(b);
  });
  afterAll(async () => b.close());

  // Node's own fetch (undici), from a process of its own as a real client is, writes its whole
  // body before it reads the answer: a server that answers and closes mid-body left it with
  // EPIPE ("fetch failed") instead of the 413, now and then.
  it.each([
    ['2 MiB to a normal route', () => `/api/workspaces`, 2, 'The request body is larger than the 1 MiB limit.'],
    ['4 MiB to the log analysis', () => `/api/workspaces/${big.slug}/projects/nothing/logs/analyze`, 4, 'The request body is larger than the 3 MiB limit.'],
    ['16 MiB to a normal route', () => `/api/workspaces`, 16, 'The request body is larger than the 1 MiB limit.'],
  ])('answers %s sent by Node\'s fetch with the 413, never a broken pipe', async (_what, path, mib, message) => {
    const answers = await fetchFromAnotherProcess(b.url + path(), big.member.key, mib, 8);
    expect(answers).toEqual(Array.from({ length: 16 }, () => ({ status: 413, body: { success: false, error: message } })));
  }, 60_000);

});

describe('errors, limits and observability', () => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer('sqlite', { rateLimit: { rate: 1, burst: 5 }, anonymousRateLimit: { rate: 1, burst: 3 } });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  it('answers an unknown route with 404 and a wrong method with 405 and Allow', async () => {
    const missing = await s.request('GET', '/api/nothing-here', { key: w.owner.key });
    expect(missing).toMatchObject({ status: 404, body: { success: false, error: 'No route matches GET /api/nothing-here.' } });
    const wrong = await s.request('PATCH', `/api/workspaces/${w.slug}`, { key: w.owner.key });
    expect(wrong.status).toBe(405);
    expect(wrong.body.success).toBe(false);
    expect(wrong.headers.get('allow')?.split(', ').sort()).toEqual(['DELETE', 'GET', 'HEAD', 'PUT']);
  });

  it('answers malformed and over-long paths with the envelope', async () => {
    const long = await s.request('GET', `/api/workspaces/${'a'.repeat(300)}`, { key: w.owner.key });
    expect(long).toMatchObject({ status: 414, body: { success: false, error: 'A segment of the request path is too long.' } });
    const bad = await s.request('GET', '/api/workspaces/%E0%A4%A', { key: w.owner.key });
    expect(bad).toMatchObject({ status: 400, body: { success: false, error: 'The request path is not valid.' } });
  });

  it('rejects a body over 1 MiB with 413', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024), slug: 'big' });
    const r = await s.request('POST', '/api/workspaces', { key: w.admin.key, raw: big, headers: { 'content-type': 'application/json' } });
    expect(r).toMatchObject({ status: 413, body: { success: false, error: 'The request body is larger than the 1 MiB limit.' } });
  });

  it.each([
    ['{"name": ', 'application/json', 400, 'The request body is not valid JSON.'],
    ['', 'application/json', 400, 'The request body is empty; send a JSON object.'],
    ['name=x', 'application/x-www-form-urlencoded', 415, 'The request body must be sent as application/json.'],
  ])('rejects the body %j (%s) with %i', async (raw, type, status, message) => {
    const r = await s.request('POST', '/api/workspaces', { key: w.member.key, raw, headers: { 'content-type': type } });
    expect(r).toMatchObject({ status, body: { success: false, error: message } });
  });

  it('limits each key with a token bucket: 429 with Retry-After', async () => {
    const key = (await makeWorkspace(s)).owner.key;
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 8; i++) {
      const r = await s.request('GET', '/api/workspaces', { key });
      statuses.push(r.status);
      if (r.status === 429) {
        retryAfter = r.headers.get('retry-after');
        expect(r.body).toEqual({ success: false, error: expect.stringMatching(/^Too many requests; retry in \d+ seconds?\.$/) });
      }
    }
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses.slice(5)).toContain(429);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    // Another key is not affected.
    expect((await s.request('GET', '/api/workspaces', { key: w.member.key })).status).toBe(200);
  });

  it('limits guessing: failed authentications from one address reach 429', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push((await s.request('GET', '/api/workspaces', { key: `svc_sk_${i.toString().repeat(40)}` })).status);
    }
    expect(statuses.slice(0, 3)).toEqual([401, 401, 401]);
    expect(statuses).toContain(429);
  });

  it('gives every response a request id, taking a sane one from the caller', async () => {
    const mine = await s.request('GET', '/healthz', { headers: { 'x-request-id': 'trace-123' } });
    expect(mine.headers.get('x-request-id')).toBe('trace-123');
    const made = await s.request('GET', '/healthz', { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(s.logs.some((l) => l.includes('"reqId":"trace-123"'))).toBe(true);
  });

  it('writes structured JSON logs without API keys or tokens', async () => {
    const key = w.admin.key;
    await s.request('GET', `/api/workspaces/${w.slug}?api_key=${key}`, { key });
    const inv = await s.request<{ token: string }>('POST', `/api/workspaces/${w.slug}/invitations`, {
      key: w.owner.key,
      body: { email: 'logged@example.com', role: 'member' },
    });
    await s.request('POST', '/api/invitations/accept', { body: { token: inv.body.data?.token } });
    expect(s.logs.length).toBeGreaterThan(0);
    for (const line of s.logs) expect(() => JSON.parse(line) as unknown).not.toThrow();
    const all = s.logs.join('\n');
    expect(all).toContain('[redacted]');
    expect(all).not.toContain(key);
    expect(all).not.toContain(w.owner.key);
    expect(all).not.toContain(inv.body.data?.token ?? 'missing');
  });

  it('serves health and readiness on the API, and Prometheus metrics to the operator only', async () => {
    expect((await s.request('GET', '/healthz')).body).toEqual({ success: true, data: { status: 'ok' } });
    expect((await s.request('GET', '/readyz')).body).toEqual({ success: true, data: { status: 'ready' } });
    // the per-project gauges name every tenant's workspaces and projects: not on the API's port
    const open = await s.request('GET', '/metrics');
    expect(open).toMatchObject({
      status: 404,
      body: { success: false, error: 'Metrics are served to the operator only: on the metrics listener (--metrics-listen, loopback by default), or here with the bearer token of --metrics-token.' },
    });
    expect((await s.request('GET', '/metrics', { key: w.owner.key })).status).toBe(404);
    // the operator's listener (loopback by default)
    const m = await fetch(s.metricsUrl);
    expect(new URL(s.metricsUrl).hostname).toBe('127.0.0.1');
    expect(m.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await m.text();
    expect(text).toMatch(/slipway_http_request_duration_seconds_count\{method="GET",route="\/api\/workspaces",status="200"\} \d+/);
    expect(text).toContain('slipway_process_resident_memory_bytes');
    const elsewhere = await fetch(s.metricsUrl.replace(/\/metrics$/, '/api/workspaces'));
    expect(elsewhere.status).toBe(404);
  });
});

describe('/metrics on the API with --metrics-token', () => {
  const token = 'mt_'.padEnd(40, '7');
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite', { metricsToken: token });
  });
  afterAll(async () => s.close());

  it('answers the bearer token only', async () => {
    const wrong = 'GET /metrics needs the header "Authorization: Bearer <token>" with the token of --metrics-token.';
    for (const authorization of [undefined, `Bearer ${token}x`, `Basic ${token}`, 'Bearer ', token]) {
      const r = await s.request('GET', '/metrics', authorization === undefined ? {} : { headers: { authorization } });
      expect(r, String(authorization)).toMatchObject({ status: 401, body: { success: false, error: wrong } });
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer /);
    }
    const ok = await s.request('GET', '/metrics', { headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('slipway_process_resident_memory_bytes');
  });
});

describe('behind a trusted proxy', () => {
  it('limits each forwarded client address separately', async () => {
    const s = await startTestServer('sqlite', { anonymousRateLimit: { rate: 0.01, burst: 2 }, trustProxy: ['127.0.0.1'] });
    try {
      const from = (ip: string) => s.request('GET', '/api/workspaces', { key: `svc_sk_${'9'.repeat(40)}`, headers: { 'x-forwarded-for': ip } });
      expect([(await from('203.0.113.1')).status, (await from('203.0.113.1')).status, (await from('203.0.113.1')).status]).toEqual([401, 401, 429]);
      expect((await from('203.0.113.2')).status).toBe(401);
    } finally {
      await s.close();
    }
  });
});

describe('an unexpected failure', () => {
  it('answers 500 with a generic sentence and keeps the detail in the log; readiness turns 503', async () => {
    const s = await startTestServer('sqlite');
    const w = await makeWorkspace(s);
    try {
      // Pull the store out from under the running app: every query now throws.
      await s.store.db.destroy();
      const r = await s.request('GET', `/api/workspaces/${w.slug}`, { key: w.owner.key });
      expect(r).toMatchObject({ status: 500, body: { success: false, error: 'An internal error occurred; it has been logged.' } });
      expect(r.text).not.toMatch(/driver|destroy|sqlite/i);
      expect(s.logs.some((l) => l.includes('"level":50'))).toBe(true);
      expect((await s.request('GET', '/readyz')).status).toBe(503);
      expect((await s.request('GET', '/healthz')).status).toBe(200);
    } finally {
      await s.app.close();
      await s.database.drop();
    }
  });
});
