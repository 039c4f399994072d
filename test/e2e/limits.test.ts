// Issue 9, item 8: one key must not create workspaces (each an engine network and a starting
// credit) or projects without limit. Tried as a hostile tenant would: past the limit, at once in
// parallel, and checking that a refusal writes nothing (no workspace, member, wallet or credit).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { addMember } from '../factories/members.js';
import { STORE_KINDS } from '../factories/stores.js';

const WORKSPACES = 3;
const PROJECTS = 3;

const workspaceLimit = (n: number) =>
  `You have already created ${n.toString()} workspaces, the most a user may create on this installation (--max-workspaces-per-user, SLIPWAY_MAX_WORKSPACES_PER_USER = ${WORKSPACES.toString()}); delete one you no longer need, or ask the operator.`;
const projectLimit = (n: number) =>
  `This workspace already holds ${n.toString()} projects, the most a workspace may hold on this installation (--max-projects-per-workspace, SLIPWAY_MAX_PROJECTS_PER_WORKSPACE = ${PROJECTS.toString()}); delete one you no longer need, or ask the operator.`;

let n = 0;
const slug = (what: string) => `${what}-${Date.now().toString(36)}-${(++n).toString()}`;

describe.each(STORE_KINDS)('per-user limits on %s', (kind) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { limits: { maxWorkspacesPerUser: WORKSPACES, maxProjectsPerWorkspace: PROJECTS } } });
  });
  afterAll(async () => s.close());

  const createWorkspace = (key: string, wsSlug = slug('ws')) => s.request<{ slug: string }>('POST', '/api/workspaces', { key, body: { name: wsSlug, slug: wsSlug } });
  const createProject = (w: TestWorkspace, key: string, name = slug('app')) =>
    s.request<{ slug: string }>('POST', `/api/workspaces/${w.slug}/projects`, { key, body: { name } });
  const counts = async () => {
    const { db } = s.store;
    const count = async (table: 'workspaces' | 'workspace_creators' | 'members' | 'wallets' | 'wallet_transactions' | 'projects') =>
      Number((await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    return {
      workspaces: await count('workspaces'),
      creators: await count('workspace_creators'),
      members: await count('members'),
      wallets: await count('wallets'),
      credits: await count('wallet_transactions'),
      projects: await count('projects'),
    };
  };

  it('refuses a workspace past the limit with 403 naming the setting, and writes nothing: no workspace, wallet or credit', async () => {
    const w = await makeWorkspace(s);
    // w was made straight in the store, as the bootstrap makes one: it is not counted
    for (let i = 0; i < WORKSPACES; i++) expect((await createWorkspace(w.owner.key)).status).toBe(201);
    const before = await counts();
    const refusedSlug = slug('refused');
    const r = await createWorkspace(w.owner.key, refusedSlug);
    expect(r).toMatchObject({ status: 403, body: { success: false, error: workspaceLimit(WORKSPACES) } });
    expect(await counts()).toEqual(before);
    expect(await s.store.db.selectFrom('workspaces').select('id').where('slug', '=', refusedSlug).executeTakeFirst()).toBeUndefined();
    // the member and the admin of w created nothing: the limit is theirs, not the workspace's
    expect((await createWorkspace(w.member.key)).status).toBe(201);
    expect((await createWorkspace(w.admin.key)).status).toBe(201);
  });

  it('counts creations, not ownership: handing workspaces to an accomplice and stepping down frees no room', async () => {
    const w = await makeWorkspace(s);
    const accomplice = w.member;
    const made: string[] = [];
    for (let i = 0; i < WORKSPACES; i++) made.push((await createWorkspace(w.owner.key)).body.data?.slug ?? '');
    for (const ws of made) {
      const { added, accepted } = await addMember(s, ws, w.owner.key, accomplice, 'owner');
      expect(added.status).toBe(201);
      // the accomplice consents with their own key
      expect(accepted?.status).toBe(200);
      expect((await s.request('DELETE', `/api/workspaces/${ws}/members/${w.owner.id}`, { key: w.owner.key })).status).toBe(200);
    }
    expect(await createWorkspace(w.owner.key)).toMatchObject({ status: 403, body: { error: workspaceLimit(WORKSPACES) } });
    // the accomplice owns them now, but created none: their own room is whole
    expect((await createWorkspace(accomplice.key)).status).toBe(201);
  });

  it('holds under concurrent creations by one key: exactly the room left is granted', async () => {
    const w = await makeWorkspace(s);
    const before = await counts();
    const answers = await Promise.all(Array.from({ length: 8 }, () => createWorkspace(w.owner.key)));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(WORKSPACES);
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused).toHaveLength(8 - WORKSPACES);
    for (const a of refused) expect(a).toMatchObject({ status: 403, body: { error: workspaceLimit(WORKSPACES) } });
    const after = await counts();
    expect(after.workspaces - before.workspaces).toBe(WORKSPACES);
    expect(after.wallets - before.wallets).toBe(WORKSPACES);
    // the starting credit is once per user, and this owner had theirs with the fixture's workspace
    expect(after.credits - before.credits).toBe(0);
    expect(Number((await s.store.db.selectFrom('members').select((eb) => eb.fn.countAll().as('n')).where('user_id', '=', w.owner.id).where('role', '=', 'owner').executeTakeFirstOrThrow()).n)).toBe(WORKSPACES + 1);
  });

  it('gives a user the starting credit once, even for concurrent first workspaces', async () => {
    const w = await makeWorkspace(s);
    // a member who never owned a workspace: their first one gets the credit, and only one does
    const before = await counts();
    const answers = await Promise.all(Array.from({ length: WORKSPACES }, () => createWorkspace(w.member.key)));
    expect(answers.map((a) => a.status)).toEqual(Array(WORKSPACES).fill(201));
    expect((await counts()).credits - before.credits).toBe(1);
    const balances = await Promise.all(answers.map(async (a) => (await s.request<{ balance: number }>('GET', `/api/workspaces/${a.body.data?.slug ?? ''}/wallet`, { key: w.member.key })).body.data?.balance));
    expect(balances.sort((x, y) => (x ?? 0) - (y ?? 0))).toEqual([...Array<number>(WORKSPACES - 1).fill(0), 500]);
  });

  it('gives the room back when a workspace is deleted', async () => {
    const w = await makeWorkspace(s);
    const made: string[] = [];
    for (let i = 0; i < WORKSPACES; i++) made.push((await createWorkspace(w.owner.key)).body.data?.slug ?? '');
    expect((await createWorkspace(w.owner.key)).status).toBe(403);
    expect((await s.request('DELETE', `/api/workspaces/${made[0] ?? ''}`, { key: w.owner.key })).status).toBe(200);
    expect((await createWorkspace(w.owner.key)).status).toBe(201);
  });

  it('refuses a project past the limit with 403 naming the setting, in that workspace only, and writes nothing', async () => {
    const w = await makeWorkspace(s);
    const other = await makeWorkspace(s);
    await makeProject(s, w);
    for (let i = 0; i < PROJECTS - 1; i++) expect((await createProject(w, w.member.key)).status).toBe(201);
    const before = await counts();
    for (const key of [w.member.key, w.admin.key, w.owner.key]) {
      expect(await createProject(w, key)).toMatchObject({ status: 403, body: { success: false, error: projectLimit(PROJECTS) } });
    }
    // concurrent attempts change nothing either
    const burst = await Promise.all(Array.from({ length: 5 }, () => createProject(w, w.member.key)));
    expect(burst.map((b) => b.status)).toEqual([403, 403, 403, 403, 403]);
    expect(await counts()).toEqual(before);
    // another workspace has its own room
    expect((await createProject(other, other.member.key)).status).toBe(201);
    // a deleted project gives its room back
    const first = (await s.store.db.selectFrom('projects').select('slug').where('workspace_id', '=', w.id).orderBy('created_at').executeTakeFirstOrThrow()).slug;
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}/projects/${first}`, { key: w.admin.key })).status).toBe(200);
    expect((await createProject(w, w.member.key)).status).toBe(201);
  });

  it('counts concurrent project creations exactly', async () => {
    const w = await makeWorkspace(s);
    const answers = await Promise.all(Array.from({ length: 7 }, () => createProject(w, w.member.key)));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(PROJECTS);
    expect(answers.filter((a) => a.status === 403)).toHaveLength(7 - PROJECTS);
    expect(Number((await s.store.db.selectFrom('projects').select((eb) => eb.fn.countAll().as('n')).where('workspace_id', '=', w.id).executeTakeFirstOrThrow()).n)).toBe(PROJECTS);
  });
});

describe('the limits with their defaults', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
  });
  afterAll(async () => s.close());

  it('allows 10 workspaces per user when the platform does not say otherwise, and 0 turns a limit off', async () => {
    const w = await makeWorkspace(s);
    for (let i = 0; i < 10; i++) expect((await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'x', slug: slug('d') } })).status).toBe(201);
    const r = await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'x', slug: slug('d') } });
    expect(r.status).toBe(403);
    expect(r.body.error).toContain('SLIPWAY_MAX_WORKSPACES_PER_USER = 10');
    s.deps.platform.limits = { maxWorkspacesPerUser: 0 };
    expect((await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'x', slug: slug('d') } })).status).toBe(201);
  });
});
