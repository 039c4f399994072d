import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atLeast, type Role } from '../../src/domain/roles.js';
import { findOrCreateUser } from '../../src/tenancy/users.js';
import { makeProject, makeUser, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestUser, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { startFakeGitHub, type FakeGitHub } from '../factories/fake-github.js';
import { githubIntegration } from '../factories/github-link.js';

/** The GitHub App installation each fixture's workspace has linked. */
const LINKED_INSTALLATION = 777;

/**
 * Every route × every kind of caller → the expected status, from this one table. A route that
 * the app registers but this table lacks fails the suite, so no route ships without its row.
 */
type Principal = 'owner' | 'admin' | 'member' | 'outsider' | 'nokey' | 'expired' | 'revoked';
const PRINCIPALS: Principal[] = ['owner', 'admin', 'member', 'outsider', 'nokey', 'expired', 'revoked'];

interface Fixture {
  w: TestWorkspace;
  /** a plain member other than the caller, to act upon */
  target: TestUser;
  targetKeyId: string;
  invitationId: string;
  /** a user who belongs to no workspace yet */
  loneUserId: string;
  project: TestProject;
  /** a custom domain of `project` */
  domainId: string;
  /** an environment variable of `project` */
  envId: string;
  /** a project with a Git connection and one deployment */
  connected: TestProject;
  deploymentId: string;
  /** the path of `connected`'s webhook_url */
  webhookPath: string;
  /** a GitHub App installation linked to the workspace */
  installationId: number;
}

interface Row {
  method: string;
  url: string;
  /** who may: a workspace role, any valid key, or anyone */
  who: Role | 'authenticated' | 'public';
  /** the status of an allowed call */
  ok: number;
  /** the status an outsider gets when `who` is 'authenticated' */
  path(f: Fixture): string;
  body?(f: Fixture): unknown;
}

const ws = (f: Fixture) => `/api/workspaces/${f.w.slug}`;
let slugs = 0;
const proj = (f: Fixture) => `${ws(f)}/projects/${f.project.slug}`;

const TABLE: Row[] = [
  { method: 'GET', url: '/healthz', who: 'public', ok: 200, path: () => '/healthz' },
  { method: 'GET', url: '/readyz', who: 'public', ok: 200, path: () => '/readyz' },
  { method: 'GET', url: '/metrics', who: 'public', ok: 200, path: () => '/metrics' },
  { method: 'GET', url: '/api/openapi.json', who: 'public', ok: 200, path: () => '/api/openapi.json' },
  // An unknown token is 404 for everybody: the route itself needs no key.
  { method: 'POST', url: '/api/invitations/accept', who: 'public', ok: 404, path: () => '/api/invitations/accept', body: () => ({ token: `svc_inv_${'1'.repeat(40)}` }) },
  // Signed by GitHub, not keyed: without X-Hub-Signature-256 it is 401 for everybody, an API key changes nothing.
  { method: 'POST', url: '/api/webhooks/github', who: 'public', ok: 401, path: () => '/api/webhooks/github' },
  // A Git connection's own webhook URL: signed with that connection's secret, never keyed.
  { method: 'POST', url: '/api/webhooks/github/:webhook_id', who: 'public', ok: 401, path: (f) => f.webhookPath },

  // GitHub's redirect after an installation: the signed state, not a key, says who asked; without one it is 400 for everybody.
  { method: 'GET', url: '/api/github/setup', who: 'public', ok: 400, path: () => '/api/github/setup?installation_id=1&setup_action=install' },

  { method: 'POST', url: '/api/workspaces', who: 'authenticated', ok: 201, path: () => '/api/workspaces', body: () => ({ name: 'n', slug: `perm-${(slugs++).toString()}` }) },
  { method: 'GET', url: '/api/workspaces', who: 'authenticated', ok: 200, path: () => '/api/workspaces' },
  { method: 'GET', url: '/api/workspaces/:slug', who: 'member', ok: 200, path: ws },
  { method: 'PUT', url: '/api/workspaces/:slug', who: 'owner', ok: 200, path: ws, body: () => ({ name: 'renamed' }) },
  { method: 'DELETE', url: '/api/workspaces/:slug', who: 'owner', ok: 200, path: ws },

  { method: 'GET', url: '/api/workspaces/:slug/members', who: 'member', ok: 200, path: (f) => `${ws(f)}/members` },
  { method: 'POST', url: '/api/workspaces/:slug/members', who: 'admin', ok: 201, path: (f) => `${ws(f)}/members`, body: (f) => ({ user_id: f.loneUserId, role: 'member' }) },
  { method: 'PUT', url: '/api/workspaces/:slug/members/:user_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/members/${f.target.id}`, body: () => ({ role: 'admin' }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/members/:user_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/members/${f.target.id}` },

  { method: 'POST', url: '/api/workspaces/:slug/invitations', who: 'admin', ok: 201, path: (f) => `${ws(f)}/invitations`, body: () => ({ email: 'new@example.com', role: 'member' }) },
  { method: 'GET', url: '/api/workspaces/:slug/invitations', who: 'admin', ok: 200, path: (f) => `${ws(f)}/invitations` },
  { method: 'DELETE', url: '/api/workspaces/:slug/invitations/:id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/invitations/${f.invitationId}` },

  { method: 'POST', url: '/api/workspaces/:slug/api-keys', who: 'member', ok: 201, path: (f) => `${ws(f)}/api-keys`, body: () => ({ name: 'k', expires_in_days: 90 }) },
  { method: 'GET', url: '/api/workspaces/:slug/api-keys', who: 'member', ok: 200, path: (f) => `${ws(f)}/api-keys` },
  // Someone else's key: owners and admins only.
  { method: 'DELETE', url: '/api/workspaces/:slug/api-keys/:key_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/api-keys/${f.targetKeyId}` },

  { method: 'POST', url: '/api/workspaces/:slug/projects', who: 'member', ok: 201, path: (f) => `${ws(f)}/projects`, body: () => ({ name: `p-${(slugs++).toString()}` }) },
  { method: 'POST', url: '/api/workspaces/:slug/github/installations/link', who: 'admin', ok: 201, path: (f) => `${ws(f)}/github/installations/link` },
  { method: 'GET', url: '/api/workspaces/:slug/github/installations', who: 'member', ok: 200, path: (f) => `${ws(f)}/github/installations` },
  { method: 'DELETE', url: '/api/workspaces/:slug/github/installations/:installation_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/github/installations/${String(f.installationId)}` },

  { method: 'GET', url: '/api/workspaces/:slug/projects', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug', who: 'member', ok: 200, path: proj },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug', who: 'member', ok: 200, path: proj, body: () => ({ replicas: 2 }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug', who: 'member', ok: 200, path: proj },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/status', who: 'member', ok: 200, path: (f) => `${proj(f)}/status` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/git', who: 'member', ok: 201, path: (f) => `${proj(f)}/git`, body: () => ({ repo_full_name: 'acme/web' }) },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/git', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/git`, body: () => ({ branch: 'next' }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug/git', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/git` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/git/webhook-secret', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/git/webhook-secret` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/deployments', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments?page=1&limit=5` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}` },
  // Deploy actions, without an engine behind the API: they queue (202) or answer about the record.
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/deploy', who: 'member', ok: 202, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deploy` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/redeploy', who: 'member', ok: 409, path: (f) => `${proj(f)}/redeploy` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/restart', who: 'member', ok: 409, path: (f) => `${proj(f)}/restart` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id/rollback', who: 'member', ok: 409, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}/rollback` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id/stop', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}/stop` },
  // Over plain HTTP the stream route refuses like any other, and points allowed callers at the handshake.
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id/logs', who: 'member', ok: 400, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}/logs` },
  { method: 'GET', url: '/api/workspaces/:slug/wallet', who: 'member', ok: 200, path: (f) => `${ws(f)}/wallet` },
  { method: 'PUT', url: '/api/workspaces/:slug/wallet/alert-threshold', who: 'admin', ok: 200, path: (f) => `${ws(f)}/wallet/alert-threshold`, body: () => ({ threshold: 100 }) },

  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/domains', who: 'member', ok: 200, path: (f) => `${proj(f)}/domains` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/domains', who: 'member', ok: 201, path: (f) => `${proj(f)}/domains`, body: () => ({ domain: `perm-${(slugs++).toString()}.example.com` }) },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/domains/:domain_id/verify', who: 'member', ok: 200, path: (f) => `${proj(f)}/domains/${f.domainId}/verify` },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug/domains/:domain_id', who: 'member', ok: 200, path: (f) => `${proj(f)}/domains/${f.domainId}` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/uptime', who: 'member', ok: 200, path: (f) => `${proj(f)}/uptime` },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/uptime', who: 'member', ok: 200, path: (f) => `${proj(f)}/uptime`, body: () => ({ enabled: true }) },

  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/env', who: 'member', ok: 200, path: (f) => `${proj(f)}/env` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/env', who: 'member', ok: 201, path: (f) => `${proj(f)}/env`, body: () => ({ key: 'NEW_VAR', value: 'v', is_secret: true }) },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/env/bulk', who: 'member', ok: 200, path: (f) => `${proj(f)}/env/bulk`, body: () => ({ variables: { A: '1' }, merge: false }) },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/env/:env_id', who: 'member', ok: 200, path: (f) => `${proj(f)}/env/${f.envId}`, body: () => ({ value: 'changed' }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug/env/:env_id', who: 'member', ok: 200, path: (f) => `${proj(f)}/env/${f.envId}` },
];

function expected(row: Row, p: Principal): number {
  if (row.who === 'public') return row.ok;
  if (p === 'nokey' || p === 'expired' || p === 'revoked') return 401;
  if (row.who === 'authenticated') return row.ok;
  if (p === 'outsider') return 404;
  return atLeast(p, row.who) ? row.ok : 403;
}

describe.each(STORE_KINDS)('permission matrix on %s', (kind) => {
  let s: TestServer;
  let fake: FakeGitHub;
  beforeAll(async () => {
    fake = await startFakeGitHub({ installations: [LINKED_INSTALLATION] });
    s = await startTestServer(kind, { githubWebhookSecret: 'permission-matrix', github: githubIntegration(fake) });
  });
  afterAll(async () => {
    await s.close();
    await fake.close();
  });

  it('has a row for every registered route', () => {
    const registered = s.app.routeTable.filter((r) => r.method !== 'HEAD').map((r) => `${r.method} ${r.url}`).sort();
    const listed = TABLE.map((r) => `${r.method} ${r.url}`).sort();
    expect(listed).toEqual(registered);
  });

  async function fixture(): Promise<Fixture> {
    const w = await makeWorkspace(s);
    const target = await makeUser(s, w.id);
    await s.store.db.insertInto('members').values({ workspace_id: w.id, user_id: target.id, role: 'member', joined_at: new Date().toISOString() }).execute();
    const inv = await s.request<{ id: string }>('POST', `${ws({ w } as Fixture)}/invitations`, {
      key: w.owner.key,
      body: { email: `inv-${w.slug}@example.com`, role: 'member' },
    });
    const lone = await findOrCreateUser(s.deps, s.store.db, `lone-${w.slug}@example.com`);
    const project = await makeProject(s, w);
    const domain = await s.request<{ id: string }>('POST', `${ws({ w } as Fixture)}/projects/${project.slug}/domains`, {
      key: w.owner.key,
      body: { domain: `fixture-${w.slug}.example.com` },
    });
    const env = await s.request<{ id: string }>('POST', `${ws({ w } as Fixture)}/projects/${project.slug}/env`, {
      key: w.owner.key,
      body: { key: 'FIXTURE', value: 'v' },
    });
    const connected = await makeProject(s, w);
    const git = await s.request<{ webhook_url: string }>('POST', `${ws({ w } as Fixture)}/projects/${connected.slug}/git`, { key: w.owner.key, body: { repo_full_name: 'acme/connected' } });
    await s.store.db.insertInto('github_installations').values({ workspace_id: w.id, installation_id: LINKED_INSTALLATION, account_login: 'acme', linked_by: w.admin.id, created_at: new Date().toISOString() }).execute();
    const deploymentId = s.deps.ids.id();
    await s.store.db
      .insertInto('deployments')
      .values({ id: deploymentId, project_id: connected.id, status: 'running', source: 'git', image: null, branch: 'main', commit_sha: null, commit_message: null, error: null, created_at: new Date().toISOString(), started_at: null, finished_at: null })
      .execute();
    return {
      w,
      target,
      targetKeyId: target.keyId,
      invitationId: inv.body.data?.id ?? '',
      loneUserId: lone.id,
      project,
      domainId: domain.body.data?.id ?? '',
      envId: env.body.data?.id ?? '',
      connected,
      deploymentId,
      webhookPath: git.body.data?.webhook_url ?? '',
      installationId: LINKED_INSTALLATION,
    };
  }

  async function keyOf(p: Principal, f: Fixture): Promise<string | undefined> {
    switch (p) {
      case 'owner':
      case 'admin':
      case 'member':
        return f.w[p].key;
      case 'outsider':
        return (await makeWorkspace(s)).owner.key;
      case 'nokey':
        return undefined;
      case 'expired': {
        const u = await makeUser(s, f.w.id);
        await s.store.db.updateTable('api_keys').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', u.keyId).execute();
        await s.store.db.insertInto('members').values({ workspace_id: f.w.id, user_id: u.id, role: 'owner', joined_at: new Date().toISOString() }).execute();
        return u.key;
      }
      case 'revoked': {
        const u = await makeUser(s, f.w.id);
        await s.store.db.insertInto('members').values({ workspace_id: f.w.id, user_id: u.id, role: 'owner', joined_at: new Date().toISOString() }).execute();
        await s.request('DELETE', `/api/workspaces/${f.w.slug}/api-keys/${u.keyId}`, { key: u.key });
        return u.key;
      }
    }
  }

  const cases = TABLE.flatMap((row) => PRINCIPALS.map((p) => [`${row.method} ${row.url}`, p, row] as const));

  it.each(cases)('%s as %s', async (_name, p, row) => {
    const f = await fixture();
    const key = await keyOf(p, f);
    const body = row.body?.(f);
    const r = await s.request(row.method, row.path(f), { key, ...(body === undefined ? {} : { body }) });
    expect(r.status, r.text).toBe(expected(row, p));
    if (row.url !== '/metrics' && row.url !== '/api/openapi.json') {
      expect(typeof r.body.success).toBe('boolean');
      if (r.status >= 400) expect(r.body.error).toEqual(expect.any(String));
    }
  });
});
