// The hot path keeps API keys and memberships in memory for at most a second
// (docs/decisions.md#hot-path). On the replica that makes a change it takes effect at once; on
// every other replica (another process over the same store) within a second.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeUser, makeWorkspace, startTestServer, type TestServer } from '../factories/harness.js';
import { addMember } from '../factories/members.js';
import { STORE_KINDS } from '../factories/stores.js';

const CACHE_BOUND_MS = 1000;
/** a request's own time and the poll interval on a busy machine: the bound checked is the cache's */
const SLACK_MS = 250;

/** Polls `path` on `s` with `key` until it answers `status`; the milliseconds that took. */
async function until(s: TestServer, path: string, key: string, status: number): Promise<number> {
  const start = performance.now();
  for (;;) {
    const r = await s.request('GET', path, { key });
    if (r.status === status) return performance.now() - start;
    if (performance.now() - start > 5000) throw new Error(`${path} still answers ${String(r.status)} after 5 s (expected ${String(status)})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(STORE_KINDS)('access caching across replicas (%s)', (kind) => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    a = await startTestServer(kind);
    b = await startTestServer(kind, { replicaOf: a });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  /** Many requests, so that the answer is surely held in b's memory, not just read once. */
  async function warm(path: string, key: string, status = 200): Promise<void> {
    for (let i = 0; i < 5; i++) expect((await b.request('GET', path, { key })).status).toBe(status);
  }

  it('a revoked key is refused at once where it was revoked and within a second on another replica', async () => {
    const w = await makeWorkspace(a);
    const path = `/api/workspaces/${w.slug}`;
    await warm(path, w.member.key);
    expect((await a.request('GET', path, { key: w.member.key })).status).toBe(200);

    const revoked = await a.request('DELETE', `/api/workspaces/${w.slug}/api-keys/${w.member.keyId}`, { key: w.owner.key });
    expect(revoked.status).toBe(200);
    const here = await a.request('GET', path, { key: w.member.key });
    expect(here.status).toBe(401);
    expect(here.body.error).toBe('The API key has been revoked.');
    expect(await until(b, path, w.member.key, 401)).toBeLessThanOrEqual(CACHE_BOUND_MS + SLACK_MS);
  });

  it('a role taken away stops allowing its actions at once here and within a second on another replica', async () => {
    const w = await makeWorkspace(a);
    const invitations = `/api/workspaces/${w.slug}/invitations`;
    await warm(invitations, w.admin.key);

    const demoted = await a.request('PUT', `/api/workspaces/${w.slug}/members/${w.admin.id}`, { key: w.owner.key, body: { role: 'member' } });
    expect(demoted.status).toBe(200);
    expect((await a.request('GET', invitations, { key: w.admin.key })).status).toBe(403);
    expect(await until(b, invitations, w.admin.key, 403)).toBeLessThanOrEqual(CACHE_BOUND_MS + SLACK_MS);
    // what a member may do still works
    expect((await b.request('GET', `/api/workspaces/${w.slug}`, { key: w.admin.key })).status).toBe(200);
  });

  it('a removed member sees 404 at once here and within a second on another replica, while their key lives on elsewhere', async () => {
    const w = await makeWorkspace(a);
    const home = await makeWorkspace(a);
    // a key listed under another workspace: removal from w does not revoke it
    const u = await makeUser(a, home.id);
    await addMember(a, home.slug, home.owner.key, u, 'member');
    const { added, accepted } = await addMember(a, w.slug, w.owner.key, u, 'member');
    expect(added.status).toBe(201);
    expect(accepted?.status).toBe(200);
    const path = `/api/workspaces/${w.slug}`;
    await warm(path, u.key);

    expect((await a.request('DELETE', `/api/workspaces/${w.slug}/members/${u.id}`, { key: w.owner.key })).status).toBe(200);
    expect((await a.request('GET', path, { key: u.key })).status).toBe(404);
    expect(await until(b, path, u.key, 404)).toBeLessThanOrEqual(CACHE_BOUND_MS + SLACK_MS);
    expect((await b.request('GET', `/api/workspaces/${home.slug}`, { key: u.key })).status).toBe(200);
  });

  it('a key made on one replica works at once on another (misses are not kept)', async () => {
    const w = await makeWorkspace(a);
    const unknown = `svc_sk_${'0'.repeat(40)}`;
    expect((await b.request('GET', `/api/workspaces/${w.slug}`, { key: unknown })).status).toBe(401);
    const made = await a.request<{ key: string }>('POST', `/api/workspaces/${w.slug}/api-keys`, { key: w.member.key, body: { name: 'fresh' } });
    expect(made.status).toBe(201);
    const key = made.body.data?.key ?? '';
    expect((await b.request('GET', `/api/workspaces/${w.slug}`, { key })).status).toBe(200);
  });
});
