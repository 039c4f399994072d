import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kysely } from 'kysely';
import type { LogStore } from '../../src/domain/logs.js';
import type { DB } from '../../src/store/schema.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

/**
 * A member of workspace A, guessing every slug and id of workspace B, on every workspace route
 * the app registers: always 404, and B is left exactly as it was.
 */
interface Ids {
  slug: string;
  project_slug: string;
  env_id: string;
  domain_id: string;
  id: string;
  key_id: string;
  user_id: string;
  installation_id: string;
  db_slug: string;
  backup_id: string;
  destination_id: string;
  restore_id: string;
  template_slug: string;
  key: string;
}

/** Valid bodies, so that a request is refused for what it addresses, not for its shape. */
const BODIES: Record<string, unknown> = {
  'POST /api/workspaces/:slug/members': { user_id: 'someone', role: 'member' },
  'PUT /api/workspaces/:slug/members/:user_id': { role: 'member' },
  // take no body: listed so that the walk below is known to cover them
  'POST /api/workspaces/:slug/members/:user_id/accept': undefined,
  'POST /api/workspaces/:slug/members/:user_id/decline': undefined,
  'POST /api/workspaces/:slug/invitations': { email: 'guess@example.com', role: 'member' },
  'POST /api/workspaces/:slug/api-keys': { name: 'guess' },
  'PUT /api/workspaces/:slug': { name: 'hijacked' },
  'POST /api/workspaces/:slug/projects': { name: 'intruder' },
  'PUT /api/workspaces/:slug/projects/:project_slug': { replicas: 3 },
  'POST /api/workspaces/:slug/projects/:project_slug/git': { repo_full_name: 'evil/repo' },
  'PUT /api/workspaces/:slug/projects/:project_slug/git': { branch: 'evil' },
  // takes no body: listed so that the walk below is known to cover it
  'POST /api/workspaces/:slug/projects/:project_slug/git/webhook-secret': undefined,
  // take no body: listed so that the walk below is known to cover them
  'POST /api/workspaces/:slug/github/installations/link': undefined,
  'DELETE /api/workspaces/:slug/github/installations/:installation_id': undefined,
  'POST /api/workspaces/:slug/projects/:project_slug/env': { key: 'EVIL', value: 'x' },
  'PUT /api/workspaces/:slug/projects/:project_slug/env/bulk': { variables: { EVIL: 'x' }, merge: false },
  'PUT /api/workspaces/:slug/projects/:project_slug/env/:env_id': { value: 'evil' },
  'POST /api/workspaces/:slug/projects/:project_slug/domains': { domain: 'evil.example.org' },
  // takes no body: listed so that the walk below is known to cover it
  'POST /api/workspaces/:slug/projects/:project_slug/domains/:domain_id/verify': undefined,
  'PUT /api/workspaces/:slug/projects/:project_slug/uptime': { enabled: true },
  // takes no body: listed so that the walk below is known to cover it
  'POST /api/workspaces/:slug/projects/:project_slug/uptime/test': undefined,
  'PUT /api/workspaces/:slug/wallet/alert-threshold': { threshold: 1 },
  'POST /api/workspaces/:slug/wallet/topup/gatewaya': { amount: 10 },
  'POST /api/workspaces/:slug/wallet/topup/gatewayb': { amount: 1000 },
  'POST /api/workspaces/:slug/databases': { name: 'intruder', type: 'redis' },
  'POST /api/workspaces/:slug/databases/:db_slug/backups': {},
  'PUT /api/workspaces/:slug/databases/:db_slug/backup-policy': { schedule: '0 3 * * *' },
  // takes no body: listed so that the walk below is known to cover it
  'POST /api/workspaces/:slug/databases/:db_slug/backups/:backup_id/verify': undefined,
  'POST /api/workspaces/:slug/databases/:db_slug/restore': { backup_id: 'guess', confirm: 'guess' },
  'POST /api/workspaces/:slug/backup-destinations': { name: 'intruder', endpoint: 'https://s3.invalid', bucket: 'evil-bucket', access_key_id: 'x', secret_access_key: 'y' },
  'PATCH /api/workspaces/:slug/backup-destinations/:destination_id': { bucket: 'evil-bucket' },
  // takes no body: listed so that the walk below is known to cover it
  'POST /api/workspaces/:slug/backup-destinations/:destination_id/test': undefined,
  'POST /api/workspaces/:slug/templates': { name: 'intruder', template_name: 'hello-template' },
  'PUT /api/workspaces/:slug/templates/:template_slug': { port: 9999 },
  'POST /api/workspaces/:slug/templates/:template_slug/deploy': { mode: 'image' },
  'POST /api/workspaces/:slug/templates/:template_slug/envs': [{ key: 'EVIL', value: 'x' }],
  'POST /api/workspaces/:slug/templates/:template_slug/domains': { domain: 'evil-tpl.example.org' },
};

async function snapshot(db: Kysely<DB>, workspaceId: string, logs: LogStore): Promise<unknown> {
  const projects = await db.selectFrom('projects').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute();
  const ids = projects.map((p) => p.id);
  const logsOf = async (id: string) => ({ usage: await logs.usage(id), entries: (await logs.query(id, { limit: 1000 })).entries });
  const inProjects = async (table: 'env_vars' | 'domains' | 'git_connections' | 'deployments' | 'uptime_monitors' | 'uptime_notifications') =>
    ids.length === 0 ? [] : db.selectFrom(table).selectAll().where('project_id', 'in', ids).execute();
  return {
    workspace: await db.selectFrom('workspaces').selectAll().where('id', '=', workspaceId).execute(),
    members: await db.selectFrom('members').selectAll().where('workspace_id', '=', workspaceId).orderBy('user_id').execute(),
    invitations: await db.selectFrom('invitations').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    keys: await db.selectFrom('api_keys').select(['id', 'revoked_at', 'expires_at']).where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    wallet: await db.selectFrom('wallets').selectAll().where('workspace_id', '=', workspaceId).execute(),
    ledger: await db.selectFrom('wallet_transactions').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    payments: await db.selectFrom('payments').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    projects,
    env: await inProjects('env_vars'),
    domains: await inProjects('domains'),
    git: await inProjects('git_connections'),
    deployments: await inProjects('deployments'),
    uptime: await inProjects('uptime_monitors'),
    notifications: await inProjects('uptime_notifications'),
    github: await db.selectFrom('github_installations').selectAll().where('workspace_id', '=', workspaceId).execute(),
    databases: await db.selectFrom('databases').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    backups: await db.selectFrom('backups').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    backupPolicies: await db.selectFrom('backup_policies').selectAll().where('workspace_id', '=', workspaceId).orderBy('database_id').execute(),
    restores: await db.selectFrom('restores').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    backupDestinations: await db.selectFrom('backup_destinations').selectAll().where('workspace_id', '=', workspaceId).orderBy('id').execute(),
    logs: await Promise.all(ids.map(logsOf)),
  };
}

const B_INSTALLATION = 5_000_000_123;

describe.each(STORE_KINDS)('workspace isolation on %s', (kind) => {
  let s: TestServer;
  let a: TestWorkspace;
  let b: TestWorkspace;
  let bIds: Ids;
  let aProject: string;

  beforeAll(async () => {
    // the sandbox on: the top-up routes must still refuse the other tenant's wallet
    s = await startTestServer(kind, { payments: 'sandbox' });
    a = await makeWorkspace(s);
    b = await makeWorkspace(s);
    const key = b.owner.key;
    const bp = `/api/workspaces/${b.slug}/projects`;
    // Both workspaces have a project named "shared": B's child ids are then tried under A's own project.
    await s.request('POST', `/api/workspaces/${a.slug}/projects`, { key: a.owner.key, body: { name: 'shared' } });
    aProject = 'shared';
    const project = await s.request<{ id: string; slug: string }>('POST', bp, { key, body: { name: 'shared' } });
    await s.request('POST', `${bp}/shared/git`, { key, body: { repo_full_name: 'b/repo' } });
    const env = await s.request<{ id: string }>('POST', `${bp}/shared/env`, { key, body: { key: 'SECRET', value: 'b-only', is_secret: true } });
    const domain = await s.request<{ id: string }>('POST', `${bp}/shared/domains`, { key, body: { domain: 'b.example.com' } });
    await s.request('PUT', `${bp}/shared/uptime`, { key, body: { enabled: true, chat_webhook_url: 'https://hooks.example.com/b' } });
    const deploymentId = s.deps.ids.id();
    await s.store.db
      .insertInto('deployments')
      .values({ id: deploymentId, project_id: project.body.data?.id ?? '', status: 'running', source: 'git', image: 'b:1', branch: 'main', commit_sha: null, commit_message: null, error: null, created_at: new Date().toISOString(), started_at: null, finished_at: null })
      .execute();
    // B's app has written logs: no log route of A's may show or remove them
    const projectId = project.body.data?.id ?? '';
    await s.logStore.append({ lines: [{ projectId, workspaceId: b.id, deploymentId, pod: 'web-1', stream: 'stdout', timestamp: Date.now(), message: 'b-only log line' }] });
    // B has linked a GitHub App installation (A knows its id)
    await s.store.db.insertInto('github_installations').values({ workspace_id: b.id, installation_id: B_INSTALLATION, account_login: 'bigcorp', linked_by: b.admin.id, created_at: new Date().toISOString() }).execute();
    const inv = await s.request<{ id: string }>('POST', `/api/workspaces/${b.slug}/invitations`, { key, body: { email: 'b-invite@example.com', role: 'member' } });
    const database = await s.request<{ slug: string }>('POST', `/api/workspaces/${b.slug}/databases`, { key, body: { name: 'b orders', type: 'postgresql' } });
    expect(database.status).toBe(202);
    // A has a database of the same name: B's backup id is tried under A's own database too
    await s.request('POST', `/api/workspaces/${a.slug}/databases`, { key: a.owner.key, body: { name: 'b orders', type: 'postgresql' } });
    // B's database has a backup (succeeded, as far as the record says)
    const bDb = await s.store.repos.databases.bySlug(b.id, database.body.data?.slug ?? '');
    const backupId = s.deps.ids.id();
    const at = new Date().toISOString();
    await s.store.repos.backups.insert({
      id: backupId, workspace_id: b.id, database_id: bDb?.id ?? '', status: 'succeeded', trigger: 'manual', destination: 'local', object_key: `${b.id}/${bDb?.id ?? ''}/${backupId}.slwb`,
      size: 10, checksum: '0'.repeat(64), manifest: null, started_at: at, finished_at: at, verified_at: null, restore_seconds: null, verify_status: null, verify_error: null, error: null, requested_by: null, created_at: at,
    });
    // and an in-place restore of it
    const restoreId = s.deps.ids.id();
    await s.store.repos.backups.insertRestore({ id: restoreId, workspace_id: b.id, database_id: bDb?.id ?? '', backup_id: backupId, safety_backup_id: backupId, status: 'succeeded', step: null, result: 'b-only result', error: null, requested_by: null, created_at: at, started_at: at, finished_at: at });
    // B has an S3 backup destination (its keys b-only)
    const destination = await s.request<{ id: string }>('POST', `/api/workspaces/${b.slug}/backup-destinations`, { key, body: { name: 'b offsite', endpoint: 'https://s3.invalid', bucket: 'b-bucket', access_key_id: 'b-only-access', secret_access_key: 'b-only-secret' } });
    expect(destination.status, destination.text).toBe(201);
    // both have a template instance named "tshared"; B's has a variable, a domain and a running deployment
    await s.request('POST', `/api/workspaces/${a.slug}/templates`, { key: a.owner.key, body: { name: 'tshared', template_name: 'hello-template' } });
    const tpl = await s.request<{ id: string }>('POST', `/api/workspaces/${b.slug}/templates`, { key, body: { name: 'tshared', template_name: 'hello-postgres' } });
    expect(tpl.status).toBe(201);
    await s.request('POST', `/api/workspaces/${b.slug}/templates/tshared/envs`, { key, body: [{ key: 'B_ONLY', value: 'b-only', is_secret: true }] });
    await s.request('POST', `/api/workspaces/${b.slug}/templates/tshared/domains`, { key, body: { domain: 'b-tpl.example.com' } });
    await s.store.db
      .insertInto('deployments')
      .values({ id: s.deps.ids.id(), project_id: tpl.body.data?.id ?? '', status: 'running', source: 'template', image: 'b:tpl', branch: null, commit_sha: null, commit_message: null, error: null, created_at: new Date().toISOString(), started_at: null, finished_at: null })
      .execute();
    bIds = {
      slug: b.slug,
      project_slug: 'shared',
      env_id: env.body.data?.id ?? '',
      domain_id: domain.body.data?.id ?? '',
      id: `${deploymentId}|${inv.body.data?.id ?? ''}`,
      key_id: b.member.keyId,
      user_id: b.member.id,
      installation_id: String(B_INSTALLATION),
      db_slug: database.body.data?.slug ?? '',
      backup_id: backupId,
      destination_id: destination.body.data?.id ?? '',
      restore_id: restoreId,
      template_slug: 'tshared',
      key: 'B_ONLY',
    };
  });
  afterAll(async () => s.close());

  const workspaceRoutes = () => s.app.routeTable.filter((r) => r.method !== 'HEAD' && r.url.startsWith('/api/workspaces/:slug'));

  function fill(url: string, ids: Ids, idChoice: number): string {
    return url.replace(/:([a-z_]+)/g, (_m, name: string) => {
      const value = ids[name as keyof Ids];
      return name === 'id' ? (value.split('|')[idChoice] ?? value) : value;
    });
  }

  it('answers 404 to a member of A for every route addressed at B, and changes nothing in B', async () => {
    const before = await snapshot(s.store.db, b.id, s.logStore);
    const routes = workspaceRoutes();
    expect(routes.length).toBeGreaterThan(20);
    for (const route of routes) {
      const body = BODIES[`${route.method} ${route.url}`];
      for (const idChoice of [0, 1]) {
        for (const caller of [a.owner, a.member]) {
          const r = await s.request(route.method, fill(route.url, bIds, idChoice), { key: caller.key, ...(body === undefined ? {} : { body }) });
          expect(r.status, `${route.method} ${route.url}: ${r.text}`).toBe(404);
          expect(r.text).not.toContain('b-only');
        }
      }
    }
    expect(await snapshot(s.store.db, b.id, s.logStore)).toEqual(before);
  });

  it('answers 404 to a user offered a membership of B who has not accepted it, on every route of B, and changes nothing in B', async () => {
    // B's owner offers A's admin the owner role; until A's admin accepts, it grants nothing
    const offered = await s.request('POST', `/api/workspaces/${b.slug}/members`, { key: b.owner.key, body: { user_id: a.admin.id, role: 'owner' } });
    expect(offered.status).toBe(201);
    try {
      const before = await snapshot(s.store.db, b.id, s.logStore);
      for (const route of workspaceRoutes()) {
        const body = BODIES[`${route.method} ${route.url}`];
        for (const idChoice of [0, 1]) {
          const r = await s.request(route.method, fill(route.url, bIds, idChoice), { key: a.admin.key, ...(body === undefined ? {} : { body }) });
          expect(r.status, `${route.method} ${route.url}: ${r.text}`).toBe(404);
          expect(r.text).not.toContain('b-only');
        }
      }
      expect(await snapshot(s.store.db, b.id, s.logStore)).toEqual(before);
    } finally {
      const declined = await s.request('POST', `/api/workspaces/${b.slug}/members/${a.admin.id}/decline`, { key: a.admin.key });
      expect(declined.status).toBe(200);
    }
  });

  it("answers 404 for B's ids used under A's own workspace and project", async () => {
    const before = await snapshot(s.store.db, b.id, s.logStore);
    const withChildId = workspaceRoutes().filter((r) => /:(env_id|domain_id|id|key_id|user_id|installation_id|key|backup_id|destination_id|restore_id)\b/.test(r.url));
    expect(withChildId.length).toBeGreaterThanOrEqual(6);
    const mixed: Ids = { ...bIds, slug: a.slug, project_slug: aProject, template_slug: 'tshared' };
    for (const route of withChildId) {
      const body = BODIES[`${route.method} ${route.url}`];
      for (const idChoice of [0, 1]) {
        const r = await s.request(route.method, fill(route.url, mixed, idChoice), { key: a.owner.key, ...(body === undefined ? {} : { body }) });
        expect(r.status, `${route.method} ${route.url}: ${r.text}`).toBe(404);
      }
    }
    expect(await snapshot(s.store.db, b.id, s.logStore)).toEqual(before);
  });

  it("refuses B's backup destination in A's own backups and policies, and never opens B's keys", async () => {
    const before = await snapshot(s.store.db, b.id, s.logStore);
    const dbs = `/api/workspaces/${a.slug}/databases`;
    const aDb = (await s.request<{ slug: string }[]>('GET', dbs, { key: a.owner.key })).body.data?.[0]?.slug ?? '';
    for (const [method, path, body] of [
      ['POST', `${dbs}/${aDb}/backups`, { destination_id: bIds.destination_id }],
      ['PUT', `${dbs}/${aDb}/backup-policy`, { schedule: '0 3 * * *', destination_id: bIds.destination_id }],
    ] as const) {
      const r = await s.request(method, path, { key: a.owner.key, body });
      expect(r.status, r.text).toBe(400);
      expect(r.body.error).toMatch(/names no backup destination of this workspace/);
    }
    const listed = await s.request('GET', `/api/workspaces/${a.slug}/backup-destinations`, { key: a.owner.key });
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain('b-only');
    expect(listed.text).not.toContain(bIds.destination_id);
    expect(await snapshot(s.store.db, b.id, s.logStore)).toEqual(before);
  });
});
