import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Project {
  id: string;
  name: string;
  slug: string;
  status: string;
  port: number;
  replicas: number;
  cpu: string;
  ram: string;
  default_domain: string;
  url: string;
  git: Record<string, unknown> | null;
  created_at: string;
}

describe.each(STORE_KINDS)('projects on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { appsDomain: 'apps.test', routerPort: 8000 } });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const base = () => `/api/workspaces/${w.slug}/projects`;
  const create = (body: unknown, key = w.member.key) => s.request<Project>('POST', base(), { key, body });

  it('creates a pending project with the spec field types and a default domain', async () => {
    const r = await create({ name: 'My Web App', port: 3000, replicas: 2, cpu: '1', ram: '0.25' });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({
      name: 'My Web App',
      slug: 'my-web-app',
      status: 'pending',
      port: 3000,
      replicas: 2,
      cpu: '1',
      ram: '0.25',
      default_domain: `my-web-app-${w.slug}.apps.test`,
      url: `http://my-web-app-${w.slug}.apps.test:8000`,
      git: null,
    });
    expect(typeof r.body.data?.created_at).toBe('string');
  });

  it('fills in the defaults of docs/decisions.md#projects', async () => {
    const r = await create({ name: 'defaults' });
    expect(r.body.data).toMatchObject({ port: 8080, replicas: 1, cpu: '0.5', ram: '0.5', status: 'pending' });
  });

  it('refuses a second project with the same slug (409), even from another name', async () => {
    await create({ name: 'Twin' });
    const r = await create({ name: 'twin!' });
    expect(r).toMatchObject({ status: 409, body: { success: false, error: 'A project with slug "twin" already exists in this workspace.' } });
  });

  it('allows the same project slug in two workspaces', async () => {
    const other = await makeWorkspace(s);
    await create({ name: 'shared-name' });
    const r = await s.request<Project>('POST', `/api/workspaces/${other.slug}/projects`, { key: other.member.key, body: { name: 'shared-name' } });
    expect(r.status).toBe(201);
    expect(r.body.data?.default_domain).toBe(`shared-name-${other.slug}.apps.test`);
  });

  it.each([
    [{ name: 'x', port: 0 }, '"port" must be at least 1.'],
    [{ name: 'x', port: 65536 }, '"port" must be at most 65535.'],
    [{ name: 'x', port: '80' }, '"port" must be an integer.'],
    [{ name: 'x', replicas: 11 }, '"replicas" must be at most 10.'],
    [{ name: 'x', replicas: 1.5 }, '"replicas" must be an integer.'],
    [{ name: 'x', cpu: 0.5 }, '"cpu" must be a string.'],
    [{ name: 'x', cpu: 'half' }, '"cpu" must be a decimal number in a string, like "0.5" (vCPU, 0.1 to 8).'],
    [{ name: 'x', cpu: '0.05' }, '"cpu" must be between "0.1" and "8" vCPU.'],
    [{ name: 'x', cpu: '9' }, '"cpu" must be between "0.1" and "8" vCPU.'],
    [{ name: 'x', ram: '0.1' }, '"ram" must be between "0.125" and "32" GiB.'],
    [{ name: 'x', ram: '-1' }, '"ram" must be a decimal number in a string, like "0.5" (GiB, 0.125 to 32).'],
    [{ name: '!!!' }, '"name" must contain at least one ASCII letter or digit.'],
    [{ name: 'n'.repeat(63) }, expect.stringMatching(/^"name" is too long: its slug "n+" must have at most \d+ characters in this workspace, to fit the default domain\.$/)],
    [{ port: 80 }, '"name" is required.'],
    [{ name: 'x', image: 'nginx' }, 'Unknown field "image".'],
  ])('rejects %j with 400', async (body, message) => {
    expect(await create(body)).toMatchObject({ status: 400, body: { success: false, error: message } });
  });

  it('lists, gets and updates a project; the slug stays when the name changes', async () => {
    const p = (await create({ name: 'editable' })).body.data;
    const list = await s.request<Project[]>('GET', base(), { key: w.member.key });
    expect(list.body.data?.map((x) => x.slug)).toContain('editable');
    const got = await s.request<Project>('GET', `${base()}/editable`, { key: w.member.key });
    expect(got.body.data).toEqual(p);
    const upd = await s.request<Project>('PUT', `${base()}/editable`, { key: w.member.key, body: { name: 'Renamed', replicas: 3, cpu: '2.50', ram: '1' } });
    expect(upd.status).toBe(200);
    expect(upd.body.data).toMatchObject({ name: 'Renamed', slug: 'editable', replicas: 3, cpu: '2.5', ram: '1', port: 8080 });
    expect((await s.request('PUT', `${base()}/editable`, { key: w.member.key, body: {} })).status).toBe(400);
    expect((await s.request('PUT', `${base()}/editable`, { key: w.member.key, body: { cpu: '100' } })).status).toBe(400);
    expect((await s.request('GET', `${base()}/nope`, { key: w.member.key })).body).toEqual({ success: false, error: 'Project was not found.' });
  });

  it('shows the status view of a project that never ran', async () => {
    await create({ name: 'status-view', replicas: 2, cpu: '0.25', ram: '0.5' });
    const r = await s.request('GET', `${base()}/status-view/status`, { key: w.member.key });
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      project: { slug: 'status-view', status: 'pending' },
      pods: { ready: 0, total: 0, items: [] },
      resources: { cpu: { used: '0m', limit: '500m' }, memory: { used: '0Mi', limit: '1Gi' } },
      latestDeployment: null,
    });
  });

  it('deletes a project with everything under it', async () => {
    const p = (await create({ name: 'doomed' })).body.data;
    await s.request('POST', `${base()}/doomed/git`, { key: w.member.key, body: { repo_full_name: 'acme/doomed' } });
    const r = await s.request<Project>('DELETE', `${base()}/doomed`, { key: w.member.key });
    expect(r.status).toBe(200);
    expect(r.body.data?.git).toMatchObject({ repo_full_name: 'acme/doomed' });
    expect((await s.request('GET', `${base()}/doomed`, { key: w.member.key })).status).toBe(404);
    const left = await s.store.db.selectFrom('git_connections').select('project_id').where('project_id', '=', p?.id ?? '').execute();
    expect(left).toEqual([]);
  });
});

describe.each(STORE_KINDS)('git connection on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const project = async (name: string) => s.request<Project>('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name } });
  const git = (name: string) => `/api/workspaces/${w.slug}/projects/${name}/git`;

  it('connects with defaults, shows the connection on the project, and refuses a second one', async () => {
    await project('connected');
    // (an installation must be linked to the workspace first: test/e2e/github-installations.test.ts)
    const r = await s.request('POST', git('connected'), { key: w.member.key, body: { repo_full_name: 'acme/web' } });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ repo_full_name: 'acme/web', branch: 'main', installation_id: 0, auto_deploy: true, dockerfile_path: 'Dockerfile', root_dir: '' });
    const p = await s.request<Project>('GET', `/api/workspaces/${w.slug}/projects/connected`, { key: w.member.key });
    // The webhook secret is in the create response only (issue 9 item 6); the project shows the rest.
    const { webhook_secret: secret, ...view } = r.body.data as Record<string, unknown>;
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(p.body.data?.git).toEqual(view);
    const again = await s.request('POST', git('connected'), { key: w.member.key, body: { repo_full_name: 'acme/other' } });
    expect(again.status).toBe(409);
  });

  it('updates and removes the connection', async () => {
    await project('movable');
    await s.request('POST', git('movable'), { key: w.member.key, body: { repo_full_name: 'acme/web', branch: 'develop', auto_deploy: false } });
    const upd = await s.request('PUT', git('movable'), { key: w.member.key, body: { branch: 'release/v2', root_dir: './services/api/', dockerfile_path: 'docker/Dockerfile.prod' } });
    expect(upd.status).toBe(200);
    expect(upd.body.data).toMatchObject({ repo_full_name: 'acme/web', branch: 'release/v2', root_dir: 'services/api', dockerfile_path: 'docker/Dockerfile.prod', auto_deploy: false });
    const del = await s.request('DELETE', git('movable'), { key: w.member.key });
    expect(del.status).toBe(200);
    expect((await s.request<Project>('GET', `/api/workspaces/${w.slug}/projects/movable`, { key: w.member.key })).body.data?.git).toBeNull();
    expect((await s.request('DELETE', git('movable'), { key: w.member.key })).status).toBe(404);
    expect((await s.request('PUT', git('movable'), { key: w.member.key, body: { branch: 'x' } })).status).toBe(404);
  });

  it.each([
    [{ repo_full_name: 'no-slash' }, '"repo_full_name" must be "owner/repository".'],
    [{ repo_full_name: 'a/b/c' }, '"repo_full_name" must be "owner/repository".'],
    [{ repo_full_name: '../etc' }, '"repo_full_name" must be "owner/repository".'],
    [{ repo_full_name: 'https://github.com/a/b' }, '"repo_full_name" must be "owner/repository".'],
    [{ repo_full_name: 'a/b', branch: 'bad..name' }, '"branch" must be a valid Git branch name.'],
    [{ repo_full_name: 'a/b', branch: '-x' }, '"branch" must be a valid Git branch name.'],
    [{ repo_full_name: 'a/b', dockerfile_path: '../Dockerfile' }, '"dockerfile_path" must be a relative path inside the repository, without "..".'],
    [{ repo_full_name: 'a/b', root_dir: '/abs' }, '"root_dir" must be a relative path inside the repository, without "..".'],
    [{ repo_full_name: 'a/b', installation_id: -1 }, '"installation_id" must be at least 0.'],
    [{ repo_full_name: 'a/b', auto_deploy: 'yes' }, '"auto_deploy" must be a boolean.'],
    [{ branch: 'main' }, '"repo_full_name" is required.'],
  ])('rejects %j with 400', async (body, message) => {
    await project('validated');
    expect(await s.request('POST', git('validated'), { key: w.member.key, body })).toMatchObject({ status: 400, body: { error: message } });
  });
});

describe.each(STORE_KINDS)('deployments list and wallet on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { startingCredit: 1234, currency: 'EUR' } });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  it('pages deployments newest first with page/limit defaults and bounds', async () => {
    const p = await s.request<Project>('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'paged' } });
    const path = `/api/workspaces/${w.slug}/projects/paged/deployments`;
    const empty = await s.request('GET', path, { key: w.member.key });
    expect(empty.body).toEqual({ success: true, data: { deployments: [], total: 0, page: 1, limit: 20 } });
    for (let i = 0; i < 23; i++) {
      await s.store.db
        .insertInto('deployments')
        .values({ id: `d-${i.toString().padStart(2, '0')}`, project_id: p.body.data?.id ?? '', status: 'running', source: 'git', image: null, branch: 'main', commit_sha: null, commit_message: null, error: null, created_at: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(), started_at: null, finished_at: null })
        .execute();
    }
    const first = await s.request<{ deployments: { id: string }[]; total: number; page: number; limit: number }>('GET', path, { key: w.member.key });
    expect(first.body.data?.total).toBe(23);
    expect(first.body.data?.deployments).toHaveLength(20);
    expect(first.body.data?.deployments[0]?.id).toBe('d-22');
    const last = await s.request<{ deployments: { id: string }[]; page: number; limit: number }>('GET', `${path}?page=3&limit=10`, { key: w.member.key });
    expect(last.body.data?.deployments.map((d) => d.id)).toEqual(['d-02', 'd-01', 'd-00']);
    expect([last.body.data?.page, last.body.data?.limit]).toEqual([3, 10]);
    const one = await s.request<{ id: string; status: string }>('GET', `${path}/d-05`, { key: w.member.key });
    expect(one.body.data).toMatchObject({ id: 'd-05', status: 'running', source: 'git', branch: 'main' });
    expect((await s.request('GET', `${path}/nope`, { key: w.member.key })).status).toBe(404);
  });

  it.each([
    // issue 9 item 9: one sentence for every bad query integer, naming its bounds
    ['limit=0', '"limit" must be a whole number from 1 to 50, written in decimal digits.'],
    ['limit=51', '"limit" must be a whole number from 1 to 50, written in decimal digits.'],
    ['limit=ten', '"limit" must be a whole number from 1 to 50, written in decimal digits.'],
    ['page=0', '"page" must be a whole number from 1 to 200000, written in decimal digits.'],
    ['page=1.5', '"page" must be a whole number from 1 to 200000, written in decimal digits.'],
    ['sort=asc', 'Unknown field "sort" in the query string.'],
  ])('rejects ?%s with 400', async (query, message) => {
    await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'q' } });
    const r = await s.request('GET', `/api/workspaces/${w.slug}/projects/q/deployments?${query}`, { key: w.member.key });
    expect(r).toMatchObject({ status: 400, body: { success: false, error: message } });
  });

  it('shows the starting credit in minor units and records it in the ledger', async () => {
    const r = await s.request('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key });
    expect(r.body).toEqual({ success: true, data: { balance: 1234, currency: 'EUR', alert_threshold: 0, unbilled: 0, available: 1234, state: 'active', suspends_at: null } });
    const created = await s.request<{ slug: string }>('POST', '/api/workspaces', { key: w.member.key, body: { name: 'fresh', slug: `fresh-${kind}` } });
    const fresh = await s.request('GET', `/api/workspaces/${created.body.data?.slug ?? ''}/wallet`, { key: w.member.key });
    expect(fresh.body.data).toMatchObject({ balance: 1234, currency: 'EUR' });
    const ledger = await s.store.db.selectFrom('wallet_transactions').selectAll().innerJoin('workspaces', 'workspaces.id', 'wallet_transactions.workspace_id').where('workspaces.slug', '=', `fresh-${kind}`).execute();
    expect(ledger.map((t) => [t.type, Number(t.amount_micros) / 10_000, Number(t.balance_after_micros) / 10_000])).toEqual([['adjustment', 1234, 1234]]);
    // once per user: the same user's second workspace starts empty, and so does one made again after deleting the first
    const second = await s.request<{ slug: string }>('POST', '/api/workspaces', { key: w.member.key, body: { name: 'second', slug: `second-${kind}` } });
    expect((await s.request('GET', `/api/workspaces/${second.body.data?.slug ?? ''}/wallet`, { key: w.member.key })).body.data).toMatchObject({ balance: 0, available: 0 });
    expect((await s.request('DELETE', `/api/workspaces/fresh-${kind}`, { key: w.member.key })).status).toBe(200);
    const third = await s.request<{ slug: string }>('POST', '/api/workspaces', { key: w.member.key, body: { name: 'third', slug: `third-${kind}` } });
    expect((await s.request('GET', `/api/workspaces/${third.body.data?.slug ?? ''}/wallet`, { key: w.member.key })).body.data).toMatchObject({ balance: 0 });
  });

  it('sets the alert threshold (owner/admin only, non-negative integer)', async () => {
    const path = `/api/workspaces/${w.slug}/wallet/alert-threshold`;
    const r = await s.request('PUT', path, { key: w.admin.key, body: { threshold: 500 } });
    expect(r.body).toEqual({ success: true, data: { threshold: 500 } });
    expect((await s.request<{ alert_threshold: number }>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key })).body.data?.alert_threshold).toBe(500);
    expect((await s.request('PUT', path, { key: w.member.key, body: { threshold: 1 } })).status).toBe(403);
    expect(await s.request('PUT', path, { key: w.owner.key, body: { threshold: -1 } })).toMatchObject({ status: 400, body: { error: '"threshold" must be at least 0.' } });
    expect(await s.request('PUT', path, { key: w.owner.key, body: { threshold: 2.5 } })).toMatchObject({ status: 400, body: { error: '"threshold" must be an integer.' } });
  });
});
