import { chmodSync, closeSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeployQueue } from '../../src/modules/deployments/queue.js';
import { RESERVED_WORKSPACE_SLUGS } from '../../src/domain/slug.js';
import { createStore } from '../../src/store/db.js';
import { makeProject, makeUser, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { openStream } from '../factories/stream-client.js';

/** Issue 9, items 9 to 13: the low-severity holes, tried as a hostile tenant would. */

/**
 * Raw bytes to the server, and everything it answers until it closes the connection; `then` is
 * sent on the same connection once the first answer has arrived.
 */
function raw(url: string, bytes: string, then?: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(bytes);
    });
    const chunks: Buffer[] = [];
    let next = then;
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (next !== undefined) {
        socket.write(next);
        next = undefined;
      }
    });
    socket.on('error', reject);
    socket.on('close', () => {
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(STORE_KINDS)('query integers on %s (item 9)', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
    const q = new DeployQueue(s.store, s.deps.clock, s.deps.ids, 60_000);
    for (let i = 0; i < 3; i++) await q.enqueue({ projectId: p.id, source: 'git' });
  });
  afterAll(async () => s.close());

  const list = (query: string) => s.request<{ page: number; limit: number; total: number; deployments: unknown[] }>(
    'GET',
    `/api/workspaces/${w.slug}/projects/${p.slug}/deployments?${query}`,
    { key: w.member.key },
  );

  it.each(['99999999999999999999', '1e20', '1e3', '0x10', '+5', '%205', '1.0', '1.5', '-1', '0', '200001', '', 'two', '5&page=6'])(
    'refuses page=%s with 400 and one sentence',
    async (page) => {
      const r = await list(`page=${page}`);
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ success: false, error: '"page" must be a whole number from 1 to 200000, written in decimal digits.' });
    },
  );

  it.each(['1e1', '0x1', '51', '0'])('refuses limit=%s with 400', async (limit) => {
    const r = await list(`limit=${limit}`);
    expect(r).toMatchObject({ status: 400, body: { success: false, error: '"limit" must be a whole number from 1 to 50, written in decimal digits.' } });
  });

  it('takes plain decimal integers within the bounds', async () => {
    expect((await list('page=2&limit=2')).body.data).toMatchObject({ page: 2, limit: 2, total: 3 });
    expect((await list('page=200000&limit=50')).body.data).toMatchObject({ page: 200000, limit: 50, deployments: [] });
    expect((await list('')).body.data).toMatchObject({ page: 1, limit: 20 });
  });

  it('gives every integer in a query string of the OpenAPI document a minimum and a maximum', async () => {
    const doc = (await (await fetch(`${s.url}/api/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string; schema: Record<string, unknown> }[] }>>;
    };
    const ints = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.values(ops).flatMap((op) =>
        (op.parameters ?? [])
          .filter((x) => x.in === 'query' && (x.schema['type'] === 'integer' || x.schema['type'] === 'number'))
          .map((x) => ({ path, name: x.name, schema: x.schema })),
      ),
    );
    expect(ints.length).toBeGreaterThan(0);
    for (const i of ints) {
      expect(typeof i.schema['minimum'], `${i.path} ${i.name}`).toBe('number');
      expect(typeof i.schema['maximum'], `${i.path} ${i.name}`).toBe('number');
    }
  });
});

describe.each(STORE_KINDS)('streams on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  let q: DeployQueue;
  beforeAll(async () => {
    // the re-check runs every 100 ms here instead of every 10 s
    s = await startTestServer(kind, { streamRecheckMs: 100 });
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
    q = new DeployQueue(s.store, s.deps.clock, s.deps.ids, 60_000);
  });
  afterAll(async () => s.close());

  const wsUrl = (id: string) => `${s.url.replace('http', 'ws')}/api/workspaces/${w.slug}/projects/${p.slug}/deployments/${id}/logs`;

  /** A build still running, with one line written. */
  async function runningBuild(): Promise<string> {
    const d = await q.enqueue({ projectId: p.id, source: 'git' });
    await q.claim(`worker-${d.id}`);
    await s.services.buildLog.append(d.id, ['Step 1/9 : FROM base']);
    return d.id;
  }

  it('authenticates with every spelling of api_key the query parser reads, and never logs the key (item 10)', async () => {
    for (const name of ['api_key', 'api%5Fkey', '%61pi_key', 'api_k%65y', '%61%70%69%5f%6b%65%79']) {
      const user = await makeUser(s, w.id);
      await s.store.db.insertInto('members').values({ workspace_id: w.id, user_id: user.id, role: 'member', joined_at: new Date().toISOString() }).execute();
      const d = await q.enqueue({ projectId: p.id, source: 'git' });
      await q.claim(`w-${d.id}`);
      await s.services.buildLog.append(d.id, ['only line']);
      await q.advance(d.id, `w-${d.id}`, { kind: 'fail' }, { error: 'done' });
      const frames = await openStream(`${wsUrl(d.id)}?${name}=${user.key}`).closed;
      expect(frames, name).toEqual(['only line', '[END]']);
      expect(s.logs.join('\n'), name).not.toContain(user.key);
      expect(s.logs.join('\n'), name).not.toContain(user.key.slice(7));
    }
  });

  it('never logs a key after # or in another parameter, encoded or not (item 10)', async () => {
    const key = w.owner.key;
    const encoded = encodeURIComponent(key).replace(/_/g, '%5F');
    for (const path of [`/api/workspaces/${w.slug}#api_key=${key}`, `/api/workspaces/${w.slug}?x=1&API%5FKEY=${key}`, `/api/workspaces/${w.slug}?k=${encoded}`, `/api/workspaces/${encoded}`]) {
      await new Promise<void>((resolve, reject) => {
        const { hostname, port } = new URL(s.url);
        const req = httpRequest({ host: hostname, port: Number(port), path, headers: { 'x-api-key': w.member.key } }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
        req.end();
      });
      expect(s.logs.join('\n'), path).not.toContain(key.slice(7));
    }
  });

  it.each([
    ['its key is revoked', '[ERROR] The API key has been revoked.'],
    ['its user is removed from the workspace', '[ERROR] You are no longer a member of this workspace.'],
    ['its user is removed from the workspace, the key listed elsewhere', '[ERROR] You are no longer a member of this workspace.'],
  ])('ends an open stream of a running build when %s (item 11)', async (what, last) => {
    // the last case: a key of another workspace, which the removal does not revoke
    const member = await makeUser(s, what.endsWith('elsewhere') ? (await makeWorkspace(s)).id : w.id);
    await s.store.db.insertInto('members').values({ workspace_id: w.id, user_id: member.id, role: 'member', joined_at: new Date().toISOString() }).execute();
    const id = await runningBuild();
    const session = openStream(wsUrl(id), { 'x-api-key': member.key });
    await session.received(1);
    // still allowed: lines keep coming across several re-checks
    await sleep(350);
    await s.services.buildLog.append(id, ['Step 2/9 : RUN make']);
    await session.received(2);
    const r =
      what === 'its key is revoked'
        ? await s.request('DELETE', `/api/workspaces/${w.slug}/api-keys/${member.keyId}`, { key: w.admin.key })
        : await s.request('DELETE', `/api/workspaces/${w.slug}/members/${member.id}`, { key: w.owner.key });
    expect(r.status).toBe(200);
    const frames = await session.closed;
    expect(frames).toEqual(['Step 1/9 : FROM base', 'Step 2/9 : RUN make', last]);
    // the build goes on, and the caller got nothing more
    await s.services.buildLog.append(id, ['Step 3/9 : secret output']);
    await sleep(150);
    expect(session.frames).toEqual(frames);
  });

  it('ends an open stream when its key expires (item 11)', async () => {
    const id = await runningBuild();
    const session = openStream(wsUrl(id), { 'x-api-key': w.member.key });
    await session.received(1);
    s.clock.advance(31 * 24 * 3600 * 1000); // the harness's keys live 30 days
    expect(await session.closed).toEqual(['Step 1/9 : FROM base', '[ERROR] The API key has expired.']);
  });
});

describe('rate-limit refusals in the log (item 12)', () => {
  it('counts many refused requests in a bounded number of lines that say how many', async () => {
    const s = await startTestServer('sqlite', { rateLimit: { rate: 0.001, burst: 2 }, anonymousRateLimit: { rate: 0.001, burst: 2 }, refusalLogMs: 60_000 });
    let logs: string[] = [];
    try {
      const w = await makeWorkspace(s);
      const statuses: number[] = [];
      for (let i = 0; i < 150; i++) statuses.push((await s.request('GET', '/api/workspaces', { key: w.owner.key })).status);
      for (let i = 0; i < 60; i++) statuses.push((await s.request('GET', '/api/workspaces', { key: `svc_sk_${'e'.repeat(40)}` })).status);
      expect(statuses.filter((x) => x === 429)).toHaveLength(148 + 58);
      logs = s.logs;
    } finally {
      await s.close(); // flushes the counts
    }
    const lines = logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    // 2 admitted + 2 refused-as-401 requests, two lines each, and a line per refusing bucket
    expect(lines.length).toBeLessThan(20);
    const counts = lines.filter((l) => typeof l['rateLimit'] === 'string');
    expect(counts.map((l) => [l['rateLimit'], l['refused']]).sort()).toEqual([['address', 58], ['key', 148]]);
    expect(counts.find((l) => l['rateLimit'] === 'key')?.['msg']).toMatch(/^rate limit: refused 148 requests of API key \S+ in the last 60 s$/);
    expect(logs.join('\n')).not.toContain('Too many requests');
  });

  it('writes a line per interval for a client still refused', async () => {
    const s = await startTestServer('sqlite', { rateLimit: { rate: 0.001, burst: 1 }, refusalLogMs: 200 });
    try {
      const w = await makeWorkspace(s);
      const started = Date.now();
      for (let i = 0; i < 20; i++) await s.request('GET', '/api/workspaces', { key: w.owner.key });
      await sleep(300);
      for (let i = 0; i < 5; i++) await s.request('GET', '/api/workspaces', { key: w.owner.key });
      await sleep(300);
      const counts = s.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['rateLimit'] === 'key');
      // at most one line per interval that saw refusals, and the quiet 300 ms between the bursts
      // always hold a tick, so the bursts are never in one line
      expect(counts.length).toBeGreaterThanOrEqual(2);
      expect(counts.length).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / 200) + 1);
      expect(counts.reduce((n, l) => n + Number(l['refused']), 0)).toBe(24);
    } finally {
      await s.close();
    }
  });
});

describe.each(STORE_KINDS)('errors and names on %s (item 13)', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  it.each(['text/plain', 'text/plain; charset=utf-8', 'application/xml', 'multipart/form-data; boundary=x'])(
    'answers a %s body with 415 in the envelope',
    async (type) => {
      const r = await s.request('POST', '/api/workspaces', { key: w.member.key, raw: '{"name":"x","slug":"x"}', headers: { 'content-type': type } });
      expect(r).toMatchObject({ status: 415, body: { success: false, error: 'The request body must be sent as application/json.' } });
    },
  );

  it('answers headers too large with 431 and malformed HTTP with 400, in the envelope, then closes', async () => {
    const big = await raw(s.url, `GET /api/workspaces HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big).toMatch(/^HTTP\/1\.1 431 /);
    expect(big).toMatch(/content-type: application\/json/i);
    expect(JSON.parse(big.slice(big.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, error: 'The request headers are too large.' });
    const bad = await raw(s.url, 'NOT HTTP AT ALL\r\n\r\n');
    expect(bad).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(bad.slice(bad.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, error: 'The request is not valid HTTP.' });
    // a keep-alive connection: the first request is answered, then the malformed one, then closed
    const both = await raw(s.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /x HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    expect(both).toMatch(/^HTTP\/1\.1 200 /);
    expect(both).toContain('\r\n\r\n{"success":false,"error":"The request is not valid HTTP."}');
    // and the server goes on
    expect((await s.request('GET', '/healthz')).status).toBe(200);
  });

  it('refuses the reserved workspace slug available-templates, whoever asks', async () => {
    for (const key of [w.owner.key, w.member.key]) {
      const r = await s.request('POST', '/api/workspaces', { key, body: { name: 'Templates', slug: 'available-templates' } });
      expect(r).toMatchObject({ status: 400, body: { success: false, error: 'The slug "available-templates" is reserved: /api/workspaces/available-templates is another route.' } });
    }
    const rows = await s.store.db.selectFrom('workspaces').select('id').where('slug', '=', 'available-templates').execute();
    expect(rows).toEqual([]);
  });

  it('reserves every fixed path segment under /api/workspaces/', () => {
    const fixed = s.app.routeTable
      .map((r) => r.url)
      .filter((url) => url.startsWith('/api/workspaces/'))
      .map((url) => url.split('/')[3] ?? '')
      .filter((seg) => seg !== '' && !seg.startsWith(':'));
    for (const seg of fixed) expect(RESERVED_WORKSPACE_SLUGS.has(seg), seg).toBe(true);
  });

});

// The file modes are SQLite's alone: PostgreSQL keeps its files in its own data directory.
describe('SQLite files (item 13)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
    const w = await makeWorkspace(s);
    await makeProject(s, w);
  });
  afterAll(async () => s.close());

  it('keeps the SQLite files owner-only (0600)', async () => {
    // the server's own store: written to, so the -wal and -shm files exist
    const file = s.database.url;
    for (const f of [file, `${file}-wal`, `${file}-shm`]) expect(statSync(f).mode & 0o777, f).toBe(0o600);
    // an older install's 0644 files are corrected when opened
    const dir = mkdtempSync(join(tmpdir(), 'slipway-perm-'));
    try {
      const old = join(dir, 'old.db');
      closeSync(openSync(old, 'w', 0o644));
      chmodSync(old, 0o644);
      const store = await createStore(old);
      await store.db.selectFrom('users').select('id').execute();
      for (const f of [old, `${old}-wal`, `${old}-shm`]) expect(statSync(f).mode & 0o777, f).toBe(0o600);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
