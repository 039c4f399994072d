import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sign } from '../../src/webhooks/github.js';
import { makeProject, makeWorkspace, startTestServer, type Reply, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import type { DeploymentView as Deployment } from '../../src/projects/views.js';

const SECRET = 'whsec-slipway-test-0123456789';
const HOOK = '/api/webhooks/github';

interface Result {
  event: string;
  ignored?: true;
  reason?: string;
  repo_full_name?: string;
  branch?: string;
  deployments?: string[];
}

interface Delivery {
  /** default: signed with SECRET; a string is sent as the header; null sends none */
  signature?: string | null;
  secret?: string;
  delivery?: string;
  contentType?: string;
  /** the body as sent; default: the payload as JSON */
  raw?: Buffer;
}

let repos = 0;
const repo = () => `acme/web-${Date.now().toString(36)}-${(repos++).toString()}`;
const sha = () => randomBytes(20).toString('hex');

const pushPayload = (repoFullName: string, ref: string, extra: Record<string, unknown> = {}) => {
  const after = sha();
  return {
    ref,
    before: sha(),
    after,
    created: false,
    deleted: false,
    forced: false,
    repository: { id: 1, name: repoFullName.split('/')[1], full_name: repoFullName, private: false },
    pusher: { name: 'octocat', email: 'octocat@example.com' },
    head_commit: { id: after, message: 'Make the button blue', timestamp: new Date().toISOString() },
    commits: [],
    ...extra,
  };
};

async function deliver(s: TestServer, event: string | null, payload: unknown, o: Delivery = {}): Promise<Reply<Result>> {
  const body = o.raw ?? Buffer.from(JSON.stringify(payload));
  const headers: Record<string, string> = {
    'content-type': o.contentType ?? 'application/json',
    'x-github-delivery': o.delivery ?? randomUUID(),
    'user-agent': 'GitHub-Hookshot/test',
  };
  if (event !== null) headers['x-github-event'] = event;
  const signature = o.signature === undefined ? sign(o.secret ?? SECRET, body) : o.signature;
  if (signature !== null) headers['x-hub-signature-256'] = signature;
  return s.request<Result>('POST', HOOK, { raw: body, headers });
}

describe.each(STORE_KINDS)('GitHub webhooks on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { githubWebhookSecret: SECRET });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  async function connected(repoFullName: string, git: { branch?: string; auto_deploy?: boolean } = {}, ws: TestWorkspace = w): Promise<TestProject> {
    const p = await makeProject(s, ws);
    const r = await s.request('POST', `/api/workspaces/${ws.slug}/projects/${p.slug}/git`, { key: ws.owner.key, body: { repo_full_name: repoFullName, ...git } });
    expect(r.status, r.text).toBe(201);
    return p;
  }

  async function deploymentsOf(p: TestProject, ws: TestWorkspace = w): Promise<Deployment[]> {
    const r = await s.request<{ deployments: Deployment[] }>('GET', `/api/workspaces/${ws.slug}/projects/${p.slug}/deployments?limit=50`, { key: ws.member.key });
    expect(r.status, r.text).toBe(200);
    return r.body.data?.deployments ?? [];
  }

  it('answers a signed ping', async () => {
    const r = await deliver(s, 'ping', { zen: 'Design for failure.', hook_id: 1 });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ success: true, data: { event: 'ping' } });
  });

  it('refuses a missing, foreign, malformed or stale signature with 401, and deploys nothing', async () => {
    const name = repo();
    const p = await connected(name);
    const payload = pushPayload(name, 'refs/heads/main');
    const body = Buffer.from(JSON.stringify(payload));
    const sha1 = `sha1=${createHmac('sha1', SECRET).update(body).digest('hex')}`;
    const cases: [string, Delivery, string][] = [
      ['missing', { signature: null }, 'The X-Hub-Signature-256 header is missing; give the GitHub webhook the same secret as --github-webhook-secret.'],
      ['another secret', { secret: 'not-the-secret' }, 'The X-Hub-Signature-256 signature does not match the body; check that the GitHub webhook secret equals --github-webhook-secret.'],
      ['sha1 prefix', { signature: sha1 }, 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.'],
      ['no prefix', { signature: sign(SECRET, body).slice('sha256='.length) }, 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.'],
      ['sha1 prefix on a sha256 digest', { signature: sign(SECRET, body).replace('sha256=', 'sha1=') }, 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.'],
      ['signature of another body', { signature: sign(SECRET, JSON.stringify({ ...payload, ref: 'refs/heads/other' })) }, 'The X-Hub-Signature-256 signature does not match the body; check that the GitHub webhook secret equals --github-webhook-secret.'],
    ];
    for (const [what, o, message] of cases) {
      const r = await deliver(s, 'push', payload, { raw: body, ...o });
      expect(r.status, what).toBe(401);
      expect(r.body, what).toEqual({ success: false, error: message });
    }
    // An API key is no substitute for the signature.
    const keyed = await s.request('POST', HOOK, { key: w.owner.key, body: payload, headers: { 'x-github-event': 'push' } });
    expect(keyed.status).toBe(401);
    expect(await deploymentsOf(p)).toEqual([]);
    // The same body, signed: now it deploys.
    expect((await deliver(s, 'push', payload, { raw: body })).status).toBe(202);
    expect(await deploymentsOf(p)).toHaveLength(1);
  });

  it('queues exactly one deployment per project connected to the pushed repo and branch with auto_deploy on', async () => {
    const name = repo();
    const other = await makeWorkspace(s);
    const a = await connected(name);
    const b = await connected(name, { branch: 'main', auto_deploy: true });
    const c = await connected(name, {}, other);
    const payload = pushPayload(name, 'refs/heads/main');
    const r = await deliver(s, 'push', payload);
    expect(r.status, r.text).toBe(202);
    expect(r.body.data).toEqual({ event: 'push', repo_full_name: name, branch: 'main', deployments: expect.any(Array) });
    expect(r.body.data?.deployments).toHaveLength(3);
    const all = [...(await deploymentsOf(a)), ...(await deploymentsOf(b)), ...(await deploymentsOf(c, other))];
    expect(all).toHaveLength(3);
    for (const d of all) {
      expect(d).toMatchObject({ status: 'queued', source: 'git', branch: 'main', commit_sha: payload.after, commit_message: 'Make the button blue' });
    }
    expect(all.map((d) => d.id).sort()).toEqual([...(r.body.data?.deployments ?? [])].sort());
  });

  it('queues nothing for auto_deploy off, another branch or another repository', async () => {
    const name = repo();
    const off = await connected(name, { auto_deploy: false });
    const develop = await connected(name, { branch: 'develop' });
    const elsewhere = await connected(repo());
    const on = await connected(name);
    const r = await deliver(s, 'push', pushPayload(name, 'refs/heads/main'));
    expect(r.status).toBe(202);
    expect(r.body.data?.deployments).toHaveLength(1);
    expect(await deploymentsOf(on)).toHaveLength(1);
    for (const p of [off, develop, elsewhere]) expect(await deploymentsOf(p)).toEqual([]);
  });

  it('answers 202 with an empty list when nothing is connected', async () => {
    const name = repo();
    const r = await deliver(s, 'push', pushPayload(name, 'refs/heads/main'));
    expect(r.status).toBe(202);
    expect(r.body.data).toEqual({ event: 'push', repo_full_name: name, branch: 'main', deployments: [] });
  });

  it('ignores tag pushes and branch deletions', async () => {
    const name = repo();
    const p = await connected(name);
    const tag = await deliver(s, 'push', pushPayload(name, 'refs/tags/v1.0.0'));
    expect(tag.status).toBe(202);
    expect(tag.body.data).toEqual({ event: 'push', ignored: true, reason: 'refs/tags/v1.0.0 is not a branch; only pushes to branches deploy.' });
    const deletion = await deliver(s, 'push', pushPayload(name, 'refs/heads/main', { deleted: true, after: '0'.repeat(40), head_commit: null }));
    expect(deletion.status).toBe(202);
    expect(deletion.body.data).toEqual({ event: 'push', ignored: true, reason: 'The branch main was deleted; there is nothing to deploy.' });
    expect(await deploymentsOf(p)).toEqual([]);
  });

  it('skips projects of a workspace whose wallet is empty', async () => {
    const name = repo();
    const broke = await makeWorkspace(s);
    await s.store.db.updateTable('wallets').set({ balance: 0 }).where('workspace_id', '=', broke.id).execute();
    const skipped = await connected(name, {}, broke);
    const funded = await connected(name);
    const r = await deliver(s, 'push', pushPayload(name, 'refs/heads/main'));
    expect(r.status).toBe(202);
    expect(r.body.data?.deployments).toHaveLength(1);
    expect(await deploymentsOf(skipped, broke)).toEqual([]);
    expect(await deploymentsOf(funded)).toHaveLength(1);
  });

  it('queues again on a redelivery; the newer queued deployment supersedes the older', async () => {
    const name = repo();
    const p = await connected(name);
    const body = Buffer.from(JSON.stringify(pushPayload(name, 'refs/heads/main')));
    const delivery = randomUUID();
    const first = await deliver(s, 'push', null, { raw: body, delivery });
    const again = await deliver(s, 'push', null, { raw: body, delivery });
    expect([first.status, again.status]).toEqual([202, 202]);
    const status = new Map((await deploymentsOf(p)).map((d) => [d.id, d.status]));
    expect(status.size).toBe(2);
    expect(status.get(first.body.data?.deployments?.[0] ?? '')).toBe('superseded');
    expect(status.get(again.body.data?.deployments?.[0] ?? '')).toBe('queued');
  });

  it('acknowledges other events without acting on them', async () => {
    const r = await deliver(s, 'pull_request', { action: 'opened', number: 1 });
    expect(r.status).toBe(202);
    expect(r.body.data).toEqual({ event: 'pull_request', ignored: true, reason: 'Slipway acts on push and ping events only, not on pull_request.' });
  });

  it('takes the form-encoded deliveries GitHub sends by default', async () => {
    const name = repo();
    const p = await connected(name);
    const raw = Buffer.from(new URLSearchParams({ payload: JSON.stringify(pushPayload(name, 'refs/heads/main')) }).toString());
    const r = await deliver(s, 'push', null, { raw, contentType: 'application/x-www-form-urlencoded' });
    expect(r.status, r.text).toBe(202);
    expect(await deploymentsOf(p)).toHaveLength(1);
  });

  it('answers 400 for a signed body that is not JSON or not a push, or without an event name', async () => {
    const invalidJson = await deliver(s, 'push', null, { raw: Buffer.from('{"ref": "refs/heads/main",') });
    expect(invalidJson).toMatchObject({ status: 400, body: { success: false, error: 'The request body is not valid JSON.' } });
    const noRepo = await deliver(s, 'push', { ref: 'refs/heads/main', after: sha() });
    expect(noRepo).toMatchObject({ status: 400, body: { error: 'The push payload has no "repository.full_name".' } });
    const badSha = await deliver(s, 'push', pushPayload(repo(), 'refs/heads/main', { after: '--upload-pack=x' }));
    expect(badSha.status).toBe(400);
    const noEvent = await deliver(s, null, { zen: 'x' });
    expect(noEvent).toMatchObject({ status: 400, body: { error: 'The X-GitHub-Event header is missing.' } });
  });

  it('keeps the 1 MiB body limit and refuses other content types', async () => {
    const big = Buffer.alloc(1024 * 1024 + 1, 0x20);
    expect((await deliver(s, 'push', null, { raw: big })).status).toBe(413);
    expect((await deliver(s, 'push', null, { raw: Buffer.from('x'), contentType: 'text/plain' })).status).toBe(415);
  });

  it('never logs the body or the signature', async () => {
    const name = repo();
    await connected(name);
    const marker = `marker-${randomUUID()}`;
    const payload = pushPayload(name, 'refs/heads/main', { head_commit: { id: 'x', message: marker } });
    const body = Buffer.from(JSON.stringify(payload));
    const signature = sign(SECRET, body);
    expect((await deliver(s, 'push', null, { raw: body, signature })).status).toBe(202);
    expect((await deliver(s, 'push', null, { raw: body, signature: sign('wrong', body) })).status).toBe(401);
    const logs = s.logs.join('\n');
    expect(logs).toContain(name);
    for (const secretish of [marker, signature.slice(7), sign('wrong', body).slice(7), SECRET]) expect(logs).not.toContain(secretish);
  });
});

describe('GitHub webhooks without a secret', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
  });
  afterAll(async () => s.close());

  it('answers 503 to every delivery, signed or not', async () => {
    const message = 'GitHub webhooks are not configured on this Slipway (set --github-webhook-secret).';
    for (const signature of [undefined, null]) {
      const r = await deliver(s, 'ping', { zen: 'x' }, signature === null ? { signature } : {});
      expect(r).toMatchObject({ status: 503, body: { success: false, error: message } });
    }
  });
});

describe('GitHub webhooks under the per-address rate limit', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite', { githubWebhookSecret: SECRET, anonymousRateLimit: { rate: 0.01, burst: 3 } });
  });
  afterAll(async () => s.close());

  it('answers 429 with Retry-After once the burst is spent, good signature or not', async () => {
    expect((await deliver(s, 'ping', { zen: 'x' })).status).toBe(200);
    expect((await deliver(s, 'ping', { zen: 'x' }, { secret: 'wrong' })).status).toBe(401);
    expect((await deliver(s, 'ping', { zen: 'x' })).status).toBe(200);
    const limited = await deliver(s, 'ping', { zen: 'x' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.body.error).toMatch(/^Too many requests; retry in \d+ seconds?\.$/);
  });
});
