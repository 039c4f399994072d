import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateUser } from '../../src/modules/tenancy/users.js';
import { makeWorkspace, startTestServer, type TestServer, type TestUser, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { mailerFor, parseMail, startSmtp } from '../factories/smtp.js';

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
  key?: string;
  key_prefix?: string;
  expires_at?: string;
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

  it('invites an address on a single-label host, as the owner made on first start has (admin@localhost)', async () => {
    const inv = await invite('Admin@LocalHost');
    expect(inv.status).toBe(201);
    expect(inv.body.data?.email).toBe('admin@localhost');
    const r = await accept(inv.body.data?.token ?? '', 'Admin');
    expect(r.status).toBe(201);
    expect((await s.request('GET', `/api/workspaces/${w.slug}`, { key: r.body.data?.key })).status).toBe(200);
    for (const bad of ['admin@', '@localhost', 'admin@-local', 'admin@local host', 'a@b@c']) {
      expect(await invite(bad)).toMatchObject({ status: 400, body: { error: '"email" must be a valid e-mail address.' } });
    }
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
    expect(r.body.data?.key_prefix).toBe(`${r.body.data?.key?.slice(0, 13) ?? ''}...`);
    const me = await s.request<{ role: string }>('GET', `/api/workspaces/${w.slug}`, { key: r.body.data?.key });
    expect(me.body.data?.role).toBe('admin');
    const members = await s.request<{ user_id: string; name: string; email: string }[]>('GET', `/api/workspaces/${w.slug}/members`, { key: w.owner.key });
    expect(members.body.data).toContainEqual(expect.objectContaining({ user_id: r.body.data?.user_id, name: 'Dave', email: 'dave@example.com' }));
    const list = await s.request<Invitation[]>('GET', `/api/workspaces/${w.slug}/invitations`, { key: w.owner.key });
    expect(list.body.data?.find((i) => i.id === inv.body.data?.id)?.status).toBe('accepted');
    // Single use.
    expect((await accept(inv.body.data?.token ?? '')).status).toBe(404);
  });

  it('adds an existing user (from another workspace) who accepts with their own key, and mints no key', async () => {
    const other = await makeWorkspace(s);
    const inv = await invite(other.owner.email, 'member');
    const r = await s.request<Accepted>('POST', '/api/invitations/accept', { key: other.owner.key, body: { token: inv.body.data?.token } });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({ user_id: other.owner.id, workspace: expect.objectContaining({ slug: w.slug, role: 'member' }), role: 'member' });
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

  it('leaves a user made from a handed-back token unverified: no workspace of their own until the operator verifies them', async () => {
    const inv = await invite('kim@example.com');
    const r = await accept(inv.body.data?.token ?? '', 'Kim');
    expect(r.status).toBe(201);
    const key = r.body.data?.key ?? '';
    // a member of the inviting workspace like any other
    expect((await s.request('GET', `/api/workspaces/${w.slug}`, { key })).status).toBe(200);
    const refused = await s.request('POST', '/api/workspaces', { key, body: { name: 'Kim', slug: `kim-${w.slug}` } });
    expect(refused).toMatchObject({ status: 403, body: { success: false, error: expect.stringMatching(/^Your e-mail address kim@example\.com is not verified/) } });
    const row = await s.store.repos.users.byEmail('kim@example.com');
    expect(row?.verified_at).toBeNull();
    // the operator vouches for the address (slipway admin verify-user does this)
    await s.store.repos.users.verify(row?.id ?? '', new Date().toISOString());
    expect((await s.request('POST', '/api/workspaces', { key, body: { name: 'Kim', slug: `kim-${w.slug}` } })).status).toBe(201);
    expect((await s.request<{ balance: number }>('GET', `/api/workspaces/kim-${w.slug}/wallet`, { key })).body.data?.balance).toBe(500);
  });

  it('answers 409 to an invitation for a user with a pending membership, and to redeeming one, naming how to accept it', async () => {
    const other = await makeWorkspace(s);
    const inv = await invite(other.admin.email);
    expect(inv.status).toBe(201);
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body: { user_id: other.admin.id, role: 'member' } })).status).toBe(201);
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body: { user_id: other.member.id, role: 'member' } })).status).toBe(201);
    expect(await invite(other.member.email)).toMatchObject({ status: 409, body: { error: `${other.member.email} is already a member of this workspace (or has a pending membership of it).` } });
    const r = await s.request('POST', '/api/invitations/accept', { key: other.admin.key, body: { token: inv.body.data?.token } });
    expect(r).toMatchObject({
      status: 409,
      body: { error: `You already have a pending membership of this workspace: accept it with POST /api/workspaces/${w.slug}/members/${other.admin.id}/accept.` },
    });
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

/** Live API keys of a user, straight from the store. */
const keysOf = async (s: TestServer, userId: string) =>
  (await s.store.db.selectFrom('api_keys').select('id').where('user_id', '=', userId).where('revoked_at', 'is', null).execute()).length;

describe.each(STORE_KINDS)('invitations cannot take over an existing account on %s', (kind) => {
  let s: TestServer;
  let b: TestWorkspace;
  let attacker: TestUser;
  let mine: string;
  beforeAll(async () => {
    s = await startTestServer(kind);
    // Tenant B; the attacker is a plain member there and makes a workspace of their own.
    b = await makeWorkspace(s);
    attacker = b.member;
    mine = `evil-${b.slug}`;
    const ws = await s.request('POST', '/api/workspaces', { key: attacker.key, body: { name: 'Evil', slug: mine } });
    expect(ws.status).toBe(201);
  });
  afterAll(async () => s.close());

  const inviteAs = async (email: string, role = 'owner') => {
    const r = await s.request<Invitation>('POST', `/api/workspaces/${mine}/invitations`, { key: attacker.key, body: { email, role } });
    expect(r.status).toBe(201);
    return r.body.data?.token ?? '';
  };
  const acceptWith = (token: string, key?: string) => s.request<Accepted>('POST', '/api/invitations/accept', { key, body: { token } });

  it('refuses a token alone, or with the attacker\u2019s key, for an existing user\u2019s e-mail: 401, no key, no membership', async () => {
    const token = await inviteAs(b.owner.email);
    const before = await keysOf(s, b.owner.id);

    const bare = await acceptWith(token);
    expect(bare).toMatchObject({ status: 401, body: { success: false } });
    expect(bare.body.error).toBe(
      `This invitation is for ${b.owner.email}, which already has an account: accept it with that account's own API key in the X-API-Key header (no new key is made for an existing account).`,
    );
    expect(bare.text).not.toMatch(/svc_sk_/);

    const asAttacker = await acceptWith(token, attacker.key);
    expect(asAttacker.status).toBe(401);
    expect(asAttacker.body.error).toMatch(/^The API key belongs to another account than /);

    const forged = await acceptWith(token, `svc_sk_${'0'.repeat(40)}`);
    expect(forged).toMatchObject({ status: 401, body: { success: false } });
    expect(forged.body.error).toMatch(/^The API key is not valid; this invitation is for an existing account/);

    // Nothing changed for the victim: no new key, not a member of the attacker's workspace, and
    // the attacker still cannot touch tenant B as its owner.
    expect(await keysOf(s, b.owner.id)).toBe(before);
    const members = await s.request<{ user_id: string }[]>('GET', `/api/workspaces/${mine}/members`, { key: attacker.key });
    expect(members.body.data?.map((m) => m.user_id)).toEqual([attacker.id]);
    expect((await s.request('DELETE', `/api/workspaces/${b.slug}`, { key: attacker.key })).status).toBe(403);
    // The token was not spent by the refusals.
    const list = await s.request<Invitation[]>('GET', `/api/workspaces/${mine}/invitations`, { key: attacker.key });
    expect(list.body.data?.find((i) => i.email === b.owner.email)?.status).toBe('pending');
  });

  it('lets the invited user accept with their own key: membership added, no key minted', async () => {
    const victim = await makeWorkspace(s);
    const token = await inviteAs(victim.admin.email, 'member');
    const before = await keysOf(s, victim.admin.id);
    const r = await acceptWith(token, victim.admin.key);
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({ user_id: victim.admin.id, workspace: expect.objectContaining({ slug: mine, role: 'member' }), role: 'member' });
    expect(r.text).not.toMatch(/svc_sk_/);
    expect(await keysOf(s, victim.admin.id)).toBe(before);
    expect((await s.request('GET', `/api/workspaces/${mine}`, { key: victim.admin.key })).status).toBe(200);
    // Single use, with or without the key.
    expect((await acceptWith(token, victim.admin.key)).status).toBe(404);
  });

  it('refuses a revoked key of the invited user', async () => {
    const victim = await makeWorkspace(s);
    const token = await inviteAs(victim.member.email, 'member');
    const del = await s.request('DELETE', `/api/workspaces/${victim.slug}/api-keys/${victim.member.keyId}`, { key: victim.member.key });
    expect(del.status).toBe(200);
    const r = await acceptWith(token, victim.member.key);
    expect(r.status).toBe(401);
    expect(r.body.error).toMatch(/^The API key has been revoked; this invitation is for an existing account/);
    expect(await keysOf(s, victim.member.id)).toBe(0);
  });

  it('still answers 404 for an unknown token, whatever key comes with it', async () => {
    expect((await acceptWith(`svc_inv_${'2'.repeat(40)}`)).status).toBe(404);
    expect((await acceptWith(`svc_inv_${'2'.repeat(40)}`, attacker.key)).status).toBe(404);
    expect((await acceptWith(`svc_inv_${'2'.repeat(40)}`, 'garbage')).status).toBe(404);
  });

  it('creates a new account with a first key for an address without one, even when a key is sent along', async () => {
    const token = await inviteAs('fresh-person@example.com', 'member');
    const r = await acceptWith(token, attacker.key);
    expect(r.status).toBe(201);
    expect(r.body.data?.user_id).not.toBe(attacker.id);
    expect(r.body.data?.key).toMatch(/^svc_sk_[0-9a-f]{40}$/);
    const me = await s.request<{ role: string }>('GET', `/api/workspaces/${mine}`, { key: r.body.data?.key });
    expect(me.body.data?.role).toBe('member');
  });

  it('never mints a key when a member is added by user_id', async () => {
    const victim = await makeWorkspace(s);
    const before = await keysOf(s, victim.owner.id);
    const r = await s.request('POST', `/api/workspaces/${mine}/members`, { key: attacker.key, body: { user_id: victim.owner.id, role: 'member' } });
    expect(r.status).toBe(201);
    expect(r.text).not.toMatch(/svc_sk_/);
    expect(await keysOf(s, victim.owner.id)).toBe(before);
    // A key made in the attacker's workspace is always the caller's own.
    const k = await s.request<{ id: string }>('POST', `/api/workspaces/${mine}/api-keys`, { key: attacker.key, body: { name: 'x' } });
    expect(k.status).toBe(201);
    const row = await s.store.db.selectFrom('api_keys').select('user_id').where('id', '=', k.body.data?.id ?? '').executeTakeFirstOrThrow();
    expect(row.user_id).toBe(attacker.id);
  });
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => {
    srv.close(() => {
      resolve();
    });
  });
  return port;
}

describe.each(STORE_KINDS)('invitations by e-mail on %s', (kind) => {
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    smtp = await startSmtp();
    // --invitation-token-in-response yes does not matter once SMTP is configured.
    s = await startTestServer(kind, { mailer: await mailerFor(smtp.url()), platform: { invitationTokenInResponse: true } });
    w = await makeWorkspace(s);
  });
  afterAll(async () => {
    await s.close();
    await smtp.close();
  });

  it('sends the token to the invited address only, never in the create response', async () => {
    const r = await s.request<Invitation>('POST', `/api/workspaces/${w.slug}/invitations`, { key: w.admin.key, body: { email: 'Erin@Example.com', role: 'admin' } });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({ id: expect.any(String), email: 'erin@example.com', role: 'admin', status: 'pending', expires_at: expect.any(String), created_at: expect.any(String) });
    expect(r.text).not.toContain('svc_inv_');
    const mail = smtp.received.find((m) => m.to.includes('erin@example.com'));
    expect(mail).toBeDefined();
    expect(mail?.from).toBe('slipway@test.example');
    const { subject, body: text } = parseMail(mail?.data ?? '');
    expect(subject).toBe(`Invitation to the Slipway workspace "${w.slug}"`);
    const token = /svc_inv_[0-9a-f]{40}/.exec(text)?.[0] ?? '';
    expect(token).not.toBe('');
    for (const part of [w.slug, 'as an admin', w.admin.email, r.body.data?.expires_at ?? '?', 'POST /api/invitations/accept', `"token": "${token}"`, 'X-API-Key']) {
      expect(text).toContain(part);
    }
    // The e-mailed token works: a new user joins and gets a first key.
    const accepted = await s.request<Accepted>('POST', '/api/invitations/accept', { body: { token, name: 'Erin' } });
    expect(accepted.status).toBe(201);
    expect(accepted.body.data).toMatchObject({ role: 'admin', key: expect.stringMatching(/^svc_sk_/) });
  });

  const mailedToken = (email: string): string => {
    const mail = smtp.received.filter((m) => m.to.includes(email)).at(-1);
    return /svc_inv_[0-9a-f]{40}/.exec(parseMail(mail?.data ?? '').body)?.[0] ?? '';
  };
  const balanceOf = async (slug: string, key: string) => (await s.request<{ balance: number }>('GET', `/api/workspaces/${slug}/wallet`, { key })).body.data?.balance;

  it('takes an e-mailed token as proof of the address: the new user may create a workspace, and it gets the starting credit', async () => {
    const invited = await s.request('POST', `/api/workspaces/${w.slug}/invitations`, { key: w.admin.key, body: { email: 'ivy@example.com', role: 'member' } });
    expect(invited.status).toBe(201);
    const accepted = await s.request<Accepted>('POST', '/api/invitations/accept', { body: { token: mailedToken('ivy@example.com') } });
    expect(accepted.status).toBe(201);
    const key = accepted.body.data?.key ?? '';
    const made = await s.request<{ slug: string }>('POST', '/api/workspaces', { key, body: { name: 'Ivy', slug: `ivy-${w.slug}` } });
    expect(made.status).toBe(201);
    expect(await balanceOf(`ivy-${w.slug}`, key)).toBe(500);
  });

  it('verifies an existing unverified user who redeems an e-mailed token with their own key', async () => {
    // made from a token handed back in a response (before SMTP was configured): unverified
    const user = await findOrCreateUser(s.deps, s.store.repos, `jo-${w.slug}@example.com`, 'Jo', false);
    const { key } = await s.services.apiKeys.issue(s.store.repos, { userId: user.id, workspaceId: w.id, name: 'test', expiresInDays: 30 });
    expect((await s.request('POST', '/api/workspaces', { key, body: { name: 'Jo', slug: `jo-${w.slug}` } })).status).toBe(403);
    expect((await s.request('POST', `/api/workspaces/${w.slug}/invitations`, { key: w.admin.key, body: { email: user.email, role: 'member' } })).status).toBe(201);
    const accepted = await s.request<Accepted>('POST', '/api/invitations/accept', { key, body: { token: mailedToken(user.email) } });
    expect(accepted.status).toBe(201);
    expect((await s.request('POST', '/api/workspaces', { key, body: { name: 'Jo', slug: `jo-${w.slug}` } })).status).toBe(201);
    expect(await balanceOf(`jo-${w.slug}`, key)).toBe(500);
  });

  it('saves nothing and answers 502 when the SMTP server cannot be reached', async () => {
    const down = await startTestServer(kind, { mailer: await mailerFor(`smtp://127.0.0.1:${(await closedPort()).toString()}`) });
    try {
      const dw = await makeWorkspace(down);
      const r = await down.request('POST', `/api/workspaces/${dw.slug}/invitations`, { key: dw.owner.key, body: { email: 'frank@example.com', role: 'member' } });
      expect(r).toMatchObject({
        status: 502,
        body: { success: false, error: 'The invitation e-mail could not be sent: the SMTP server refused the connection. Nothing was saved; try again later, or ask the operator to check the SMTP settings.' },
      });
      expect(await down.store.db.selectFrom('invitations').select('id').where('workspace_id', '=', dw.id).execute()).toEqual([]);
      const list = await down.request<Invitation[]>('GET', `/api/workspaces/${dw.slug}/invitations`, { key: dw.owner.key });
      expect(list.body.data).toEqual([]);
    } finally {
      await down.close();
    }
  });

  it('never shows or logs the SMTP password when the server refuses the login', async () => {
    const guarded = await startSmtp({ password: 'right-password' });
    const password = 'Wr0ng-Secret-Pa55';
    const bad = await startTestServer(kind, { mailer: await mailerFor(guarded.url(`mailer:${password}`)) });
    try {
      const bw = await makeWorkspace(bad);
      const r = await bad.request('POST', `/api/workspaces/${bw.slug}/invitations`, { key: bw.owner.key, body: { email: 'gina@example.com', role: 'member' } });
      expect(r.status).toBe(502);
      expect(r.body.error).toMatch(/^The invitation e-mail could not be sent: the SMTP server refused the login/);
      expect(r.text).not.toContain(password);
      expect(bad.logs.join('\n')).not.toContain(password);
      expect(guarded.received).toEqual([]);
      expect(await bad.store.db.selectFrom('invitations').select('id').where('workspace_id', '=', bw.id).execute()).toEqual([]);
    } finally {
      await bad.close();
      await guarded.close();
    }
  });
});

describe.each(STORE_KINDS)('--invitation-token-in-response no without SMTP on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { invitationTokenInResponse: false } });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  it('refuses to create an invitation nobody could receive, and saves nothing', async () => {
    const r = await s.request('POST', `/api/workspaces/${w.slug}/invitations`, { key: w.owner.key, body: { email: 'hal@example.com', role: 'member' } });
    expect(r).toMatchObject({ status: 409, body: { success: false } });
    expect(r.body.error).toMatch(/^This installation cannot deliver invitations: it has no SMTP server/);
    expect(r.text).not.toContain('svc_inv_');
    expect(await s.store.db.selectFrom('invitations').select('id').where('workspace_id', '=', w.id).execute()).toEqual([]);
  });
});
