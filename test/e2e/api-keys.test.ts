import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Key {
  id: string;
  name: string;
  key?: string;
  key_prefix: string;
  user_id: string;
  expires_at: string;
  created_at: string;
  last_used_at: string | null;
}

const DAY = 86_400_000;

describe.each(STORE_KINDS)('API keys on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const create = (body: unknown, key = w.member.key) => s.request<Key>('POST', `/api/workspaces/${w.slug}/api-keys`, { key, body });
  const list = (key: string) => s.request<Key[]>('GET', `/api/workspaces/${w.slug}/api-keys`, { key });

  it('creates a key shown once, in the spec format, expiring after expires_in_days', async () => {
    const r = await create({ name: 'ci', expires_in_days: 30 });
    expect(r.status).toBe(201);
    const k = r.body.data;
    expect(k?.key).toMatch(/^svc_sk_[0-9a-f]{40}$/);
    expect(k?.key_prefix).toBe(`${k?.key?.slice(0, 13) ?? ''}...`);
    expect(Date.parse(k?.expires_at ?? '') - Date.parse(k?.created_at ?? '')).toBe(30 * DAY);
    expect(k?.user_id).toBe(w.member.id);
    // The new key works, and the listing never shows it again.
    expect((await s.request('GET', `/api/workspaces/${w.slug}`, { key: k?.key })).status).toBe(200);
    const listed = await list(w.member.key);
    expect(listed.text).not.toContain(k?.key ?? 'missing');
    expect(listed.body.data?.find((x) => x.id === k?.id)).toMatchObject({ name: 'ci', key_prefix: k?.key_prefix });
    expect(listed.body.data?.some((x) => 'key' in x)).toBe(false);
  });

  it('stores only the SHA-256 of a key', async () => {
    const r = await create({ name: 'hashed' });
    const key = r.body.data?.key ?? '';
    const row = await s.store.db.selectFrom('api_keys').selectAll().where('id', '=', r.body.data?.id ?? '').executeTakeFirstOrThrow();
    expect(row.key_hash).toBe(createHash('sha256').update(key).digest('hex'));
    expect(JSON.stringify(row)).not.toContain(key.slice(7));
  });

  it('defaults to 90 days', async () => {
    const r = await create({ name: 'default' });
    expect(Date.parse(r.body.data?.expires_at ?? '') - Date.parse(r.body.data?.created_at ?? '')).toBe(90 * DAY);
  });

  it.each([
    [{ name: 'x', expires_in_days: 0 }, '"expires_in_days" must be at least 1.'],
    [{ name: 'x', expires_in_days: 3651 }, '"expires_in_days" must be at most 3650.'],
    [{ name: 'x', expires_in_days: 1.5 }, '"expires_in_days" must be an integer.'],
    [{ name: 'x', expires_in_days: '90' }, '"expires_in_days" must be an integer.'],
    [{ expires_in_days: 9 }, '"name" is required.'],
  ])('rejects %j with 400', async (body, message) => {
    expect(await create(body)).toMatchObject({ status: 400, body: { success: false, error: message } });
  });

  it('shows owners and admins every key, members their own', async () => {
    const mine = await create({ name: 'mine' }, w.member.key);
    const admins = await list(w.admin.key);
    const users = new Set(admins.body.data?.map((k) => k.user_id));
    expect(users).toEqual(new Set([w.owner.id, w.admin.id, w.member.id]));
    const members = await list(w.member.key);
    expect(members.body.data?.every((k) => k.user_id === w.member.id)).toBe(true);
    expect(members.body.data?.map((k) => k.id)).toContain(mine.body.data?.id);
  });

  it('revokes: own key by anyone, others\u2019 keys only by owners and admins', async () => {
    const mine = await create({ name: 'to-revoke' }, w.member.key);
    const adminKey = await create({ name: 'admin-key' }, w.admin.key);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/api-keys/${adminKey.body.data?.id ?? ''}`, { key: w.member.key })).status).toBe(403);
    const r = await s.request<Key>('DELETE', `/api/workspaces/${w.slug}/api-keys/${mine.body.data?.id ?? ''}`, { key: w.member.key });
    expect(r.status).toBe(200);
    const dead = await s.request('GET', `/api/workspaces/${w.slug}`, { key: mine.body.data?.key });
    expect(dead).toMatchObject({ status: 401, body: { success: false, error: 'The API key has been revoked.' } });
    expect((await list(w.member.key)).body.data?.map((k) => k.id)).not.toContain(mine.body.data?.id);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/api-keys/${adminKey.body.data?.id ?? ''}`, { key: w.owner.key })).status).toBe(200);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/api-keys/${adminKey.body.data?.id ?? ''}`, { key: w.owner.key })).status).toBe(404);
  });

  it('rejects an expired key with 401', async () => {
    const r = await create({ name: 'short', expires_in_days: 1 });
    s.clock.advance(DAY + 1000);
    try {
      const res = await s.request('GET', '/api/workspaces', { key: r.body.data?.key });
      expect(res).toMatchObject({ status: 401, body: { success: false, error: 'The API key has expired.' } });
    } finally {
      s.clock.advance(-(DAY + 1000));
    }
  });

  it.each([
    [undefined, 'An API key is required in the X-API-Key header.'],
    ['', 'An API key is required in the X-API-Key header.'],
    ['svc_sk_short', 'The API key is not valid.'],
    [`svc_sk_${'A'.repeat(40)}`, 'The API key is not valid.'],
    [`svc_sk_${'0'.repeat(40)}`, 'The API key is not valid.'],
  ])('answers 401 for the key %j', async (key, message) => {
    const r = await s.request('GET', '/api/workspaces', { key });
    expect(r).toMatchObject({ status: 401, body: { success: false, error: message } });
  });

  it('records last use coarsely', async () => {
    const r = await create({ name: 'used' });
    await s.request('GET', '/api/workspaces', { key: r.body.data?.key });
    const k = (await list(w.member.key)).body.data?.find((x) => x.id === r.body.data?.id);
    expect(k?.last_used_at).not.toBeNull();
  });
});
