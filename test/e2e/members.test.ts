import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateUser } from '../../src/modules/tenancy/users.js';
import { makeUser, makeWorkspace, startTestServer, type TestServer } from '../factories/harness.js';
import { addMember } from '../factories/members.js';
import { billingWorker } from '../factories/billing.js';
import { mailerFor, parseMail, startSmtp } from '../factories/smtp.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Member {
  user_id: string;
  email: string;
  name: string;
  role: string;
  status: string;
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
    expect(r.body.data?.[0]).toEqual({ user_id: w.owner.id, email: w.owner.email, name: expect.any(String), role: 'owner', status: 'active', joined_at: expect.any(String) });
  });

  it('adds an existing user; a second add is 409 and an unknown user 404', async () => {
    const w = await makeWorkspace(s);
    const u = await loneUser();
    const added = await s.request<Member>('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: u.id, role: 'member' } });
    expect(added.status).toBe(201);
    expect(added.body.data).toMatchObject({ user_id: u.id, email: u.email, role: 'member', status: 'pending' });
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
    expect((await addMember(s, a.slug, a.owner.key, u, 'member')).accepted?.status).toBe(200);
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

  it('makes a pending membership that grants nothing until the user accepts it with their own key', async () => {
    const w = await makeWorkspace(s);
    const home = await makeWorkspace(s);
    const u = await makeUser(s, home.id);
    await s.store.db.insertInto('members').values({ workspace_id: home.id, user_id: u.id, role: 'member', joined_at: new Date().toISOString() }).execute();
    const added = await s.request<Member>('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: u.id, role: 'admin' } });
    expect(added).toMatchObject({ status: 201, body: { data: { user_id: u.id, role: 'admin', status: 'pending' } } });
    // listed as pending to the members; to the user, the workspace does not exist
    expect((await members(w.slug, w.member.key)).body.data?.find((m) => m.user_id === u.id)?.status).toBe('pending');
    for (const path of [`/api/workspaces/${w.slug}`, `/api/workspaces/${w.slug}/members`, `/api/workspaces/${w.slug}/projects`, `/api/workspaces/${w.slug}/wallet`]) {
      expect(await s.request('GET', path, { key: u.key }), path).toMatchObject({ status: 404, body: { success: false, error: 'Workspace was not found.' } });
    }
    expect((await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: u.key, body: { name: 'sneak' } })).status).toBe(404);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${u.id}`, { key: u.key })).status).toBe(404);
    expect((await s.request<{ slug: string }[]>('GET', '/api/workspaces', { key: u.key })).body.data?.map((x) => x.slug)).toEqual([home.slug]);
    // its role is not changed while pending: another role is another offer
    const put = await s.request('PUT', `/api/workspaces/${w.slug}/members/${u.id}`, { key: w.owner.key, body: { role: 'member' } });
    expect(put).toMatchObject({ status: 409, body: { error: 'That membership is pending: the user has not accepted it yet. Cancel it (DELETE) and add the user again with the new role.' } });
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.admin.key, body: { user_id: u.id, role: 'member' } })).status).toBe(409);
    // only the user accepts: a member of the workspace gets 403, an outsider 404
    const accept = (key: string, userId = u.id) => s.request<Member>('POST', `/api/workspaces/${w.slug}/members/${userId}/accept`, { key });
    expect(await accept(w.owner.key)).toMatchObject({ status: 403, body: { error: 'Only the user a membership is offered to can accept or decline it, with their own API key.' } });
    expect(await accept(home.owner.key)).toMatchObject({ status: 404, body: { error: 'Workspace was not found.' } });
    expect((await accept(w.owner.key, w.member.id)).status).toBe(404);
    const ok = await accept(u.key);
    expect(ok).toMatchObject({ status: 200, body: { success: true, data: { user_id: u.id, email: u.email, role: 'admin', status: 'active' } } });
    expect((await s.request<{ role: string }>('GET', `/api/workspaces/${w.slug}`, { key: u.key })).body.data?.role).toBe('admin');
    expect(await accept(u.key)).toMatchObject({ status: 409, body: { error: 'You are already a member of this workspace.' } });
    // a workspace the user was never offered: 404, as for anyone
    expect((await s.request('POST', `/api/workspaces/${(await makeWorkspace(s)).slug}/members/${u.id}/accept`, { key: u.key })).status).toBe(404);
  });

  it('lets the user decline, and an owner or admin cancel, a pending membership', async () => {
    const w = await makeWorkspace(s);
    const home = await makeWorkspace(s);
    const u = await makeUser(s, home.id);
    await s.store.db.insertInto('members').values({ workspace_id: home.id, user_id: u.id, role: 'member', joined_at: new Date().toISOString() }).execute();
    const offer = (role = 'member') => s.request<Member>('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body: { user_id: u.id, role } });
    expect((await offer()).status).toBe(201);
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members/${u.id}/decline`, { key: w.admin.key })).status).toBe(403);
    const declined = await s.request<Member>('POST', `/api/workspaces/${w.slug}/members/${u.id}/decline`, { key: u.key });
    expect(declined).toMatchObject({ status: 200, body: { data: { user_id: u.id, status: 'pending' } } });
    expect((await members(w.slug, w.owner.key)).body.data?.map((m) => m.user_id)).not.toContain(u.id);
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members/${u.id}/accept`, { key: u.key })).status).toBe(404);
    // offered again (as owner), then cancelled by an owner: an admin may not cancel an owner's offer
    expect((await offer('owner')).status).toBe(201);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${u.id}`, { key: w.admin.key })).status).toBe(403);
    const cancelled = await s.request<Member>('DELETE', `/api/workspaces/${w.slug}/members/${u.id}`, { key: w.owner.key });
    expect(cancelled).toMatchObject({ status: 200, body: { data: { user_id: u.id, role: 'owner', status: 'pending' } } });
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members/${u.id}/accept`, { key: u.key })).status).toBe(404);
    // the user's other memberships and keys are untouched
    expect((await s.request('GET', `/api/workspaces/${home.slug}`, { key: u.key })).status).toBe(200);
  });

  it('counts only active owners: a pending owner cannot let the last one leave', async () => {
    const w = await makeWorkspace(s);
    const u = await loneUser();
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body: { user_id: u.id, role: 'owner' } })).status).toBe(201);
    expect((await s.request('PUT', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.owner.key, body: { role: 'admin' } })).status).toBe(409);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/members/${w.owner.id}`, { key: w.owner.key })).status).toBe(409);
  });
});

interface Accepted {
  user_id: string;
  key?: string;
}

// Issue 26, item 5, as the attacker did it: an owner invites invented addresses (without SMTP
// the token comes back in the response), redeems each token with no key, and had each new user
// create a workspace (with the starting credit) and add the inviter as its owner: past
// --max-workspaces-per-user, with free credit in every one.
describe.each(STORE_KINDS)('free credit and workspaces through made-up users on %s', (kind) => {
  const LIMIT = 10;
  const INVENTED = 12;
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { limits: { maxWorkspacesPerUser: LIMIT, maxProjectsPerWorkspace: 50 }, invitationTokenInResponse: true } });
  });
  afterAll(async () => s.close());

  let n = 0;
  const createWorkspace = (key: string) => {
    const slug = `made-${Date.now().toString(36)}-${(n++).toString()}`;
    return s.request<{ slug: string }>('POST', '/api/workspaces', { key, body: { name: slug, slug } });
  };
  const count = async (table: 'workspaces' | 'wallets') => Number((await s.store.db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  const startingCredits = async () =>
    Number((await s.store.db.selectFrom('wallet_transactions').select((eb) => eb.fn.countAll().as('n')).where('reference', '=', 'starting-credit').executeTakeFirstOrThrow()).n);
  /** The workspaces `userId` holds the owner role in and may act in (active memberships). */
  const owned = async (userId: string) => {
    const r = await s.store.db.selectFrom('members').select('workspace_id').where('user_id', '=', userId).where('role', '=', 'owner').execute();
    let acting = 0;
    for (const m of r) if ((await s.store.repos.members.access(m.workspace_id, userId)) !== undefined) acting++;
    return acting;
  };

  it('gives users made from handed-back tokens no starting credit and no workspace (403), so the inviter owns no more than the limit', async () => {
    const w = await makeWorkspace(s);
    const inviter = w.owner;
    for (let i = 0; i < LIMIT; i++) expect((await createWorkspace(inviter.key)).status).toBe(201);
    const before = { credits: await startingCredits(), workspaces: await count('workspaces'), wallets: await count('wallets') };

    const invented: { id: string; email: string; key: string }[] = [];
    for (let i = 0; i < INVENTED; i++) {
      const email = `invented-${i.toString()}-${w.slug}@example.invalid`;
      const inv = await s.request<{ token?: string }>('POST', `/api/workspaces/${w.slug}/invitations`, { key: inviter.key, body: { email, role: 'member' } });
      expect(inv.status).toBe(201);
      const acc = await s.request<Accepted>('POST', '/api/invitations/accept', { body: { token: inv.body.data?.token } });
      expect(acc.status).toBe(201);
      invented.push({ id: acc.body.data?.user_id ?? '', email, key: acc.body.data?.key ?? '' });
    }
    for (const u of invented) {
      const r = await createWorkspace(u.key);
      expect(r).toMatchObject({
        status: 403,
        body: {
          success: false,
          error: `Your e-mail address ${u.email} is not verified, so you cannot create a workspace yet: redeem an invitation e-mailed to it (on an installation with SMTP), or ask the operator to run \`slipway admin verify-user --email ${u.email}\`.`,
        },
      });
    }
    // nothing was made: no workspace, no wallet, no starting credit
    expect({ credits: await startingCredits(), workspaces: await count('workspaces'), wallets: await count('wallets') }).toEqual(before);
    // the inviter owns w and the LIMIT workspaces they created, and may create no more
    expect(await owned(inviter.id)).toBe(LIMIT + 1);
    expect((await createWorkspace(inviter.key)).status).toBe(403);
  });

  it('leaves an inviter added as owner pending, with no rights, until they accept with their own key', async () => {
    const inviter = (await makeWorkspace(s)).owner;
    // a workspace of someone else, who makes the inviter its owner
    const theirs = await makeWorkspace(s);
    const add = await s.request<Member & { status?: string }>('POST', `/api/workspaces/${theirs.slug}/members`, { key: theirs.owner.key, body: { user_id: inviter.id, role: 'owner' } });
    expect(add.status).toBe(201);
    expect(add.body.data).toMatchObject({ user_id: inviter.id, role: 'owner', status: 'pending' });
    // no rights: the workspace is not found, as for a non-member, and not listed
    for (const [method, path] of [
      ['GET', `/api/workspaces/${theirs.slug}`],
      ['GET', `/api/workspaces/${theirs.slug}/members`],
      ['GET', `/api/workspaces/${theirs.slug}/wallet`],
      ['PUT', `/api/workspaces/${theirs.slug}/members/${theirs.owner.id}`],
      ['DELETE', `/api/workspaces/${theirs.slug}`],
    ] as const) {
      const body = method === 'PUT' ? { role: 'member' } : undefined;
      expect((await s.request(method, path, { key: inviter.key, ...(body === undefined ? {} : { body }) })).status, `${method} ${path}`).toBe(404);
    }
    const listed = await s.request<{ slug: string }[]>('GET', '/api/workspaces', { key: inviter.key });
    expect(listed.body.data?.map((x) => x.slug)).not.toContain(theirs.slug);
    expect(await owned(inviter.id)).toBe(1);
    // nobody else accepts for them: not the adder, not an outsider
    expect((await s.request('POST', `/api/workspaces/${theirs.slug}/members/${inviter.id}/accept`, { key: theirs.owner.key })).status).toBe(403);
    expect((await s.request('POST', `/api/workspaces/${theirs.slug}/members/${inviter.id}/accept`, { key: (await makeWorkspace(s)).owner.key })).status).toBe(404);
    // a pending owner is no owner: the adder is still the last one
    expect((await s.request('DELETE', `/api/workspaces/${theirs.slug}/members/${theirs.owner.id}`, { key: theirs.owner.key })).status).toBe(409);

    const accepted = await s.request<Member & { status?: string }>('POST', `/api/workspaces/${theirs.slug}/members/${inviter.id}/accept`, { key: inviter.key });
    expect(accepted.status).toBe(200);
    expect(accepted.body.data).toMatchObject({ user_id: inviter.id, role: 'owner', status: 'active' });
    expect((await s.request<{ role: string }>('GET', `/api/workspaces/${theirs.slug}`, { key: inviter.key })).body.data?.role).toBe('owner');
    expect(await owned(inviter.id)).toBe(2);
  });
});

describe.each(STORE_KINDS)('pending owners and wallet notices on %s', (kind) => {
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let s: TestServer;
  beforeAll(async () => {
    smtp = await startSmtp();
    s = await startTestServer(kind, { mailer: await mailerFor(smtp.url()) });
  });
  afterAll(async () => {
    await s.close();
    await smtp.close();
  });

  it("mails a wallet notice to the active owners only, never to an owner who has not accepted", async () => {
    const w = await makeWorkspace(s);
    const stranger = await findOrCreateUser(s.deps, s.store.repos, `stranger-${w.slug}@example.com`);
    expect((await s.request('POST', `/api/workspaces/${w.slug}/members`, { key: w.owner.key, body: { user_id: stranger.id, role: 'owner' } })).status).toBe(201);
    // the starting credit (500) is below this threshold: the next check sends the "below" notice
    expect((await s.request('PUT', `/api/workspaces/${w.slug}/wallet/alert-threshold`, { key: w.owner.key, body: { threshold: 600 } })).status).toBe(200);
    await billingWorker(s).worker.checkWallet(w.id);
    const to = (email: string) => smtp.received.filter((m) => m.to.includes(email)).map((m) => parseMail(m.data).subject);
    expect(to(w.owner.email)).toEqual([`Slipway: the wallet of ${w.slug} is below its alert threshold`]);
    expect(to(stranger.email)).toEqual([]);
  });
});
