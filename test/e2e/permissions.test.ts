import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atLeast, type Role } from '../../src/domain/roles.js';
import { findOrCreateUser } from '../../src/modules/tenancy/users.js';
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
type Principal = 'owner' | 'admin' | 'member' | 'pending' | 'outsider' | 'nokey' | 'expired' | 'revoked';
/** `pending`: a user offered the owner role in the workspace (POST …/members) who has not accepted it: as good as an outsider. */
const PRINCIPALS: Principal[] = ['owner', 'admin', 'member', 'pending', 'outsider', 'nokey', 'expired', 'revoked'];

interface Fixture {
  w: TestWorkspace;
  /** a plain member other than the caller, to act upon */
  target: TestUser;
  targetKeyId: string;
  invitationId: string;
  /** a user who belongs to no workspace yet */
  loneUserId: string;
  /** a user (a member of another workspace, with their key) offered the owner role here, not yet accepted */
  pending: TestUser;
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
  /** the slug of a database of the workspace */
  databaseSlug: string;
  /** a (failed) backup of that database, straight in the store */
  backupId: string;
  /** a (failed) in-place restore of that database, straight in the store */
  restoreId: string;
  /** an S3 backup destination of the workspace (an endpoint that does not resolve) */
  destinationId: string;
  /** a template instance with a variable TPL_VAR, a custom domain and a running deployment */
  template: string;
  templateDomainId: string;
  templateDeploymentId: string;
}

interface Row {
  method: string;
  url: string;
  /** who may: a workspace role, any valid key, only the user a pending membership is offered to, or anyone */
  who: Role | 'authenticated' | 'invitee' | 'public';
  /** the status of an allowed call */
  ok: number;
  /** the status an outsider gets when `who` is 'authenticated' */
  path(f: Fixture): string;
  body?(f: Fixture): unknown;
  /**
   * For a row that deletes or replaces what it acts on: a target of its own, made for this case
   * only, so the principal's shared fixture stays whole for the rows after it.
   */
  fresh?(s: TestServer, f: Fixture): Promise<Partial<Fixture>>;
}

const ws = (f: { w: { slug: string } }) => `/api/workspaces/${f.w.slug}`;
let slugs = 0;
const proj = (f: Fixture) => `${ws(f)}/projects/${f.project.slug}`;
const tpl = (f: Fixture) => `${ws(f)}/templates/${f.template}`;

const TABLE: Row[] = [
  { method: 'GET', url: '/healthz', who: 'public', ok: 200, path: () => '/healthz' },
  { method: 'GET', url: '/readyz', who: 'public', ok: 200, path: () => '/readyz' },
  // Not on the API without --metrics-token (the operator's own listener serves it): 404 for everybody.
  { method: 'GET', url: '/metrics', who: 'public', ok: 404, path: () => '/metrics' },
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
  { method: 'DELETE', url: '/api/workspaces/:slug', who: 'owner', ok: 200, path: ws, fresh: spareWorkspace },

  { method: 'GET', url: '/api/workspaces/:slug/members', who: 'member', ok: 200, path: (f) => `${ws(f)}/members` },
  { method: 'POST', url: '/api/workspaces/:slug/members', who: 'admin', ok: 201, path: (f) => `${ws(f)}/members`, body: (f) => ({ user_id: f.loneUserId, role: 'member' }) },
  { method: 'PUT', url: '/api/workspaces/:slug/members/:user_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/members/${f.target.id}`, body: () => ({ role: 'admin' }), fresh: (s, f) => newMember(s, f.w) },
  { method: 'DELETE', url: '/api/workspaces/:slug/members/:user_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/members/${f.target.id}`, fresh: (s, f) => newMember(s, f.w) },
  // The user of a pending membership only, with their own key: a member of the workspace gets 403, anyone else 404.
  { method: 'POST', url: '/api/workspaces/:slug/members/:user_id/accept', who: 'invitee', ok: 200, path: (f) => `${ws(f)}/members/${f.pending.id}/accept`, fresh: (s, f) => newPending(s, f.w) },
  { method: 'POST', url: '/api/workspaces/:slug/members/:user_id/decline', who: 'invitee', ok: 200, path: (f) => `${ws(f)}/members/${f.pending.id}/decline`, fresh: (s, f) => newPending(s, f.w) },

  { method: 'POST', url: '/api/workspaces/:slug/invitations', who: 'admin', ok: 201, path: (f) => `${ws(f)}/invitations`, body: () => ({ email: 'new@example.com', role: 'member' }) },
  { method: 'GET', url: '/api/workspaces/:slug/invitations', who: 'admin', ok: 200, path: (f) => `${ws(f)}/invitations` },
  { method: 'DELETE', url: '/api/workspaces/:slug/invitations/:id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/invitations/${f.invitationId}`, fresh: (s, f) => newInvitation(s, f.w) },

  { method: 'POST', url: '/api/workspaces/:slug/api-keys', who: 'member', ok: 201, path: (f) => `${ws(f)}/api-keys`, body: () => ({ name: 'k', expires_in_days: 90 }) },
  { method: 'GET', url: '/api/workspaces/:slug/api-keys', who: 'member', ok: 200, path: (f) => `${ws(f)}/api-keys` },
  // Someone else's key: owners and admins only.
  { method: 'DELETE', url: '/api/workspaces/:slug/api-keys/:key_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/api-keys/${f.targetKeyId}`, fresh: (s, f) => newMember(s, f.w) },

  { method: 'POST', url: '/api/workspaces/:slug/projects', who: 'member', ok: 201, path: (f) => `${ws(f)}/projects`, body: () => ({ name: `p-${(slugs++).toString()}` }) },
  { method: 'POST', url: '/api/workspaces/:slug/github/installations/link', who: 'admin', ok: 201, path: (f) => `${ws(f)}/github/installations/link` },
  { method: 'GET', url: '/api/workspaces/:slug/github/installations', who: 'member', ok: 200, path: (f) => `${ws(f)}/github/installations` },
  { method: 'DELETE', url: '/api/workspaces/:slug/github/installations/:installation_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/github/installations/${String(f.installationId)}`, fresh: (s, f) => newInstallation(s, f.w) },

  { method: 'GET', url: '/api/workspaces/:slug/projects', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug', who: 'member', ok: 200, path: proj },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug', who: 'member', ok: 200, path: proj, body: () => ({ replicas: 2 }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug', who: 'member', ok: 200, path: proj, fresh: spareProject },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/status', who: 'member', ok: 200, path: (f) => `${proj(f)}/status` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/git', who: 'member', ok: 201, path: (f) => `${proj(f)}/git`, body: () => ({ repo_full_name: 'acme/web' }) },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/git', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/git`, body: () => ({ branch: 'next' }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug/git', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/git`, fresh: (s, f) => newConnected(s, f.w) },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/git/webhook-secret', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/git/webhook-secret` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/deployments', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments?page=1&limit=5` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}` },
  // Deploy actions, without an engine behind the API: they queue (202) or answer about the record.
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/deploy', who: 'member', ok: 202, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deploy` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/redeploy', who: 'member', ok: 409, path: (f) => `${proj(f)}/redeploy` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/restart', who: 'member', ok: 409, path: (f) => `${proj(f)}/restart` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id/rollback', who: 'member', ok: 409, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}/rollback` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id/stop', who: 'member', ok: 200, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}/stop`, fresh: (s, f) => newDeployment(s, f.connected) },
  // Over plain HTTP the stream route refuses like any other, and points allowed callers at the handshake.
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/deployments/:id/logs', who: 'member', ok: 400, path: (f) => `${ws(f)}/projects/${f.connected.slug}/deployments/${f.deploymentId}/logs` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/live-logs', who: 'member', ok: 400, path: (f) => `${proj(f)}/live-logs` },
  { method: 'GET', url: '/api/workspaces/:slug/wallet', who: 'member', ok: 200, path: (f) => `${ws(f)}/wallet` },
  { method: 'PUT', url: '/api/workspaces/:slug/wallet/alert-threshold', who: 'admin', ok: 200, path: (f) => `${ws(f)}/wallet/alert-threshold`, body: () => ({ threshold: 100 }) },
  { method: 'GET', url: '/api/workspaces/:slug/wallet/usage', who: 'member', ok: 200, path: (f) => `${ws(f)}/wallet/usage` },
  { method: 'GET', url: '/api/workspaces/:slug/wallet/transactions', who: 'admin', ok: 200, path: (f) => `${ws(f)}/wallet/transactions?page=1&limit=5` },
  { method: 'GET', url: '/api/workspaces/:slug/wallet/payments', who: 'admin', ok: 200, path: (f) => `${ws(f)}/wallet/payments` },
  // the sandbox gateway (no keys configured) confirms at once
  { method: 'POST', url: '/api/workspaces/:slug/wallet/topup/gatewaya', who: 'admin', ok: 200, path: (f) => `${ws(f)}/wallet/topup/gatewaya`, body: () => ({ amount: 10 }) },
  { method: 'POST', url: '/api/workspaces/:slug/wallet/topup/gatewayb', who: 'admin', ok: 200, path: (f) => `${ws(f)}/wallet/topup/gatewayb`, body: () => ({ amount: 1000 }) },
  // the sandbox takes no webhooks: any delivery is refused as unsigned
  { method: 'POST', url: '/api/webhooks/payments/:gateway', who: 'public', ok: 401, path: () => '/api/webhooks/payments/gatewaya', body: () => ({ id: 'evt_1', type: 'checkout.session.completed' }) },

  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/domains', who: 'member', ok: 200, path: (f) => `${proj(f)}/domains` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/domains', who: 'member', ok: 201, path: (f) => `${proj(f)}/domains`, body: () => ({ domain: `perm-${(slugs++).toString()}.example.com` }) },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/domains/:domain_id/verify', who: 'member', ok: 200, path: (f) => `${proj(f)}/domains/${f.domainId}/verify` },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug/domains/:domain_id', who: 'member', ok: 200, path: (f) => `${proj(f)}/domains/${f.domainId}`, fresh: (s, f) => newDomain(s, f.w, f.project) },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/uptime', who: 'member', ok: 200, path: (f) => `${proj(f)}/uptime` },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/uptime', who: 'member', ok: 200, path: (f) => `${proj(f)}/uptime`, body: () => ({ enabled: true }) },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/metrics', who: 'member', ok: 200, path: (f) => `${proj(f)}/metrics?period=24h` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/uptime/history', who: 'member', ok: 200, path: (f) => `${proj(f)}/uptime/history?period=7d` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/uptime/notifications', who: 'member', ok: 200, path: (f) => `${proj(f)}/uptime/notifications` },
  // the fixture's monitor has no channel to send a test to
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/uptime/test', who: 'member', ok: 400, path: (f) => `${proj(f)}/uptime/test` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/logs', who: 'member', ok: 200, path: (f) => `${proj(f)}/logs?limit=10` },
  // answers gzip, not the envelope, to the callers it allows
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/logs/download', who: 'member', ok: 200, path: (f) => `${proj(f)}/logs/download` },
  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/logs/usage', who: 'member', ok: 200, path: (f) => `${proj(f)}/logs/usage` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/logs/analyze', who: 'member', ok: 200, path: (f) => `${proj(f)}/logs/analyze`, body: () => ({ logs: 'Error: listen EADDRINUSE: address already in use :::8080' }) },

  // No engine behind the API: databases stay `provisioning` (the leader's worker makes their servers).
  { method: 'POST', url: '/api/workspaces/:slug/databases', who: 'member', ok: 202, path: (f) => `${ws(f)}/databases`, body: () => ({ name: `db-${(slugs++).toString()}`, type: 'redis' }) },
  { method: 'GET', url: '/api/workspaces/:slug/databases', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases` },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}` },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/logs', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/logs?limit=10` },
  { method: 'DELETE', url: '/api/workspaces/:slug/databases/:db_slug', who: 'member', ok: 202, path: (f) => `${ws(f)}/databases/${f.databaseSlug}`, fresh: (s, f) => newDatabase(s, f.w) },
  // Backups, without an engine: the database stays `provisioning`, so taking one is a 409; the fixture's backup failed, so its download is a 409.
  { method: 'POST', url: '/api/workspaces/:slug/databases/:db_slug/backups', who: 'member', ok: 409, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backups`, body: () => ({}) },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/backups', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backups` },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/backups/:backup_id', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backups/${f.backupId}` },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/backups/:backup_id/download', who: 'admin', ok: 409, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backups/${f.backupId}/download` },
  { method: 'POST', url: '/api/workspaces/:slug/databases/:db_slug/backups/:backup_id/verify', who: 'member', ok: 409, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backups/${f.backupId}/verify` },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/backup-policy', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backup-policy` },
  { method: 'PUT', url: '/api/workspaces/:slug/databases/:db_slug/backup-policy', who: 'admin', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backup-policy`, body: () => ({ schedule: '0 3 * * *', keep_count: 3 }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/databases/:db_slug/backup-policy', who: 'admin', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backup-policy` },
  // in-place restores: the fixture's backup failed, so restoring it is a 400 for those allowed
  { method: 'POST', url: '/api/workspaces/:slug/databases/:db_slug/restore', who: 'admin', ok: 400, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/restore`, body: (f) => ({ backup_id: f.backupId, confirm: f.databaseSlug }) },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/restores', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/restores` },
  { method: 'GET', url: '/api/workspaces/:slug/databases/:db_slug/restores/:restore_id', who: 'member', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/restores/${f.restoreId}` },
  // S3 destinations: owners and admins; the fixture's endpoint does not resolve, so its test answers 200 with ok false
  { method: 'GET', url: '/api/workspaces/:slug/backup-destinations', who: 'admin', ok: 200, path: (f) => `${ws(f)}/backup-destinations` },
  { method: 'POST', url: '/api/workspaces/:slug/backup-destinations', who: 'admin', ok: 201, path: (f) => `${ws(f)}/backup-destinations`, body: () => destinationBody() },
  { method: 'GET', url: '/api/workspaces/:slug/backup-destinations/:destination_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/backup-destinations/${f.destinationId}` },
  { method: 'PATCH', url: '/api/workspaces/:slug/backup-destinations/:destination_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/backup-destinations/${f.destinationId}`, body: () => ({ region: 'eu-west-1' }) },
  { method: 'POST', url: '/api/workspaces/:slug/backup-destinations/:destination_id/test', who: 'admin', ok: 200, path: (f) => `${ws(f)}/backup-destinations/${f.destinationId}/test` },
  { method: 'DELETE', url: '/api/workspaces/:slug/backup-destinations/:destination_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/backup-destinations/${f.destinationId}`, fresh: (s, f) => newDestination(s, f.w) },
  { method: 'DELETE', url: '/api/workspaces/:slug/databases/:db_slug/backups/:backup_id', who: 'admin', ok: 200, path: (f) => `${ws(f)}/databases/${f.databaseSlug}/backups/${f.backupId}`, fresh: (s, f) => newBackup(s, f.w, f.databaseSlug) },

  // Templates, without an engine: deploys queue (202); nothing runs for redeploy and rollback (409).
  { method: 'GET', url: '/api/workspaces/available-templates', who: 'authenticated', ok: 200, path: () => '/api/workspaces/available-templates' },
  { method: 'POST', url: '/api/workspaces/:slug/templates', who: 'member', ok: 201, path: (f) => `${ws(f)}/templates`, body: () => ({ name: `t-${(slugs++).toString()}`, template_name: 'hello-template' }) },
  { method: 'GET', url: '/api/workspaces/:slug/templates', who: 'member', ok: 200, path: (f) => `${ws(f)}/templates` },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug', who: 'member', ok: 200, path: tpl },
  { method: 'PUT', url: '/api/workspaces/:slug/templates/:template_slug', who: 'member', ok: 200, path: tpl, body: () => ({ port: 8081 }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/templates/:template_slug', who: 'member', ok: 200, path: tpl, fresh: (s, f) => newTemplate(s, f.w) },
  { method: 'POST', url: '/api/workspaces/:slug/templates/:template_slug/deploy', who: 'member', ok: 202, path: (f) => `${tpl(f)}/deploy`, body: () => ({ mode: 'image' }) },
  { method: 'POST', url: '/api/workspaces/:slug/templates/:template_slug/stop', who: 'member', ok: 200, path: (f) => `${tpl(f)}/stop`, fresh: (s, f) => newTemplate(s, f.w) },
  { method: 'POST', url: '/api/workspaces/:slug/templates/:template_slug/redeploy', who: 'member', ok: 202, path: (f) => `${tpl(f)}/redeploy` },
  { method: 'POST', url: '/api/workspaces/:slug/templates/:template_slug/deployments/:id/rollback', who: 'member', ok: 202, path: (f) => `${tpl(f)}/deployments/${f.templateDeploymentId}/rollback` },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug/envs', who: 'member', ok: 200, path: (f) => `${tpl(f)}/envs` },
  { method: 'POST', url: '/api/workspaces/:slug/templates/:template_slug/envs', who: 'member', ok: 200, path: (f) => `${tpl(f)}/envs`, body: () => [{ key: 'GREETING', value: 'hi' }] },
  { method: 'DELETE', url: '/api/workspaces/:slug/templates/:template_slug/envs/:key', who: 'member', ok: 200, path: (f) => `${tpl(f)}/envs/TPL_VAR`, fresh: (s, f) => newTemplate(s, f.w) },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug/domains', who: 'member', ok: 200, path: (f) => `${tpl(f)}/domains` },
  { method: 'POST', url: '/api/workspaces/:slug/templates/:template_slug/domains', who: 'member', ok: 201, path: (f) => `${tpl(f)}/domains`, body: () => ({ domain: `tperm-${(slugs++).toString()}.example.com` }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/templates/:template_slug/domains/:domain_id', who: 'member', ok: 200, path: (f) => `${tpl(f)}/domains/${f.templateDomainId}`, fresh: (s, f) => newTemplate(s, f.w) },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug/deployments', who: 'member', ok: 200, path: (f) => `${tpl(f)}/deployments?page=1&limit=5` },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug/deployments/:id', who: 'member', ok: 200, path: (f) => `${tpl(f)}/deployments/${f.templateDeploymentId}` },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug/deployments/:id/logs', who: 'member', ok: 400, path: (f) => `${tpl(f)}/deployments/${f.templateDeploymentId}/logs` },
  { method: 'GET', url: '/api/workspaces/:slug/templates/:template_slug/live-logs', who: 'member', ok: 400, path: (f) => `${tpl(f)}/live-logs` },

  { method: 'GET', url: '/api/workspaces/:slug/projects/:project_slug/env', who: 'member', ok: 200, path: (f) => `${proj(f)}/env` },
  { method: 'POST', url: '/api/workspaces/:slug/projects/:project_slug/env', who: 'member', ok: 201, path: (f) => `${proj(f)}/env`, body: () => ({ key: 'NEW_VAR', value: 'v', is_secret: true }) },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/env/bulk', who: 'member', ok: 200, path: (f) => `${proj(f)}/env/bulk`, body: () => ({ variables: { A: '1' }, merge: false }), fresh: spareProject },
  { method: 'PUT', url: '/api/workspaces/:slug/projects/:project_slug/env/:env_id', who: 'member', ok: 200, path: (f) => `${proj(f)}/env/${f.envId}`, body: () => ({ value: 'changed' }) },
  { method: 'DELETE', url: '/api/workspaces/:slug/projects/:project_slug/env/:env_id', who: 'member', ok: 200, path: (f) => `${proj(f)}/env/${f.envId}`, fresh: (s, f) => newEnv(s, f.w, f.project) },
];

function expected(row: Row, p: Principal): number {
  if (row.who === 'public') return row.ok;
  if (p === 'nokey' || p === 'expired' || p === 'revoked') return 401;
  if (row.who === 'authenticated') return row.ok;
  if (row.who === 'invitee') return p === 'pending' ? row.ok : p === 'outsider' ? 404 : 403;
  if (p === 'outsider' || p === 'pending') return 404;
  return atLeast(p, row.who) ? row.ok : 403;
}

/*
 * The targets a case may use up. Each principal's fixture holds one of each; a row that deletes
 * or replaces its target makes its own through `fresh` with the same builders.
 */
let spares = 0;
const spare = () => (spares++).toString();

/** A plain member of `w` with a key of their own, to act upon. */
async function newMember(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'target' | 'targetKeyId'>> {
  const target = await makeUser(s, w.id);
  await s.store.db.insertInto('members').values({ workspace_id: w.id, user_id: target.id, role: 'member', joined_at: new Date().toISOString() }).execute();
  return { target, targetKeyId: target.keyId };
}

/** A user with a workspace (and key) of their own, offered the owner role in `w` by its owner, not yet accepted. */
async function newPending(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'pending'>> {
  const home = await makeWorkspace(s);
  const offered = await s.request('POST', `${ws({ w })}/members`, { key: w.owner.key, body: { user_id: home.member.id, role: 'owner' } });
  if (offered.status !== 201) throw new Error(`offering a membership failed: ${offered.text}`);
  return { pending: home.member };
}

async function newInvitation(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'invitationId'>> {
  const inv = await s.request<{ id: string }>('POST', `${ws({ w })}/invitations`, { key: w.owner.key, body: { email: `inv-${w.slug}-${spare()}@example.com`, role: 'member' } });
  return { invitationId: inv.body.data?.id ?? '' };
}

async function newDomain(s: TestServer, w: TestWorkspace, project: TestProject): Promise<Pick<Fixture, 'domainId'>> {
  const domain = await s.request<{ id: string }>('POST', `${ws({ w })}/projects/${project.slug}/domains`, { key: w.owner.key, body: { domain: `fixture-${w.slug}-${spare()}.example.com` } });
  return { domainId: domain.body.data?.id ?? '' };
}

async function newEnv(s: TestServer, w: TestWorkspace, project: TestProject): Promise<Pick<Fixture, 'envId'>> {
  const env = await s.request<{ id: string }>('POST', `${ws({ w })}/projects/${project.slug}/env`, { key: w.owner.key, body: { key: `FIXTURE_${spare()}`, value: 'v' } });
  return { envId: env.body.data?.id ?? '' };
}

async function newDatabase(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'databaseSlug'>> {
  const db = await s.request<{ slug: string }>('POST', `${ws({ w })}/databases`, { key: w.owner.key, body: { name: `fixture ${spare()}`, type: 'postgresql' } });
  return { databaseSlug: db.body.data?.slug ?? '' };
}

const destinationBody = () => ({ name: `offsite ${spare()}`, endpoint: 'https://s3.invalid', bucket: 'perm-bucket', access_key_id: 'AKIAPERMISSIONS', secret_access_key: 'secret' });

async function newDestination(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'destinationId'>> {
  const d = await s.request<{ id: string }>('POST', `${ws({ w })}/backup-destinations`, { key: w.owner.key, body: destinationBody() });
  if (d.status !== 201) throw new Error(`creating a backup destination failed: ${d.text}`);
  return { destinationId: d.body.data?.id ?? '' };
}

/** A failed backup of the database `dbSlug` of `w`, straight in the store. */
async function newBackup(s: TestServer, w: TestWorkspace, dbSlug: string): Promise<Pick<Fixture, 'backupId' | 'restoreId'>> {
  const db = await s.store.repos.databases.bySlug(w.id, dbSlug);
  if (db === undefined) throw new Error(`no database ${dbSlug}`);
  const id = s.deps.ids.id();
  const now = new Date().toISOString();
  await s.store.repos.backups.insert({
    id, workspace_id: w.id, database_id: db.id, status: 'failed', trigger: 'manual', destination: 'local', object_key: `${w.id}/${db.id}/${id}.slwb`,
    size: null, checksum: null, manifest: null, started_at: now, finished_at: now, verified_at: null, restore_seconds: null, verify_status: null, verify_error: null, error: 'skipped: the database is provisioning.', requested_by: null, created_at: now,
  });
  const restoreId = s.deps.ids.id();
  await s.store.repos.backups.insertRestore({
    id: restoreId, workspace_id: w.id, database_id: db.id, backup_id: id, safety_backup_id: id, status: 'failed', step: null, result: null, error: 'The safety backup failed.', requested_by: null, created_at: now, started_at: null, finished_at: now,
  });
  return { backupId: id, restoreId };
}

/** A template instance of `w` with the variables its deploy needs, TPL_VAR, a custom domain and a running deployment (with an image). */
async function newTemplate(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'template' | 'templateDomainId' | 'templateDeploymentId'>> {
  const made = await s.request<{ slug: string; id: string }>('POST', `${ws({ w })}/templates`, { key: w.owner.key, body: { name: `tpl ${spare()}`, template_name: 'hello-template' } });
  const slug = made.body.data?.slug ?? '';
  await s.request('POST', `${ws({ w })}/templates/${slug}/envs`, { key: w.owner.key, body: [{ key: 'GREETING', value: 'hi' }, { key: 'TPL_VAR', value: 'v' }] });
  const domain = await s.request<{ id: string }>('POST', `${ws({ w })}/templates/${slug}/domains`, { key: w.owner.key, body: { domain: `tfixture-${w.slug}-${spare()}.example.com` } });
  const id = s.deps.ids.id();
  await s.store.db
    .insertInto('deployments')
    .values({ id, project_id: made.body.data?.id ?? '', status: 'running', source: 'template', image: 'slipway-test/tpl-hello:1.0', branch: null, commit_sha: null, commit_message: null, error: null, created_at: new Date().toISOString(), started_at: null, finished_at: null })
    .execute();
  return { template: slug, templateDomainId: domain.body.data?.id ?? '', templateDeploymentId: id };
}

/** A project of `w` with a Git connection. */
async function newConnected(s: TestServer, w: TestWorkspace): Promise<Pick<Fixture, 'connected' | 'webhookPath'>> {
  const connected = await makeProject(s, w);
  const git = await s.request<{ webhook_url: string }>('POST', `${ws({ w })}/projects/${connected.slug}/git`, { key: w.owner.key, body: { repo_full_name: 'acme/connected' } });
  return { connected, webhookPath: git.body.data?.webhook_url ?? '' };
}

/** A running deployment of `project`, straight in the store. */
async function newDeployment(s: TestServer, project: TestProject): Promise<Pick<Fixture, 'deploymentId'>> {
  const id = s.deps.ids.id();
  await s.store.db
    .insertInto('deployments')
    .values({ id, project_id: project.id, status: 'running', source: 'git', image: null, branch: 'main', commit_sha: null, commit_message: null, error: null, created_at: new Date().toISOString(), started_at: null, finished_at: null })
    .execute();
  return { deploymentId: id };
}

/** Links a GitHub App installation to `w`: the fixture's own, or a made-up one for a row to unlink. */
async function newInstallation(s: TestServer, w: TestWorkspace, installationId = LINKED_INSTALLATION + 1 + spares++): Promise<Pick<Fixture, 'installationId'>> {
  await s.store.db.insertInto('github_installations').values({ workspace_id: w.id, installation_id: installationId, account_login: 'acme', linked_by: w.admin.id, created_at: new Date().toISOString() }).execute();
  return { installationId };
}

/** A fresh project in place of `project`, for a row that deletes or rewrites it. */
async function spareProject(s: TestServer, f: Fixture): Promise<Partial<Fixture>> {
  return { project: await makeProject(s, f.w) };
}

/** A fresh workspace in place of `w`, with the same members in the same roles, for a row that deletes it. */
async function spareWorkspace(s: TestServer, f: Fixture): Promise<Partial<Fixture>> {
  const copy = await makeWorkspace(s);
  const members = await s.store.db.selectFrom('members').select(['user_id', 'role', 'status', 'joined_at']).where('workspace_id', '=', f.w.id).execute();
  await s.store.db.insertInto('members').values(members.map((m) => ({ ...m, workspace_id: copy.id }))).execute();
  return { w: { ...f.w, id: copy.id, slug: copy.slug } };
}

/** One principal's workspace with one of every target. */
async function fixture(s: TestServer): Promise<Fixture> {
  const w = await makeWorkspace(s);
  const lone = await findOrCreateUser(s.deps, s.store.repos, `lone-${w.slug}@example.com`);
  const project = await makeProject(s, w);
  const connected = await newConnected(s, w);
  return {
    w,
    loneUserId: lone.id,
    project,
    ...connected,
    ...(await newMember(s, w)),
    ...(await newPending(s, w)),
    ...(await newInvitation(s, w)),
    ...(await newDomain(s, w, project)),
    ...(await newEnv(s, w, project)),
    ...(await newDeployment(s, connected.connected)),
    ...(await newInstallation(s, w, LINKED_INSTALLATION)),
    ...(await (async () => {
      const db = await newDatabase(s, w);
      return { ...db, ...(await newBackup(s, w, db.databaseSlug)) };
    })()),
    ...(await newTemplate(s, w)),
    ...(await newDestination(s, w)),
  };
}

describe.each(STORE_KINDS)('permission matrix on %s', (kind) => {
  let s: TestServer;
  let fake: FakeGitHub;
  beforeAll(async () => {
    fake = await startFakeGitHub({ installations: [LINKED_INSTALLATION] });
    s = await startTestServer(kind, { githubWebhookSecret: 'permission-matrix', github: githubIntegration(fake), payments: 'sandbox' });
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

  async function keyOf(p: Principal, f: Fixture): Promise<string | undefined> {
    switch (p) {
      case 'owner':
      case 'admin':
      case 'member':
        return f.w[p].key;
      case 'pending':
        return f.pending.key;
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

  // One fixture per principal, built once: every row runs against it.
  describe.each(PRINCIPALS)('%s', (p) => {
    let shared: Fixture;
    let key: string | undefined;
    beforeAll(async () => {
      shared = await fixture(s);
      key = await keyOf(p, shared);
    });

    it.each(TABLE.map((row) => [`${row.method} ${row.url}`, row] as const))(`%s as ${p}`, async (_name, row) => {
      const f = row.fresh === undefined ? shared : { ...shared, ...(await row.fresh(s, shared)) };
      const body = row.body?.(f);
      // a row that uses up the pending membership offers a fresh one, to a user of its own
      const caller = p === 'pending' ? f.pending.key : key;
      const r = await s.request(row.method, row.path(f), { key: caller, ...(body === undefined ? {} : { body }) });
      expect(r.status, r.text).toBe(expected(row, p));
      if (row.url !== '/metrics' && row.url !== '/api/openapi.json') {
        expect(typeof r.body.success).toBe('boolean');
        if (r.status >= 400) expect(r.body.error).toEqual(expect.any(String));
      }
    });
  });
});
