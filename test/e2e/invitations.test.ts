import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Invitation {
  id: string;
  email: string;
  role: string;
  status: string;
  token?: string;
  expires_at: string;
  created_at: string;
}

interface Accepted {
  user_id: string;
  workspace: { slug: string; role: string };
  role: string;
  key: string;
  key_prefix: string;
  expires_at: string;
}

const DAY = 86_400_000;

describe.each(STORE_KINDS)('invitations on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const invite = (email: string, role = 'member', key = w.admin.key, slug = w.slug) =>
    s.request<Invitation>('POST', `/api/workspaces/${slug}/invitations`, { key, body: { email, role } });
  const accept = (token: string, name?: string) =>
    s.request<Accepted>('POST', '/api/invitations/accept', { body: name === undefined ? { token } : { token, name } });

  it('creates an invitation with a single-use token that listings never show', async () => {
    const r = await invite('Carol@Example.com', 'admin');
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ email: 'carol@example.com', role: 'admin', status: 'pending' });
    expect(r.body.data?.token).toMatch(/^svc_inv_[0-9a-f]{40}$/);
    const expires = Date.parse(r.body.data?.expires_at ?? '') - Date.parse(r.body.data?.created_at ?? '');
    expect(expires).toBe(7 * DAY);
    const list = await s.request<Invitation[]>('GET', `/api/workspaces/${w.slug}/invitations`, { key: w.owner.key });
    expect(list.status).toBe(200);
    const listed = list.body.data?.find((i) => i.id === r.body.data?.id);
    expect(listed).toEqual({ id: r.body.data?.id, email: 'carol@example.com', role: 'admin', status: 'pending', expires_at: expect.any(String), created_at: expect.any(String) });
    expect(list.text).not.toContain('svc_inv_');
    // Only the digest is stored.
    const stored = await s.store.db.selectFrom('invitations').selectAll().where('id', '=', r.body.data?.id ?? '').executeTakeFirstOrThrow();
    expect(JSON.stringify(stored)).not.toContain(r.body.data?.token);
  });

  it('refuses a second pending invitation, a member\u2019s address, a bad address and a bad role', async () => {
    await invite('dup@example.com');
    expect((await invite('dup@example.com')).status).toBe(409);
    expect((await invite(w.member.email)).status).toBe(409);
    const bad = await invite('not-an-email');
    expect(bad).toMatchObject({ status: 400, body: { error: '"email" must be a valid e-mail address.' } });
    expect((await invite('ok@example.com', 'emperor')).status).toBe(400);
  });

  it('lets only owners invite owners', async () => {
    expect((await invite('boss@example.com', 'owner', w.admin.key)).status).toBe(403);
    expect((await invite('boss@example.com', 'owner', w.owner.key)).status).toBe(201);
  });

  it('accepts a token: a new user joins with the invited role and gets a working key', async () => {
    const inv = await invite('dave@example.com', 'admin');
    const r = await accept(inv.body.data?.token ?? '', 'Dave');
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ role: 'admin', workspace: { slug: w.slug, role: 'admin' } });
    expect(r.body.data?.key).toMatch(/^svc_sk_[0-9a-f]{40}$/);
    expect(r.body.data?.key_prefix).toBe(`${r.body.data?.key.slice(0, 13) ?? ''}...`);
    const me = await s.request<{ role: string }>('GET', `/api/workspaces/${w.slug}`, { key: r.body.data?.key });
    expect(me.body.data?.role).toBe('admin');
    const members = await s.request<{ user_id: string; name: string; email: string }[]>('GET', `/api/workspaces/${w.slug}/members`, { key: w.owner.key });
    expect(members.body.data).toContainEqual(expect.objectContaining({ user_id: r.body.data?.user_id, name: 'Dave', email: 'dave@example.com' }));
    const list = await s.request<Invitation[]>('GET', `/api/workspaces/${w.slug}/invitations`, { key: w.owner.key });
    expect(list.body.data?.find((i) => i.id === inv.body.data?.id)?.status).toBe('accepted');
    // Single use.
    expect((await accept(inv.body.data?.token ?? '')).status).toBe(404);
  });

  it('adds an existing user (from another workspace) instead of creating a second one', async () => {
    const other = await makeWorkspace(s);
    const inv = await invite(other.owner.email, 'member');
    const r = await accept(inv.body.data?.token ?? '');
    expect(r.status).toBe(201);
    expect(r.body.data?.user_id).toBe(other.owner.id);
    // The user's older key now works here too.
    expect((await s.request('GET', `/api/workspaces/${w.slug}`, { key: other.owner.key })).status).toBe(200);
  });

  it('answers 404 for revoked, expired, unknown and malformed tokens alike', async () => {
    const revoked = await invite('rev@example.com');
    const del = await s.request<Invitation>('DELETE', `/api/workspaces/${w.slug}/invitations/${revoked.body.data?.id ?? ''}`, { key: w.admin.key });
    expect(del.status).toBe(200);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/invitations/${revoked.body.data?.id ?? ''}`, { key: w.admin.key })).status).toBe(404);
    const expired = await invite('late@example.com');
    s.clock.advance(8 * DAY);
    try {
      const results = await Promise.all([
        accept(revoked.body.data?.token ?? ''),
        accept(expired.body.data?.token ?? ''),
        accept(`svc_inv_${'0'.repeat(40)}`),
        accept('garbage'),
      ]);
      for (const r of results) expect(r).toMatchObject({ status: 404, body: { success: false, error: 'Invitation was not found.' } });
      const list = await s.request<Invitation[]>('GET', `/api/workspaces/${w.slug}/invitations`, { key: w.owner.key });
      expect(list.body.data?.find((i) => i.id === expired.body.data?.id)?.status).toBe('expired');
      // An expired invitation no longer blocks a new one.
      expect((await invite('late@example.com')).status).toBe(201);
    } finally {
      s.clock.advance(-8 * DAY);
    }
  });

  it('validates the accept body', async () => {
    const r = await s.request('POST', '/api/invitations/accept', { body: { token: 'x', extra: 1 } });
    expect(r).toMatchObject({ status: 400, body: { error: 'Unknown field "extra".' } });
    expect((await s.request('POST', '/api/invitations/accept', { body: {} })).body.error).toBe('"token" is required.');
  });

  it('redeems a token once even when two clients race', async () => {
    const inv = await invite('race@example.com');
    const token = inv.body.data?.token ?? '';
    const statuses = (await Promise.all([accept(token), accept(token), accept(token)])).map((r) => r.status).sort();
    expect(statuses[0]).toBe(201);
    expect(statuses.slice(1).every((st) => st === 404 || st === 409)).toBe(true);
    const keys = await s.store.db.selectFrom('api_keys').innerJoin('users', 'users.id', 'api_keys.user_id').select('api_keys.id').where('users.email', '=', 'race@example.com').execute();
    expect(keys).toHaveLength(1);
  });
});
