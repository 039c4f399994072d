// Issue 9, item 8: one key must not create workspaces (each an engine network and a starting
// credit) or projects without limit. Tried as a hostile tenant would: past the limit, at once in
// parallel, and checking that a refusal writes nothing (no workspace, member, wallet or credit).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runningProject } from '../factories/billing.js';
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

// Issue 26 item 6: 60 databases in one workspace were 60 × 202, each a container of 512 MiB and a
// CPU; and nothing bounded the memory all tenants' containers reserve on the host.
const DATABASES = 2;
const databaseLimit = (n: number) =>
  `This workspace already holds ${n.toString()} databases (those of template instances included), the most a workspace may hold on this installation (--max-databases-per-workspace, SLIPWAY_MAX_DATABASES_PER_WORKSPACE = ${DATABASES.toString()}); delete one you no longer need, or ask the operator.`;

describe.each(STORE_KINDS)('databases per workspace on %s', (kind) => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { limits: { maxDatabasesPerWorkspace: DATABASES } } });
  });
  afterAll(async () => s.close());

  const createDatabase = (w: TestWorkspace, name = slug('db')) => s.request('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name, type: 'redis' } });
  const createInstance = (w: TestWorkspace, template: string, name = slug('tpl')) => s.request('POST', `/api/workspaces/${w.slug}/templates`, { key: w.member.key, body: { name, template_name: template } });
  const rows = async (w: TestWorkspace) => ({
    databases: (await s.store.db.selectFrom('databases').select('id').where('workspace_id', '=', w.id).execute()).length,
    projects: (await s.store.db.selectFrom('projects').select('id').where('workspace_id', '=', w.id).execute()).length,
  });

  it('refuses a database past the limit with 403 naming the setting, in that workspace only, and writes nothing', async () => {
    const w = await makeWorkspace(s);
    const other = await makeWorkspace(s);
    for (let i = 0; i < DATABASES; i++) expect((await createDatabase(w)).status).toBe(202);
    const before = await rows(w);
    expect(await createDatabase(w)).toMatchObject({ status: 403, body: { success: false, error: databaseLimit(DATABASES) } });
    const burst = await Promise.all(Array.from({ length: 4 }, () => createDatabase(w)));
    expect(burst.map((b) => b.status)).toEqual([403, 403, 403, 403]);
    expect(await rows(w)).toEqual(before);
    expect((await createDatabase(other)).status).toBe(202);
  });

  it('counts the databases template instances made, and refuses an instance whose database would pass the limit without making the instance', async () => {
    const w = await makeWorkspace(s);
    // a template with a database, then a database of its own: the limit is reached
    expect((await createInstance(w, 'umami')).status).toBe(201);
    expect((await createDatabase(w)).status).toBe(202);
    expect(await createDatabase(w)).toMatchObject({ status: 403, body: { error: databaseLimit(DATABASES) } });
    const before = await rows(w);
    expect(await createInstance(w, 'gitea')).toMatchObject({ status: 403, body: { success: false, error: databaseLimit(DATABASES) } });
    expect(await rows(w)).toEqual(before);
    // an instance without a database is not a database
    expect((await createInstance(w, 'uptime-kuma')).status).toBe(201);
  });

  it('counts concurrent creations exactly', async () => {
    const w = await makeWorkspace(s);
    const answers = await Promise.all(Array.from({ length: 6 }, () => createDatabase(w)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(DATABASES);
    expect(answers.filter((a) => a.status === 403)).toHaveLength(6 - DATABASES);
    expect((await rows(w)).databases).toBe(DATABASES);
  });
});

describe.each(STORE_KINDS)('the memory all tenants may reserve on %s', (kind) => {
  let s: TestServer;
  beforeAll(async () => {
    // 2 GiB for the whole installation; a database's container has 512 MiB (the default)
    s = await startTestServer(kind, { platform: { limits: { maxReservedMemoryMb: 2048 } } });
  });
  afterAll(async () => s.close());

  const refused = { status: 409, body: { success: false, error: expect.stringContaining('(--max-reserved-memory, SLIPWAY_MAX_RESERVED_MEMORY)') as unknown } };

  it('refuses databases, template deploys, deploys, resizes and redeploys that would pass the bound, with 409 before anything starts, across workspaces', async () => {
    const a = await makeWorkspace(s);
    const b = await makeWorkspace(s);
    const api = (w: TestWorkspace) => `/api/workspaces/${w.slug}`;
    // a's project serves 1 replica of 0.25 GiB: 256 MiB
    const p = await runningProject(s, a.id, { replicas: 1, cpu: '0.25', ram: '0.25' });
    // b deploys a template instance of 0.5 GiB (768) and makes a database (1280)
    expect((await s.request('POST', `${api(b)}/templates`, { key: b.member.key, body: { name: 'kuma', template_name: 'uptime-kuma' } })).status).toBe(201);
    expect((await s.request('POST', `${api(b)}/templates/kuma/deploy`, { key: b.member.key, body: { mode: 'image' } })).status).toBe(202);
    const first = await s.request('POST', `${api(b)}/databases`, { key: b.member.key, body: { name: 'one', type: 'redis' } });
    expect(first.status).toBe(202);
    // a's instance with a PostgreSQL database (1792); deploying it (0.5 GiB more) would pass 2 GiB
    expect((await s.request('POST', `${api(a)}/templates`, { key: a.member.key, body: { name: 'umami', template_name: 'umami' } })).status).toBe(201);
    const deployments = async () => (await s.store.db.selectFrom('deployments').select('id').execute()).length;
    const queued = await deployments();
    const tooMuch = await s.request('POST', `${api(a)}/templates/umami/deploy`, { key: a.member.key, body: { mode: 'image' } });
    expect(tooMuch).toMatchObject(refused);
    expect(tooMuch.body.error).toBe(
      'This installation cannot reserve 512 MiB of memory for it now: the containers of all its tenants may reserve at most 2 GiB together (--max-reserved-memory, SLIPWAY_MAX_RESERVED_MEMORY), and that bound would be passed. Stop or shrink something you run, or ask the operator.',
    );
    expect(await deployments()).toBe(queued);
    // nor a database in any workspace (nothing is written)
    expect(await s.request('POST', `${api(b)}/databases`, { key: b.member.key, body: { name: 'two', type: 'redis' } })).toMatchObject(refused);
    expect(await s.store.db.selectFrom('databases').select('id').where('name', '=', 'two').execute()).toEqual([]);
    // a's project grows to 2 replicas (512: 2048 in all, the bound itself), not to 3
    expect((await s.request('PUT', `${api(a)}/projects/${p.slug}`, { key: a.member.key, body: { replicas: 2 } })).status).toBe(200);
    expect(await s.request('PUT', `${api(a)}/projects/${p.slug}`, { key: a.member.key, body: { replicas: 3 } })).toMatchObject(refused);
    expect((await s.store.db.selectFrom('projects').select('replicas').where('id', '=', p.id).executeTakeFirstOrThrow()).replicas).toBe(2);
    // what a project holds already is replaced, not added to: its restart and redeploy are within the bound
    expect((await s.request('POST', `${api(a)}/projects/${p.slug}/restart`, { key: a.member.key })).status).toBe(202);
    expect((await s.request('POST', `${api(a)}/projects/${p.slug}/redeploy`, { key: a.member.key })).status).toBe(202);
    // another project's rollback to its stopped deployment (0.25 GiB) would pass it
    const q = await runningProject(s, b.id, { replicas: 1, cpu: '0.25', ram: '0.25' });
    await s.store.db.updateTable('deployments').set({ status: 'stopped' }).where('project_id', '=', q.id).execute();
    await s.store.db.updateTable('projects').set({ status: 'stopped' }).where('id', '=', q.id).execute();
    expect(await s.request('POST', `${api(b)}/projects/${q.slug}/deployments/${q.deploymentId}/rollback`, { key: b.member.key })).toMatchObject(refused);
    // a database deleted gives its memory back
    expect((await s.request('DELETE', `${api(b)}/databases/one`, { key: b.member.key })).status).toBeLessThan(300);
    expect((await s.request('POST', `${api(a)}/templates/umami/deploy`, { key: a.member.key, body: { mode: 'image' } })).status).toBe(202);
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
    s.deps.policies.limits.maxWorkspacesPerUser = 0;
    expect((await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'x', slug: slug('d') } })).status).toBe(201);
  });
});
