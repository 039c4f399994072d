import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateUser } from '../../src/tenancy/users.js';
import { makeUser, makeWorkspace, startTestServer, type TestServer } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Member {
  user_id: string;
  email: string;
  name: string;
  role: string;
  joined_at: string;
}

describe.each(STORE_KINDS)('members on %s', (kind) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer(kind);
  });
  afterAll(async () => s.close());

  const members = (slug: string, key: string) => s.request<Member[]>('GET', `/api/workspaces/${slug}/members`, { key });
  const loneUser = async (email = `lone-${Math.random().toString(36).slice(2)}@example.com`) =>
    findOrCreateUser(s.deps, s.store.repos, email);

  it('lists members with their e-mail, name, role and join time', async () => {
    const w = await makeWorkspace(s);
    const r = await members(w.slug, w.member.key);
    expect(r.status).toBe(200);
    expect(r.body.data?.map((m) => [m.user_id, m.role])).toEqual([
      [w.owner.id, 'owner'],
      [w.admin.id, 'admin'],
      [w.member.id, 'member'],
    ]);
    expect(r.body.data?.[0]).toEqual({ user_id: w.owner.id, email: w.owner.email, name: expect.any(String), role: 'owner', joined_at: expect.any(String) });
  });

  it('adds an existing user; a second add is 409 and an unknown user 404', async () => {
    const w = await makeWorkspace(s);
    const u = await loneUser();
    const added = await s.request<Member>('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: u.id, role: 'member' } });
    expect(added.status).toBe(201);
    expect(added.body.data).toMatchObject({ user_id: u.id, email: u.email, role: 'member' });
    const again = await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: u.id, role: 'admin' } });
    expect(again.status).toBe(409);
    const unknown = await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: 'nobody', role: 'member' } });
    expect(unknown).toMatchObject({ status: 404, body: { success: false, error: 'User was not found.' } });
  });

  it.each([
    [{ user_id: 'x', role: 'king' }, /^"role" must be one of owner, admin, member\.$/],
    [{ role: 'member' }, /^"user_id" is required\.$/],
    [{ user_id: 7, role: 'member' }, /^"user_id" must be a string\.$/],
  ])('rejects %j with 400', async (body, message) => {
    const w = await makeWorkspace(s);
    const r = await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatch(message);
  });

  it('lets only owners grant the owner role', async () => {
    const w = await makeWorkspace(s);
    const u = await loneUser();
    const byAdmin = await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: u.id, role: 'owner' } });
    expect(byAdmin.status).toBe(403);
    const promote = await s.request('PUT', `/api/workspaces/${w.slug}/members/${w.member.id}`, { key: w.admin.key, body: { role: 'owner' } });
    expect(promote.status).toBe(403);
    const byOwner = await s.request<Member>('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body: { user_id: u.id, role: 'owner' } });
    expect(byOwner.status).toBe(201);
  });

  it('changes roles; admins cannot demote an owner; the last owner cannot be demoted', async () => {
    const w = await makeWorkspace(s);
    const up = await s.request<Member>('PUT', `/api/workspaces/${w.slug}/members/${w.member.id}`, { key: w.admin.key, body: { role: 'admin' } });
    expect(up.status).toBe(200);
    expect(up.body.data?.role).toBe('admin');
    expect((await s.request('PUT', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.admin.key, body: { role: 'member' } })).status).toBe(403);
    const last = await s.request('PUT', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.owner.key, body: { role: 'admin' } });
    expect(last).toMatchObject({ status: 409, body: { error: 'The last owner of a workspace cannot be removed or demoted.' } });
    // With a second owner, the first may step down.
    await s.request('PUT', `/api/workspaces/${w.slug}/members/${w.admin.id}`, { key: w.owner.key, body: { role: 'owner' } });
    const down = await s.request<Member>('PUT', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.owner.key, body: { role: 'admin' } });
    expect(down.status).toBe(200);
    expect((await s.request('PUT', `/api/workspaces/${w.slug}/members/nobody`, { key: w.admin.key, body: { role: 'admin' } })).status).toBe(404);
  });

  it('removes a member and revokes their keys in this workspace', async () => {
    const w = await makeWorkspace(s);
    const before = await s.request('GET', `/api/workspaces/${w.slug}`, { key: w.member.key });
    expect(before.status).toBe(200);
    const r = await s.request<Member>('DELETE', `/api/workspaces/${w.slug}/members/${w.member.id}`, { key: w.admin.key });
    expect(r.status).toBe(200);
    expect(r.body.data?.user_id).toBe(w.member.id);
    expect((await s.request('GET', `/api/workspaces/${w.slug}`, { key: w.member.key })).status).toBe(401);
    expect((await members(w.slug, w.owner.key)).body.data?.map((m) => m.user_id)).not.toContain(w.member.id);
  });

  it('keeps a removed user\u2019s keys from other workspaces working there', async () => {
    const a = await makeWorkspace(s);
    const b = await makeWorkspace(s);
    const u = await makeUser(s, b.id);
    await s.store.db.insertInto('members').values({ workspace_id: b.id, user_id: u.id, role: 'member', joined_at: new Date().toISOString() }).execute();
    await s.request('POST', `/api/workspaces/${a.slug}/members`, { key: a.owner.key, body: { user_id: u.id, role: 'member' } });
    // u's key (listed under b) acts in a with u's role there.
    expect((await s.request('GET', `/api/workspaces/${a.slug}`, { key: u.key })).status).toBe(200);
    await s.request('DELETE', `/api/workspaces/${a.slug}/members/${u.id}`, { key: a.owner.key });
    expect((await s.request('GET', `/api/workspaces/${a.slug}`, { key: u.key })).status).toBe(404);
    expect((await s.request('GET', `/api/workspaces/${b.slug}`, { key: u.key })).status).toBe(200);
  });

  it('lets anyone leave, but not the last owner, and not remove others without the role', async () => {
    const w = await makeWorkspace(s);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${w.admin.id}`, { key: w.member.key })).status).toBe(403);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.admin.key })).status).toBe(403);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.owner.key })).status).toBe(409);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${w.member.id}`, { key: w.member.key })).status).toBe(200);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/nobody`, { key: w.owner.key })).status).toBe(404);
  });

  it('never lets two owners demote each other into an ownerless workspace', async () => {
    const w = await makeWorkspace(s);
    await s.request('PUT', `/api/workspaces/${w.slug}/members/${w.admin.id}`, { key: w.owner.key, body: { role: 'owner' } });
    const [a, b] = await Promise.all([
      s.request('PUT', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.admin.key, body: { role: 'member' } }),
      s.request('PUT', `/api/workspaces/${w.slug}/members/${w.admin.id}`, { key: w.owner.key, body: { role: 'member' } }),
    ]);
    const owners = (await s.store.db.selectFrom('members').select('user_id').where('workspace_id', '=', w.id).where('role', '=', 'owner').execute()).length;
    // One demotion wins; the other finds either its caller already demoted (403) or itself
    // about to remove the last owner (409). Exactly one owner remains.
    expect(owners).toBe(1);
    const [win, lose] = [a.status, b.status].sort();
    expect(win).toBe(200);
    expect([403, 409]).toContain(lose);
  });
});
