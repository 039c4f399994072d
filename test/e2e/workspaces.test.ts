import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeUser, makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Ws {
  id: string;
  name: string;
  slug: string;
  namespace: string;
  role?: string;
  settings: Record<string, unknown>;
}

describe.each(STORE_KINDS)('workspaces on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  it('creates a workspace whose creator becomes its owner', async () => {
    const r = await s.request<Ws>('POST', '/api/workspaces', { key: w.member.key, body: { name: 'Acme Inc', slug: 'acme' } });
    expect(r.status).toBe(201);
    expect(r.body.success).toBe(true);
    expect(r.body.data).toMatchObject({ name: 'Acme Inc', slug: 'acme', namespace: 'ws-acme', role: 'owner' });
    expect(r.body.data?.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const members = await s.request<{ user_id: string; role: string }[]>('GET', '/api/workspaces/acme/members', { key: w.member.key });
    expect(members.body.data).toEqual([expect.objectContaining({ user_id: w.member.id, role: 'owner' })]);
  });

  it('refuses a taken slug with 409', async () => {
    const r = await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'Other', slug: w.slug } });
    expect(r.status).toBe(409);
    expect(r.body).toEqual({ success: false, error: `A workspace with slug "${w.slug}" already exists.` });
  });

  it.each([
    [{ name: 'x', slug: 'Upper' }, /"slug" must be a DNS label/],
    [{ name: 'x', slug: '-lead' }, /"slug" must be a DNS label/],
    [{ name: 'x', slug: 'a'.repeat(64) }, /"slug"/],
    [{ slug: 'noname' }, /^"name" is required\.$/],
    [{ name: 5, slug: 'typed' }, /^"name" must be a string\.$/],
    [{ name: '', slug: 'empty' }, /^"name" must not be empty\.$/],
    [{ name: 'x', slug: 'extra', color: 'red' }, /^Unknown field "color"\.$/],
    [[1, 2], /^The request body must be a JSON object\.$/],
  ])('rejects %j with 400', async (body, message) => {
    const r = await s.request('POST', '/api/workspaces', { key: w.owner.key, body });
    expect(r.status).toBe(400);
    expect(r.body.success).toBe(false);
    expect(r.body.error).toMatch(message);
  });

  it('lists only the workspaces the caller belongs to', async () => {
    const other = await makeWorkspace(s);
    const r = await s.request<Ws[]>('GET', '/api/workspaces', { key: other.admin.key });
    expect(r.status).toBe(200);
    expect(r.body.data?.map((x) => [x.slug, x.role])).toEqual([[other.slug, 'admin']]);
  });

  it('shows a workspace to its members and the same 404 to everyone else', async () => {
    const got = await s.request<Ws>('GET', `/api/workspaces/${w.slug}`, { key: w.member.key });
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({ slug: w.slug, namespace: `ws-${w.slug}`, role: 'member' });

    const outsider = await makeWorkspace(s);
    const hidden = await s.request('GET', `/api/workspaces/${w.slug}`, { key: outsider.owner.key });
    const missing = await s.request('GET', '/api/workspaces/does-not-exist', { key: outsider.owner.key });
    expect(hidden.status).toBe(404);
    expect(hidden.body).toEqual(missing.body);
  });

  it('lets the owner rename and change settings, merging partial settings', async () => {
    const r = await s.request<Ws>('PUT', `/api/workspaces/${w.slug}`, {
      key: w.owner.key,
      body: { name: 'Renamed', settings: { build_timeout_sec: 600 } },
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ name: 'Renamed', settings: { build_timeout_sec: 600, log_retention_days: 7 } });
    const again = await s.request<Ws>('PUT', `/api/workspaces/${w.slug}`, { key: w.owner.key, body: { settings: { default_region: 'eu' } } });
    expect(again.body.data?.settings).toEqual({ build_timeout_sec: 600, log_retention_days: 7, default_region: 'eu' });
  });

  it.each([
    [{ settings: { color: 'red' } }, /^Unknown field "settings\.color"\.$/],
    [{ settings: { build_timeout_sec: 5 } }, /^"settings\.build_timeout_sec" must be at least 30\.$/],
    [{ settings: { log_retention_days: '7' } }, /^"settings\.log_retention_days" must be an integer\.$/],
    [{}, /must name at least 1 field/],
  ])('rejects the update %j with 400', async (body, message) => {
    const r = await s.request('PUT', `/api/workspaces/${w.slug}`, { key: w.owner.key, body });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatch(message);
  });

  it('keeps updates and deletion for owners (403 for an admin)', async () => {
    expect((await s.request('PUT', `/api/workspaces/${w.slug}`, { key: w.admin.key, body: { name: 'no' } })).status).toBe(403);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}`, { key: w.admin.key })).status).toBe(403);
  });

  it('deletes a workspace with everything it owns', async () => {
    const d = await makeWorkspace(s);
    await s.request('POST', `/api/workspaces/${d.slug}/invitations`, { key: d.owner.key, body: { email: 'x@example.com', role: 'member' } });
    const extra = await makeUser(s, d.id);
    const r = await s.request<Ws>('DELETE', `/api/workspaces/${d.slug}`, { key: d.owner.key });
    expect(r.status).toBe(200);
    expect(r.body.data?.slug).toBe(d.slug);
    expect((await s.request('GET', `/api/workspaces/${d.slug}`, { key: w.owner.key })).status).toBe(404);
    // Keys listed under it are gone with it.
    expect((await s.request('GET', '/api/workspaces', { key: d.member.key })).status).toBe(401);
    expect((await s.request('GET', '/api/workspaces', { key: extra.key })).status).toBe(401);
    for (const table of ['members', 'invitations', 'api_keys'] as const) {
      const rows = await s.store.db.selectFrom(table).select('workspace_id').where('workspace_id', '=', d.id).execute();
      expect(rows, table).toEqual([]);
    }
    // The slug is free again.
    expect((await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'again', slug: d.slug } })).status).toBe(201);
  });
});
