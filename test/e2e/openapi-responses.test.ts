// Issue 27 item 4: the OpenAPI document describes the responses the API really sends. Every
// operation is called through the real API on a test server (no engine: the leader's work is not
// needed to answer), with at least one success where one can be had without the outside world and
// one refusal; each response is checked by a strict JSON Schema 2020-12 validator compiled from the
// document itself (test/factories/openapi.ts), as a client generated from it would read it.
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type TestDns } from '../factories/dns-server.js';
import { makeUser, makeWorkspace, startTestServer, type RequestOptions, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { operations, ResponseValidator, type OpenApiDocument } from '../factories/openapi.js';

const METRICS_TOKEN = 'metrics-token-for-the-openapi-test';
const APP_SECRET = 'github-app-secret-for-the-openapi-test';

/**
 * Operations with no 2xx in this test, and why: each is still called and its refusal checked.
 * The WebSocket streams succeed with 101 (a handshake, not an HTTP response a validator reads).
 */
const NO_SUCCESS_HERE: Record<string, string> = {
  streamProjectBuildLog: 'WebSocket (101)',
  streamTemplateBuildLog: 'WebSocket (101)',
  streamProjectLiveLogs: 'WebSocket (101)',
  streamTemplateLiveLogs: 'WebSocket (101)',
  startGitHubLink: 'needs a GitHub App (test/e2e/github-installations.test.ts)',
  unlinkGitHubInstallation: 'needs a linked installation (test/e2e/github-installations.test.ts)',
  completeGitHubSetup: 'needs a GitHub App (test/e2e/github-installations.test.ts)',
  receivePaymentWebhook: 'needs a real gateway (test/e2e/billing-gateways.test.ts); the sandbox takes no webhooks',
  redeployProject: 'needs a built image (the engine)',
  stopDeployment: 'needs a running deployment (the engine)',
  restartProject: 'needs a running deployment (the engine)',
  rollbackProject: 'needs a finished deployment (the engine)',
  redeployTemplate: 'needs a built image (the engine)',
  stopTemplate: 'needs a running deployment (the engine)',
  createBackup: 'needs a running database (the engine: test/e2e/backups-engine.test.ts)',
  downloadBackup: 'needs a succeeded backup (the engine: test/e2e/backups-engine.test.ts)',
  verifyBackup: 'needs a succeeded backup (the engine: test/e2e/backups-engine.test.ts)',
  restoreDatabase: 'needs a running database and a succeeded backup (the engine: test/e2e/backups-engine.test.ts)',
};

interface Seen {
  method: string;
  url: string;
  status: number;
  problems: string[];
}

describe('the OpenAPI document against real responses', () => {
  let s: TestServer;
  let dns: TestDns;
  let w: TestWorkspace;
  let doc: OpenApiDocument;
  let validator: ResponseValidator;
  const seen: Seen[] = [];

  beforeAll(async () => {
    dns = await startDnsServer();
    s = await startTestServer('sqlite', {
      metricsToken: METRICS_TOKEN,
      githubWebhookSecret: APP_SECRET,
      payments: 'sandbox',
      platform: { invitationTokenInResponse: true, domains: { verification: 'dns', dnsServers: [dns.server], publicAddresses: [], maxPerProject: 10 } },
    });
    w = await makeWorkspace(s);
    const r = await fetch(`${s.url}/api/openapi.json`);
    const text = await r.text();
    doc = JSON.parse(text) as OpenApiDocument;
    validator = new ResponseValidator(doc);
    seen.push({ method: 'GET', url: '/api/openapi.json', status: r.status, problems: validator.check('GET', '/api/openapi.json', r.status, r.headers.get('content-type'), text) });
  });
  afterAll(async () => {
    await s.close();
    await dns.close();
  });

  /** One real request, its response checked against the document. */
  const call = async <T = Record<string, unknown>>(method: string, url: string, o: RequestOptions = {}) => {
    const r = await s.request<T>(method, url, o);
    seen.push({ method, url, status: r.status, problems: validator.check(method, url, r.status, r.headers.get('content-type'), r.text) });
    return r;
  };
  const expectStatus = (r: { status: number; text: string }, status: number) => {
    expect(r.status, r.text).toBe(status);
  };

  it('calls every operation, with the key of the role it needs', async () => {
    const ws = `/api/workspaces/${w.slug}`;
    const owner = w.owner.key;
    const member = w.member.key;

    // system
    expectStatus(await call('GET', '/healthz'), 200);
    expectStatus(await call('GET', '/readyz'), 200);
    expectStatus(await call('GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }), 200);
    expectStatus(await call('GET', '/metrics', { headers: { authorization: 'Bearer wrong' } }), 401);

    // workspaces
    const made = await call<{ slug: string }>('POST', '/api/workspaces', { key: owner, body: { name: 'Spare', slug: `spare-${w.slug}` } });
    expectStatus(made, 201);
    expectStatus(await call('POST', '/api/workspaces', { key: owner, body: { name: 'Spare', slug: `spare-${w.slug}` } }), 409);
    expectStatus(await call('POST', '/api/workspaces', { key: owner, raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415);
    expectStatus(await call('POST', '/api/workspaces', { key: owner, raw: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }), headers: { 'content-type': 'application/json' } }), 413);
    expectStatus(await call('GET', '/api/workspaces', { key: owner }), 200);
    expectStatus(await call('GET', '/api/workspaces', { key: 'svc_sk_0000000000000000000000000000000000000000' }), 401);
    expectStatus(await call('GET', ws, { key: member }), 200);
    expectStatus(await call('GET', '/api/workspaces/no-such-workspace', { key: member }), 404);
    expectStatus(await call('PUT', `/api/workspaces/spare-${w.slug}`, { key: owner, body: { name: 'Spare 2' } }), 200);
    expectStatus(await call('PUT', ws, { key: member, body: { name: 'Mine' } }), 403);
    expectStatus(await call('DELETE', `/api/workspaces/spare-${w.slug}`, { key: owner }), 200);

    // members
    expectStatus(await call('GET', `${ws}/members`, { key: member }), 200);
    const outsider = await makeUser(s, w.id);
    const another = await makeUser(s, w.id);
    expectStatus(await call('POST', `${ws}/members`, { key: owner, body: { user_id: outsider.id, role: 'member' } }), 201);
    expectStatus(await call('POST', `${ws}/members`, { key: owner, body: { user_id: outsider.id, role: 'member' } }), 409);
    expectStatus(await call('POST', `${ws}/members/${outsider.id}/accept`, { key: outsider.key }), 200);
    expectStatus(await call('PUT', `${ws}/members/${outsider.id}`, { key: owner, body: { role: 'admin' } }), 200);
    expectStatus(await call('POST', `${ws}/members`, { key: owner, body: { user_id: another.id, role: 'member' } }), 201);
    expectStatus(await call('POST', `${ws}/members/${another.id}/decline`, { key: another.key }), 200);
    expectStatus(await call('DELETE', `${ws}/members/${outsider.id}`, { key: owner }), 200);

    // invitations
    const invited = await call<{ id: string; token?: string }>('POST', `${ws}/invitations`, { key: owner, body: { email: `new-${w.slug}@example.com`, role: 'member' } });
    expectStatus(invited, 201);
    expectStatus(await call('GET', `${ws}/invitations`, { key: owner }), 200);
    expectStatus(await call('POST', '/api/invitations/accept', { body: { token: invited.body.data?.token ?? '', name: 'New' } }), 201);
    const revoked = await call<{ id: string }>('POST', `${ws}/invitations`, { key: owner, body: { email: `gone-${w.slug}@example.com`, role: 'member' } });
    expectStatus(await call('DELETE', `${ws}/invitations/${revoked.body.data?.id ?? ''}`, { key: owner }), 200);
    expectStatus(await call('POST', '/api/invitations/accept', { body: { token: 'no-such-token' } }), 404);

    // API keys
    const key = await call<{ id: string }>('POST', `${ws}/api-keys`, { key: member, body: { name: 'ci' } });
    expectStatus(key, 201);
    expectStatus(await call('GET', `${ws}/api-keys`, { key: member }), 200);
    expectStatus(await call('DELETE', `${ws}/api-keys/${key.body.data?.id ?? ''}`, { key: member }), 200);

    // projects and Git
    const project = await call<{ slug: string }>('POST', `${ws}/projects`, { key: member, body: { name: 'Web' } });
    expectStatus(project, 201);
    const p = `${ws}/projects/${project.body.data?.slug ?? ''}`;
    expectStatus(await call('GET', `${ws}/projects`, { key: member }), 200);
    expectStatus(await call('GET', p, { key: member }), 200);
    expectStatus(await call('PUT', p, { key: member, body: { port: 3000 } }), 200);
    expectStatus(await call('PUT', p, { key: member, body: { port: 0 } }), 400);
    expectStatus(await call('GET', `${p}/status`, { key: member }), 200);
    expectStatus(await call('GET', `${p}/metrics?period=24h`, { key: member }), 200);
    const git = await call<{ webhook_url: string; webhook_secret: string }>('POST', `${p}/git`, { key: member, body: { repo_full_name: 'acme/web' } });
    expectStatus(git, 201);
    expectStatus(await call('POST', `${p}/git`, { key: member, body: { repo_full_name: 'acme/web' } }), 409);
    expectStatus(await call('PUT', `${p}/git`, { key: member, body: { branch: 'main' } }), 200);
    const rotated = await call<{ webhook_url: string; webhook_secret: string }>('POST', `${p}/git/webhook-secret`, { key: member });
    expectStatus(rotated, 200);

    // webhooks
    const ping = Buffer.from(JSON.stringify({ zen: 'Design for failure.', hook_id: 1 }));
    const signed = (secret: string) => ({
      'content-type': 'application/json',
      'x-github-event': 'ping',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(ping).digest('hex')}`,
    });
    expectStatus(await call('POST', rotated.body.data?.webhook_url ?? '', { raw: ping, headers: signed(rotated.body.data?.webhook_secret ?? '') }), 200);
    expectStatus(await call('POST', rotated.body.data?.webhook_url ?? '', { raw: ping, headers: signed('wrong') }), 401);
    expectStatus(await call('POST', '/api/webhooks/github', { raw: ping, headers: signed(APP_SECRET) }), 200);
    expectStatus(await call('POST', '/api/webhooks/github', { raw: 'x', headers: { ...signed(APP_SECRET), 'content-type': 'text/plain' } }), 415);
    expect((await call('POST', '/api/webhooks/payments/gatewaya', { raw: '{}', headers: { 'content-type': 'application/json' } })).status).toBeGreaterThanOrEqual(400);

    // deployments
    const deployed = await call<{ id: string }>('POST', `${p}/deploy`, { key: member, body: {} });
    expectStatus(deployed, 202);
    const d = deployed.body.data?.id ?? '';
    expectStatus(await call('POST', `${p}/deploy`, { key: member, body: { commit_sha: 'abc' } }), 400);
    expectStatus(await call('GET', `${p}/deployments?limit=5`, { key: member }), 200);
    expectStatus(await call('GET', `${p}/deployments/${d}`, { key: member }), 200);
    expectStatus(await call('GET', `${p}/deployments/${d}/logs`, { key: member }), 400);
    expectStatus(await call('GET', `${p}/live-logs`, { key: member }), 400);
    expect((await call('POST', `${p}/redeploy`, { key: member })).status).toBe(409);
    expect((await call('POST', `${p}/deployments/${d}/rollback`, { key: member })).status).toBe(409);
    expectStatus(await call('POST', `${p}/deployments/${d}/stop`, { key: member }), 409);
    expectStatus(await call('POST', `${p}/restart`, { key: member }), 409);
    expectStatus(await call('DELETE', `${p}/git`, { key: member }), 200);

    // wallet
    expectStatus(await call('GET', `${ws}/wallet`, { key: member }), 200);
    expectStatus(await call('GET', `${ws}/wallet/usage`, { key: member }), 200);
    expectStatus(await call('GET', `${ws}/wallet/transactions`, { key: owner }), 200);
    expectStatus(await call('GET', `${ws}/wallet/transactions`, { key: member }), 403);
    expectStatus(await call('GET', `${ws}/wallet/payments`, { key: owner }), 200);
    expectStatus(await call('POST', `${ws}/wallet/topup/gatewaya`, { key: owner, body: { amount: 10 } }), 200);
    expectStatus(await call('POST', `${ws}/wallet/topup/gatewayb`, { key: owner, body: { amount: 1000 } }), 200);
    expectStatus(await call('PUT', `${ws}/wallet/alert-threshold`, { key: owner, body: { threshold: 5 } }), 200);

    // environment variables
    const env = await call<{ id: string }>('POST', `${p}/env`, { key: member, body: { key: 'GREETING', value: 'hi', is_secret: true } });
    expectStatus(env, 201);
    expectStatus(await call('GET', `${p}/env`, { key: member }), 200);
    expectStatus(await call('PUT', `${p}/env/bulk`, { key: member, body: { variables: { COLOR: 'blue' } } }), 200);
    expectStatus(await call('PUT', `${p}/env/${env.body.data?.id ?? ''}`, { key: member, body: { value: 'hello' } }), 200);
    expectStatus(await call('DELETE', `${p}/env/${env.body.data?.id ?? ''}`, { key: member }), 200);

    // domains
    const name = `shop-${w.slug}.example.com`;
    const domain = await call<{ id: string; verification: { value: string } | null }>('POST', `${p}/domains`, { key: member, body: { domain: name } });
    expectStatus(domain, 201);
    dns.setTxt(`_slipway-challenge.${name}`, [domain.body.data?.verification?.value ?? '']);
    expectStatus(await call('GET', `${p}/domains`, { key: member }), 200);
    expectStatus(await call('POST', `${p}/domains/${domain.body.data?.id ?? ''}/verify`, { key: member }), 200);
    expectStatus(await call('DELETE', `${p}/domains/${domain.body.data?.id ?? ''}`, { key: member }), 200);

    // uptime
    expectStatus(await call('GET', `${p}/uptime`, { key: member }), 200);
    expectStatus(await call('PUT', `${p}/uptime`, { key: member, body: { enabled: true, check_interval_sec: 60, notify_email: 'oncall@example.com' } }), 200);
    expectStatus(await call('GET', `${p}/uptime/history?period=7d`, { key: member }), 200);
    expectStatus(await call('GET', `${p}/uptime/notifications`, { key: member }), 200);
    expectStatus(await call('POST', `${p}/uptime/test`, { key: member }), 200);

    // logs
    const projectId = (await s.store.db.selectFrom('projects').select('id').where('slug', '=', project.body.data?.slug ?? '').executeTakeFirstOrThrow()).id;
    await s.logStore.append({ lines: [{ projectId, workspaceId: w.id, deploymentId: d, pod: 'web-1', stream: 'stderr', timestamp: Date.now(), message: 'Error: connect ECONNREFUSED 127.0.0.1:5432' }] });
    expectStatus(await call('GET', `${p}/logs?limit=10`, { key: member }), 200);
    expectStatus(await call('GET', `${p}/logs/download`, { key: member }), 200);
    expectStatus(await call('GET', `${p}/logs/usage`, { key: member }), 200);
    expectStatus(await call('POST', `${p}/logs/analyze`, { key: member, body: { logs: 'Error: connect ECONNREFUSED 127.0.0.1:5432\n' } }), 200);

    // databases
    const db = await call<{ slug: string }>('POST', `${ws}/databases`, { key: member, body: { name: 'Main', type: 'postgresql' } });
    expectStatus(db, 202);
    expectStatus(await call('POST', `${ws}/databases`, { key: member, body: { name: 'Other', type: 'oracle' } }), 400);
    expectStatus(await call('GET', `${ws}/databases`, { key: member }), 200);
    expectStatus(await call('GET', `${ws}/databases/${db.body.data?.slug ?? ''}`, { key: member }), 200);
    expectStatus(await call('GET', `${ws}/databases/${db.body.data?.slug ?? ''}/logs`, { key: member }), 200);
    // backups: without an engine the database stays provisioning (409); a failed backup straight in the store for the rest
    const dbs = `${ws}/databases/${db.body.data?.slug ?? ''}`;
    expectStatus(await call('POST', `${dbs}/backups`, { key: member, body: {} }), 409);
    const dbRow = await s.store.repos.databases.bySlug(w.id, db.body.data?.slug ?? '');
    const backupId = s.deps.ids.id();
    const at = new Date().toISOString();
    await s.store.repos.backups.insert({
      id: backupId, workspace_id: w.id, database_id: dbRow?.id ?? '', status: 'failed', trigger: 'manual', destination: 'local', object_key: `${w.id}/${dbRow?.id ?? ''}/${backupId}.slwb`,
      size: null, checksum: null, manifest: null, started_at: at, finished_at: at, verified_at: null, restore_seconds: null, verify_status: null, verify_error: null, error: 'skipped: the database is provisioning.', requested_by: null, created_at: at,
    });
    expectStatus(await call('GET', `${dbs}/backups`, { key: member }), 200);
    expectStatus(await call('GET', `${dbs}/backups/${backupId}`, { key: member }), 200);
    expectStatus(await call('GET', `${dbs}/backups/${backupId}/download`, { key: w.owner.key }), 409);
    expectStatus(await call('POST', `${dbs}/backups/${backupId}/verify`, { key: member }), 409);
    expectStatus(await call('POST', `${dbs}/restore`, { key: w.owner.key, body: { backup_id: backupId, confirm: 'not-it' } }), 400);
    const restoreId = s.deps.ids.id();
    await s.store.repos.backups.insertRestore({ id: restoreId, workspace_id: w.id, database_id: dbRow?.id ?? '', backup_id: backupId, safety_backup_id: backupId, status: 'failed', step: null, result: null, error: 'The safety backup failed.', requested_by: null, created_at: at, started_at: null, finished_at: at });
    expectStatus(await call('GET', `${dbs}/restores`, { key: member }), 200);
    expectStatus(await call('GET', `${dbs}/restores/${restoreId}`, { key: member }), 200);
    expectStatus(await call('GET', `${dbs}/backup-policy`, { key: member }), 200);
    expectStatus(await call('PUT', `${dbs}/backup-policy`, { key: w.owner.key, body: { schedule: '*/5 * * * *' } }), 400);
    expectStatus(await call('PUT', `${dbs}/backup-policy`, { key: w.owner.key, body: { schedule: '0 3 * * *', timezone: 'Europe/Paris', keep_count: 3, keep_days: 30, verify: 'after-each' } }), 200);
    expectStatus(await call('GET', `${dbs}/backup-policy`, { key: member }), 200);
    expectStatus(await call('DELETE', `${dbs}/backup-policy`, { key: w.owner.key }), 200);
    // S3 destinations: the address guard (400), a second of one name (409), in use (409), the test action
    const dest = `${ws}/backup-destinations`;
    const offsite = { name: 'Offsite', endpoint: 'https://s3.invalid', bucket: 'contract-bucket', access_key_id: 'AKIACONTRACT', secret_access_key: 'secret' };
    expectStatus(await call('POST', dest, { key: w.owner.key, body: { ...offsite, endpoint: 'http://127.0.0.1:9000' } }), 400);
    const destMade = await call<{ id: string }>('POST', dest, { key: w.owner.key, body: offsite });
    expectStatus(destMade, 201);
    const dd = `${dest}/${destMade.body.data?.id ?? ''}`;
    expectStatus(await call('POST', dest, { key: w.owner.key, body: offsite }), 409);
    expectStatus(await call('GET', dest, { key: w.owner.key }), 200);
    expectStatus(await call('GET', dd, { key: w.owner.key }), 200);
    expectStatus(await call('PATCH', dd, { key: w.owner.key, body: { prefix: 'contract' } }), 200);
    expectStatus(await call('POST', `${dd}/test`, { key: w.owner.key }), 200);
    expectStatus(await call('PUT', `${dbs}/backup-policy`, { key: w.owner.key, body: { schedule: '0 3 * * *', destination_id: destMade.body.data?.id ?? '' } }), 200);
    expectStatus(await call('DELETE', dd, { key: w.owner.key }), 409);
    expectStatus(await call('DELETE', `${dbs}/backup-policy`, { key: w.owner.key }), 200);
    expectStatus(await call('DELETE', dd, { key: w.owner.key }), 200);
    expectStatus(await call('DELETE', `${dbs}/backups/${backupId}`, { key: w.owner.key }), 200);
    expectStatus(await call('DELETE', `${ws}/databases/${db.body.data?.slug ?? ''}`, { key: member }), 202);

    // templates
    expectStatus(await call('GET', '/api/workspaces/available-templates', { key: member }), 200);
    const instance = await call<{ slug: string }>('POST', `${ws}/templates`, { key: member, body: { name: 'Site', template_name: 'hello-template' } });
    expectStatus(instance, 201);
    const t = `${ws}/templates/${instance.body.data?.slug ?? ''}`;
    expectStatus(await call('GET', `${ws}/templates`, { key: member }), 200);
    expectStatus(await call('GET', t, { key: member }), 200);
    expectStatus(await call('PUT', t, { key: member, body: { port: 8081 } }), 200);
    expectStatus(await call('GET', `${t}/envs`, { key: member }), 200);
    expectStatus(await call('POST', `${t}/envs`, { key: member, body: [{ key: 'GREETING', value: 'hello' }, { key: 'EXTRA', value: '1' }] }), 200);
    expectStatus(await call('DELETE', `${t}/envs/EXTRA`, { key: member }), 200);
    const tdomain = await call<{ id: string }>('POST', `${t}/domains`, { key: member, body: { domain: `site-${w.slug}.example.com` } });
    expectStatus(tdomain, 201);
    expectStatus(await call('GET', `${t}/domains`, { key: member }), 200);
    expectStatus(await call('DELETE', `${t}/domains/${tdomain.body.data?.id ?? ''}`, { key: member }), 200);
    const tdeployed = await call<{ id: string }>('POST', `${t}/deploy`, { key: member, body: { mode: 'image' } });
    expectStatus(tdeployed, 202);
    const td = tdeployed.body.data?.id ?? '';
    expectStatus(await call('GET', `${t}/deployments`, { key: member }), 200);
    expectStatus(await call('GET', `${t}/deployments/${td}`, { key: member }), 200);
    expectStatus(await call('GET', `${t}/deployments/${td}/logs`, { key: member }), 400);
    expectStatus(await call('GET', `${t}/live-logs`, { key: member }), 400);
    expect((await call('POST', `${t}/redeploy`, { key: member })).status).toBe(409);
    expectStatus(await call('POST', `${t}/deployments/${td}/rollback`, { key: member }), 202);
    expectStatus(await call('POST', `${t}/stop`, { key: member }), 409);
    expectStatus(await call('DELETE', t, { key: member }), 200);

    // GitHub App installations (no App configured here)
    expectStatus(await call('GET', `${ws}/github/installations`, { key: member }), 200);
    expect((await call('POST', `${ws}/github/installations/link`, { key: owner })).status).toBe(503);
    expect((await call('DELETE', `${ws}/github/installations/1`, { key: owner })).status).toBe(404);
    expect((await call('GET', '/api/github/setup?installation_id=1&state=x')).status).toBeGreaterThanOrEqual(400);

    expectStatus(await call('DELETE', p, { key: member }), 200);
  });

  it('describes every response it gave: status, content type and body', () => {
    expect(seen.flatMap((x) => x.problems)).toEqual([]);
  });

  it('was reached in every operation, with a success wherever one can be had here', () => {
    const reached = new Map<string, number[]>();
    for (const x of seen) {
      const found = validator.operation(x.method, x.url);
      if (found === undefined) continue;
      const id = found.op.operationId ?? `${x.method.toLowerCase()} ${found.path}`;
      reached.set(id, [...(reached.get(id) ?? []), x.status]);
    }
    const all = operations(doc).map(({ method, path, op }) => op.operationId ?? `${method} ${path}`);
    expect(all.filter((id) => !reached.has(id))).toEqual([]);
    const noSuccess = all.filter((id) => !(reached.get(id) ?? []).some((status) => status >= 200 && status < 300));
    expect(noSuccess.sort()).toEqual(Object.keys(NO_SUCCESS_HERE).sort());
  });
});
