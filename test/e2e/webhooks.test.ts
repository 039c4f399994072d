import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sign } from '../../src/modules/webhooks/github-protocol.js';
import { makeProject, makeWorkspace, startTestServer, type Reply, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';

/** The GitHub App's webhook secret (--github-webhook-secret). */
const APP_SECRET = 'whsec-slipway-test-0123456789';
const APP_HOOK = '/api/webhooks/github';

interface Result {
  event: string;
  ignored?: true;
  duplicate?: true;
  reason?: string;
  repo_full_name?: string;
  branch?: string;
  commit_sha?: string;
  deployments?: string[];
  outcome?: string;
  done?: boolean;
  projects?: { project_id: string; outcome: string; deployment_id: string | null; reason: string }[];
}

const GITHUB_EXAMPLE_AFTER = '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c';

/**
 * A push event in the shape GitHub documents and sends (every top-level field of its example
 * payload; values of our own), to `repoFullName`'s main branch.
 */
function githubPushExample(repoFullName: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const [owner = 'octo-org', name = 'web'] = repoFullName.split('/');
  const user = { login: owner, id: 21031067, node_id: 'MDQ6VXNlcjIxMDMxMDY3', type: 'User', site_admin: false, html_url: `https://github.com/${owner}` };
  // GitHub's example: the push's one commit is also its head commit
  const headCommit = {
    id: GITHUB_EXAMPLE_AFTER,
    tree_id: 'f9d2a07e9488b91af2641b26b9407fe22a451433',
    distinct: true,
    message: 'Update README.md',
    timestamp: '2019-05-15T15:20:30-07:00',
    url: `https://github.com/${repoFullName}/commit/${GITHUB_EXAMPLE_AFTER}`,
    author: { name: owner, email: `${owner}@users.noreply.github.com`, username: owner },
    committer: { name: 'GitHub', email: 'noreply@github.com', username: 'web-flow' },
    added: [],
    removed: [],
    modified: ['README.md'],
  };
  return {
    ref: 'refs/heads/main',
    before: '6113728f27ae82c7b1a177c8d03f9e96e0adf246',
    after: GITHUB_EXAMPLE_AFTER,
    repository: {
      id: 186853002,
      node_id: 'MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=',
      name,
      full_name: repoFullName,
      private: false,
      owner: { name: owner, email: null, ...user },
      html_url: `https://github.com/${repoFullName}`,
      clone_url: `https://github.com/${repoFullName}.git`,
      default_branch: 'main',
      master_branch: 'main',
      pushed_at: 1559060410,
    },
    pusher: { name: owner, email: `${owner}@users.noreply.github.com` },
    sender: user,
    created: false,
    deleted: false,
    forced: false,
    base_ref: null,
    compare: `https://github.com/${repoFullName}/compare/6113728f27ae...0d1a26e67d8f`,
    commits: [headCommit],
    head_commit: headCommit,
    ...extra,
  };
}

interface Delivery {
  /** default: signed with `secret`; a string is sent as the header; null sends none */
  signature?: string | null;
  secret?: string;
  /** default: a fresh id; null sends none */
  delivery?: string | null;
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

async function deliver(s: TestServer, path: string, secret: string, event: string | null, payload: unknown, o: Delivery = {}): Promise<Reply<Result>> {
  const body = o.raw ?? Buffer.from(JSON.stringify(payload));
  const headers: Record<string, string> = {
    'content-type': o.contentType ?? 'application/json',
    'user-agent': 'GitHub-Hookshot/test',
  };
  const delivery = o.delivery === undefined ? randomUUID() : o.delivery;
  if (delivery !== null) headers['x-github-delivery'] = delivery;
  if (event !== null) headers['x-github-event'] = event;
  const signature = o.signature === undefined ? sign(o.secret ?? secret, body) : o.signature;
  if (signature !== null) headers['x-hub-signature-256'] = signature;
  return s.request<Result>('POST', path, { raw: body, headers });
}

/** A project connected to a repository, with its webhook as the create response shows it once. */
interface Hooked extends TestProject {
  ws: TestWorkspace;
  /** webhook_url, absolute */
  hook: string;
  secret: string;
}

interface GitView {
  webhook_url: string | null;
  webhook_secret?: string;
  installation_id: number;
}

async function connect(s: TestServer, ws: TestWorkspace, repoFullName: string, git: Record<string, unknown> = {}): Promise<Hooked> {
  const p = await makeProject(s, ws);
  const r = await s.request<GitView>('POST', `/api/workspaces/${ws.slug}/projects/${p.slug}/git`, { key: ws.member.key, body: { repo_full_name: repoFullName, ...git } });
  expect(r.status, r.text).toBe(201);
  const url = r.body.data?.webhook_url ?? '';
  // absolute under the origin the request reached (no --public-url here): GitHub takes absolute URLs only
  expect(url.startsWith(`${s.url}/api/webhooks/github/`), url).toBe(true);
  expect(url).toMatch(/\/api\/webhooks\/github\/[0-9a-f]{32}$/);
  expect(r.body.data?.webhook_secret).toMatch(/^[0-9a-f]{64}$/);
  return { ...p, ws, hook: url, secret: r.body.data?.webhook_secret ?? '' };
}

async function deploymentsOf(s: TestServer, p: Hooked): Promise<Deployment[]> {
  const r = await s.request<{ deployments: Deployment[] }>('GET', `/api/workspaces/${p.ws.slug}/projects/${p.slug}/deployments?limit=50`, { key: p.ws.member.key });
  expect(r.status, r.text).toBe(200);
  return r.body.data?.deployments ?? [];
}

describe.each(STORE_KINDS)('repository webhooks (one secret per Git connection) on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { githubWebhookSecret: APP_SECRET });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const push = (p: Hooked, payload: unknown, o: Delivery = {}) => deliver(s, p.hook, p.secret, 'push', payload, o);

  it('shows the webhook URL and secret once, on create; the project and PUT show the URL only', async () => {
    const p = await connect(s, w, repo());
    const project = await s.request<{ git: GitView }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key });
    expect(project.body.data?.git.webhook_url).toBe(p.hook);
    expect(project.text).not.toContain(p.secret);
    expect(project.body.data?.git).not.toHaveProperty('webhook_secret');
    const put = await s.request<GitView>('PUT', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key, body: { branch: 'main' } });
    expect(put.body.data?.webhook_url).toBe(p.hook);
    expect(put.text).not.toContain(p.secret);
    // Sealed at rest: the store holds no plaintext secret.
    const row = await s.store.db.selectFrom('git_connections').selectAll().where('project_id', '=', p.id).executeTakeFirstOrThrow();
    expect(row.webhook_secret).not.toContain(p.secret);
    // Two connections never share a URL or a secret.
    const q = await connect(s, w, repo());
    expect(q.hook).not.toBe(p.hook);
    expect(q.secret).not.toBe(p.secret);
  });

  it('answers a ping signed with the connection secret', async () => {
    const p = await connect(s, w, repo());
    const r = await deliver(s, p.hook, p.secret, 'ping', { zen: 'Design for failure.', hook_id: 1 });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ success: true, data: { event: 'ping' } });
  });

  it("refuses a missing, foreign, malformed or platform signature with 401, and deploys nothing", async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const payload = pushPayload(name, 'refs/heads/main');
    const body = Buffer.from(JSON.stringify(payload));
    const sha1 = `sha1=${createHmac('sha1', p.secret).update(body).digest('hex')}`;
    const mismatch = 'The X-Hub-Signature-256 signature does not match the body; give the GitHub webhook the current secret of its Git connection (POST …/git/webhook-secret makes a new one).';
    const malformed = 'The X-Hub-Signature-256 header must be "sha256=" followed by 64 hexadecimal digits.';
    const cases: [string, Delivery, string][] = [
      ['missing', { signature: null }, 'The X-Hub-Signature-256 header is missing; give the GitHub webhook the secret of its Git connection (webhook_secret).'],
      ['another secret', { secret: 'not-the-secret' }, mismatch],
      // The platform-wide App secret is worth nothing on a connection's URL.
      ['the App secret', { secret: APP_SECRET }, mismatch],
      ['sha1 prefix', { signature: sha1 }, malformed],
      ['no prefix', { signature: sign(p.secret, body).slice('sha256='.length) }, malformed],
      ['signature of another body', { signature: sign(p.secret, JSON.stringify({ ...payload, ref: 'refs/heads/other' })) }, mismatch],
    ];
    for (const [what, o, message] of cases) {
      const r = await push(p, payload, { raw: body, ...o });
      expect(r.status, what).toBe(401);
      expect(r.body, what).toEqual({ success: false, error: message });
    }
    // An API key is no substitute for the signature.
    const keyed = await s.request('POST', p.hook, { key: w.owner.key, body: payload, headers: { 'x-github-event': 'push', 'x-github-delivery': randomUUID() } });
    expect(keyed.status).toBe(401);
    expect(await deploymentsOf(s, p)).toEqual([]);
    // The same body, signed with the connection's secret: now it deploys.
    const r = await push(p, payload, { raw: body });
    expect(r.status, r.text).toBe(202);
    expect(r.body.data).toMatchObject({ event: 'push', repo_full_name: name, branch: 'main', deployments: [expect.any(String)], outcome: 'deployed', done: true });
    const deployments = await deploymentsOf(s, p);
    expect(deployments).toHaveLength(1);
    expect(deployments[0]).toMatchObject({ status: 'queued', source: 'git', branch: 'main', commit_sha: payload.after, commit_message: 'Make the button blue' });
  });

  it("the platform secret no longer deploys a repository webhook's project", async () => {
    const name = repo();
    const p = await connect(s, w, name);
    // What a repository webhook configured with --github-webhook-secret sends: no installation.
    const r = await deliver(s, APP_HOOK, APP_SECRET, 'push', pushPayload(name, 'refs/heads/main'));
    expect(r.status, r.text).toBe(202);
    expect(r.body.data).toEqual({
      event: 'push',
      ignored: true,
      reason: "The delivery names no GitHub App installation; a repository webhook delivers to its Git connection's own webhook_url, signed with its own secret.",
    });
    // Nor does naming an installation the project's connection does not use.
    const forged = await deliver(s, APP_HOOK, APP_SECRET, 'push', pushPayload(name, 'refs/heads/main', { installation: { id: 4242 } }));
    expect(forged.status, forged.text).toBe(202);
    expect(forged.body.data?.deployments).toEqual([]);
    expect(await deploymentsOf(s, p)).toEqual([]);
  });

  it("a connection's secret deploys only its own project, never another tenant's connected to the same repository", async () => {
    const name = repo();
    const other = await makeWorkspace(s);
    const mine = await connect(s, w, name);
    const sibling = await connect(s, w, name);
    const theirs = await connect(s, other, name);
    const r = await push(mine, pushPayload(name, 'refs/heads/main'));
    expect(r.status, r.text).toBe(202);
    expect(r.body.data?.deployments).toHaveLength(1);
    expect((await deploymentsOf(s, mine)).map((d) => d.id)).toEqual(r.body.data?.deployments);
    expect(await deploymentsOf(s, sibling)).toEqual([]);
    expect(await deploymentsOf(s, theirs)).toEqual([]);
    // My secret on their URL: 401, and nothing of theirs moves.
    const hostile = await deliver(s, theirs.hook, mine.secret, 'push', pushPayload(name, 'refs/heads/main'));
    expect(hostile.status).toBe(401);
    expect(await deploymentsOf(s, theirs)).toEqual([]);
  });

  it('deploys nothing for a push to another repository or branch, or with auto_deploy off', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const elsewhere = await push(p, pushPayload('victim/app', 'refs/heads/main'));
    expect(elsewhere.status).toBe(202);
    expect(elsewhere.body.data).toEqual({ event: 'push', ignored: true, reason: `This webhook's Git connection is for ${name}, not victim/app; nothing was deployed.` });
    const develop = await push(p, pushPayload(name, 'refs/heads/develop'));
    expect(develop.body.data).toEqual({ event: 'push', ignored: true, reason: "This webhook's Git connection deploys the branch main, not develop; nothing was deployed." });
    const off = await connect(s, w, name, { auto_deploy: false });
    const r = await push(off, pushPayload(name, 'refs/heads/main'));
    expect(r.body.data).toEqual({ event: 'push', ignored: true, reason: "auto_deploy is off on this webhook's Git connection; nothing was deployed." });
    expect(await deploymentsOf(s, p)).toEqual([]);
    expect(await deploymentsOf(s, off)).toEqual([]);
    // GitHub names are case-insensitive.
    expect((await push(p, pushPayload(name.toUpperCase(), 'refs/heads/main'))).body.data?.deployments).toHaveLength(1);
  });

  it('deploys a delivery once: a repeated delivery id, or the same body again, answers 200 and deploys nothing', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const body = Buffer.from(JSON.stringify(pushPayload(name, 'refs/heads/main')));
    const delivery = randomUUID();
    const first = await push(p, null, { raw: body, delivery });
    expect(first.status, first.text).toBe(202);
    const again = await push(p, null, { raw: body, delivery });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data).toEqual({ event: 'push', duplicate: true, reason: `Delivery ${delivery} was already processed and did what it was for (the same delivery id or the same body); nothing was deployed again.` });
    // A captured delivery replayed under a fresh id (the id is not signed) is still a repeat.
    expect((await push(p, null, { raw: body })).status).toBe(200);
    // So is another body under a used id.
    expect((await push(p, pushPayload(name, 'refs/heads/main'), { delivery })).status).toBe(200);
    const deployments = await deploymentsOf(s, p);
    expect(deployments).toHaveLength(1);
    expect(deployments[0]).toMatchObject({ id: first.body.data?.deployments?.[0], status: 'queued' });
    // A push needs its delivery id.
    const none = await push(p, pushPayload(name, 'refs/heads/main'), { delivery: null });
    expect(none).toMatchObject({ status: 400, body: { success: false, error: 'The X-GitHub-Delivery header is missing; it tells one delivery from a repeat.' } });
  });

  it('deploys a delivery sent many times at once exactly once (the store decides)', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const body = Buffer.from(JSON.stringify(pushPayload(name, 'refs/heads/main')));
    const delivery = randomUUID();
    const replies = await Promise.all(Array.from({ length: 8 }, () => push(p, null, { raw: body, delivery })));
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 202]);
    expect(await deploymentsOf(s, p)).toHaveLength(1);
  });

  it('is not fooled by another receiver claiming a delivery id first', async () => {
    const name = repo();
    const mine = await connect(s, w, name);
    const other = await makeWorkspace(s);
    const theirs = await connect(s, other, name);
    const delivery = randomUUID();
    // A tenant who learns (or guesses) the id of my next delivery and sends it first to their own hook.
    expect((await push(theirs, pushPayload(name, 'refs/heads/main'), { delivery })).status).toBe(202);
    expect((await push(mine, pushPayload(name, 'refs/heads/main'), { delivery })).status).toBe(202);
    expect(await deploymentsOf(s, mine)).toHaveLength(1);
  });

  it('rotates the secret: the new one is shown once, the old one stops verifying at once', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const path = `/api/workspaces/${w.slug}/projects/${p.slug}/git/webhook-secret`;
    const r = await s.request<{ webhook_url: string; webhook_secret: string }>('POST', path, { key: w.member.key });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data?.webhook_url).toBe(p.hook);
    expect(r.body.data?.webhook_secret).toMatch(/^[0-9a-f]{64}$/);
    expect(r.body.data?.webhook_secret).not.toBe(p.secret);
    const old = await push(p, pushPayload(name, 'refs/heads/main'));
    expect(old.status).toBe(401);
    const fresh = await deliver(s, p.hook, r.body.data?.webhook_secret ?? '', 'push', pushPayload(name, 'refs/heads/main'));
    expect(fresh.status, fresh.text).toBe(202);
    expect(await deploymentsOf(s, p)).toHaveLength(1);
    const project = await s.request('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key });
    expect(project.text).not.toContain(r.body.data?.webhook_secret ?? 'x');
    // A project without a connection has no secret to rotate.
    const bare = await makeProject(s, w);
    expect(await s.request('POST', `/api/workspaces/${w.slug}/projects/${bare.slug}/git/webhook-secret`, { key: w.member.key })).toMatchObject({
      status: 404,
      body: { success: false, error: 'Git connection was not found.' },
    });
  });

  it('refuses deliveries to a connection without a secret (made before per-connection secrets) until one is made', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    // What the migration leaves on an existing connection: a webhook id, no secret.
    await s.store.db.updateTable('git_connections').set({ webhook_secret: null }).where('project_id', '=', p.id).execute();
    for (const secret of [p.secret, APP_SECRET, '']) {
      const r = await deliver(s, p.hook, secret, 'push', pushPayload(name, 'refs/heads/main'));
      expect(r).toMatchObject({
        status: 401,
        body: { success: false, error: 'This Git connection has no webhook secret yet; make one with POST /api/workspaces/:slug/projects/:project_slug/git/webhook-secret and give it to the GitHub webhook.' },
      });
    }
    const made = await s.request<{ webhook_secret: string }>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git/webhook-secret`, { key: w.member.key });
    expect((await deliver(s, p.hook, made.body.data?.webhook_secret ?? '', 'push', pushPayload(name, 'refs/heads/main'))).status).toBe(202);
    // Sealed under another key file (the key was replaced): refused with a sentence that says how to repair it.
    await s.store.db.updateTable('git_connections').set({ webhook_secret: 'v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAA==:AAAA' }).where('project_id', '=', p.id).execute();
    expect(await deliver(s, p.hook, made.body.data?.webhook_secret ?? '', 'push', pushPayload(name, 'refs/heads/main'))).toMatchObject({
      status: 401,
      body: { success: false, error: "This Git connection's webhook secret cannot be decrypted with this installation's secret key file (was it replaced?); make a new one with POST …/git/webhook-secret." },
    });
  });

  it('answers 404 to a webhook URL no connection has, and to a removed connection', async () => {
    const message = "No Git connection has this webhook URL; copy webhook_url from the project's Git connection again.";
    for (const id of [randomBytes(16).toString('hex'), 'not-an-id', 'A'.repeat(32)]) {
      expect(await deliver(s, `${APP_HOOK}/${id}`, 'x', 'ping', { zen: 'x' })).toMatchObject({ status: 404, body: { success: false, error: message } });
    }
    const p = await connect(s, w, repo());
    await s.request('DELETE', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key });
    expect((await deliver(s, p.hook, p.secret, 'ping', { zen: 'x' })).status).toBe(404);
  });

  it('ignores tag pushes, branch deletions and other events', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const tag = await push(p, pushPayload(name, 'refs/tags/v1.0.0'));
    expect(tag.status).toBe(202);
    expect(tag.body.data).toEqual({ event: 'push', ignored: true, reason: 'refs/tags/v1.0.0 is not a branch; only pushes to branches deploy.' });
    const deletion = await push(p, pushPayload(name, 'refs/heads/main', { deleted: true, after: '0'.repeat(40), head_commit: null }));
    expect(deletion.status).toBe(202);
    expect(deletion.body.data).toEqual({ event: 'push', ignored: true, reason: 'The branch main was deleted; there is nothing to deploy.' });
    const pr = await deliver(s, p.hook, p.secret, 'pull_request', { action: 'opened', number: 1 });
    expect(pr.status).toBe(202);
    expect(pr.body.data).toEqual({ event: 'pull_request', ignored: true, reason: 'Slipway acts on push and ping events only, not on pull_request.' });
    expect(await deploymentsOf(s, p)).toEqual([]);
  });

  it('says why a push was not deployed for an empty wallet, shows it in the project\'s deployments, and deploys it when GitHub redelivers after a top-up', async () => {
    const name = repo();
    const broke = await makeWorkspace(s);
    await s.store.db.updateTable('wallets').set({ balance_micros: 0 }).where('workspace_id', '=', broke.id).execute();
    const p = await connect(s, broke, name);
    // GitHub's push event as it sends it, signed as it signs: HMAC-SHA256 of the raw body, in hex.
    const body = Buffer.from(JSON.stringify(githubPushExample(name)));
    const delivery = randomUUID();
    const signature = `sha256=${createHmac('sha256', p.secret).update(body).digest('hex')}`;
    const r = await push(p, null, { raw: body, delivery, signature });
    expect(r.status, r.text).toBe(202);
    const refusal = 'Not deployed: the workspace wallet has no credit left. Top it up, then redeliver this push from GitHub (Recent Deliveries, Redeliver) or deploy the commit by hand.';
    expect(r.body.data).toMatchObject({
      deployments: [],
      outcome: 'not_deployed',
      done: false,
      projects: [{ project_id: p.id, outcome: 'payment_required', deployment_id: expect.any(String), reason: refusal }],
    });
    // Where the project's users look: the refused push is a failed deployment saying why.
    const shown = await deploymentsOf(s, p);
    expect(shown).toHaveLength(1);
    expect(shown[0]).toMatchObject({ id: r.body.data?.projects?.[0]?.deployment_id, status: 'failed', source: 'git', branch: 'main', commit_sha: GITHUB_EXAMPLE_AFTER, error: refusal });
    // GitHub's Redeliver sends the same delivery id and body; after a top-up it deploys.
    await s.store.db.updateTable('wallets').set({ balance_micros: 5_000_000 }).where('workspace_id', '=', broke.id).execute();
    const again = await push(p, null, { raw: body, delivery, signature });
    expect(again.status, again.text).toBe(202);
    expect(again.body.data).toMatchObject({ outcome: 'deployed', done: true, deployments: [expect.any(String)], projects: [{ outcome: 'queued' }] });
    const after = await deploymentsOf(s, p);
    expect(after[0]).toMatchObject({ id: again.body.data?.deployments?.[0], status: 'queued', commit_sha: GITHUB_EXAMPLE_AFTER });
    // Now done: a third delivery of it is a repeat.
    const third = await push(p, null, { raw: body, delivery, signature });
    expect(third.status).toBe(200);
    expect(third.body.data?.duplicate).toBe(true);
  });

  it('says a commit already under way was not deployed again, and keeps the delivery open for a redelivery', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const payload = pushPayload(name, 'refs/heads/main');
    const first = await push(p, payload);
    expect(first.body.data?.outcome).toBe('deployed');
    const live = first.body.data?.deployments?.[0];
    // the same commit in another delivery (GitHub sends a push both to a repository webhook and to an App)
    const second = await push(p, { ...payload, before: sha() });
    expect(second.status, second.text).toBe(202);
    expect(second.body.data).toMatchObject({
      deployments: [],
      outcome: 'not_deployed',
      done: false,
      projects: [{ outcome: 'duplicate_commit', deployment_id: live, reason: `Not deployed again: deployment ${live ?? ''} of this commit is already queued; should it fail, a redelivery deploys the commit again if it is still the branch's head.` }],
    });
    expect(await deploymentsOf(s, p)).toHaveLength(1);
  });

  it('takes the form-encoded deliveries GitHub sends by default', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const raw = Buffer.from(new URLSearchParams({ payload: JSON.stringify(pushPayload(name, 'refs/heads/main')) }).toString());
    const r = await push(p, null, { raw, contentType: 'application/x-www-form-urlencoded' });
    expect(r.status, r.text).toBe(202);
    expect(await deploymentsOf(s, p)).toHaveLength(1);
  });

  it('answers 400 for a signed body that is not JSON or not a push, or without an event name', async () => {
    const p = await connect(s, w, repo());
    const invalidJson = await push(p, null, { raw: Buffer.from('{"ref": "refs/heads/main",') });
    expect(invalidJson).toMatchObject({ status: 400, body: { success: false, error: 'The request body is not valid JSON.' } });
    const noRepo = await push(p, { ref: 'refs/heads/main', after: sha() });
    expect(noRepo).toMatchObject({ status: 400, body: { error: 'The push payload has no "repository.full_name".' } });
    const badSha = await push(p, pushPayload(repo(), 'refs/heads/main', { after: '--upload-pack=x' }));
    expect(badSha.status).toBe(400);
    const noEvent = await deliver(s, p.hook, p.secret, null, { zen: 'x' });
    expect(noEvent).toMatchObject({ status: 400, body: { error: 'The X-GitHub-Event header is missing.' } });
  });

  it('keeps the 1 MiB body limit and refuses other content types', async () => {
    const p = await connect(s, w, repo());
    const big = Buffer.alloc(1024 * 1024 + 1, 0x20);
    expect((await push(p, null, { raw: big })).status).toBe(413);
    expect((await push(p, null, { raw: Buffer.from('x'), contentType: 'text/plain' })).status).toBe(415);
  });

  it('never logs the body, the signature or a secret', async () => {
    const name = repo();
    const p = await connect(s, w, name);
    const marker = `marker-${randomUUID()}`;
    const payload = pushPayload(name, 'refs/heads/main', { head_commit: { id: 'x', message: marker } });
    const body = Buffer.from(JSON.stringify(payload));
    const signature = sign(p.secret, body);
    expect((await push(p, null, { raw: body, signature })).status).toBe(202);
    expect((await push(p, null, { raw: body, signature: sign('wrong', body) })).status).toBe(401);
    const rotated = await s.request<{ webhook_secret: string }>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git/webhook-secret`, { key: w.member.key });
    const logs = s.logs.join('\n');
    expect(logs).toContain(name);
    for (const secretish of [marker, signature.slice(7), sign('wrong', body).slice(7), p.secret, rotated.body.data?.webhook_secret ?? 'x', APP_SECRET]) {
      expect(logs).not.toContain(secretish);
    }
  });
});

describe.each(STORE_KINDS)('GitHub App webhooks on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let installation = 7000;
  beforeAll(async () => {
    s = await startTestServer(kind, { githubWebhookSecret: APP_SECRET });
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  /** The installation linked to the workspace (what the setup-URL flow records). */
  async function link(ws: TestWorkspace, id: number): Promise<void> {
    await s.store.db.insertInto('github_installations').values({ workspace_id: ws.id, installation_id: id, account_login: 'acme', linked_by: null, created_at: new Date().toISOString() }).execute();
  }

  /** A connection using `id`, written straight to the store: the link checks of POST …/git are not what this tests. */
  async function viaInstallation(ws: TestWorkspace, name: string, id: number, git: Record<string, unknown> = {}): Promise<Hooked> {
    const p = await connect(s, ws, name, git);
    await s.store.db.updateTable('git_connections').set({ installation_id: id }).where('project_id', '=', p.id).execute();
    return p;
  }

  const appPush = (name: string, id: number, o: Delivery = {}, ref = 'refs/heads/main') =>
    deliver(s, APP_HOOK, APP_SECRET, 'push', pushPayload(name, ref, { installation: { id, node_id: 'x' } }), o);

  it('answers a signed ping, and 401 to another secret', async () => {
    expect((await deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'x' })).status).toBe(200);
    expect(await deliver(s, APP_HOOK, 'wrong', 'ping', { zen: 'x' })).toMatchObject({
      status: 401,
      body: { success: false, error: "The X-Hub-Signature-256 signature does not match the body; check that the GitHub App's webhook secret equals --github-webhook-secret." },
    });
  });

  it('deploys only connections that use the delivering installation, linked to their own workspace, with that repository and branch', async () => {
    const id = installation++;
    const name = repo();
    await link(w, id);
    const mine = await viaInstallation(w, name, id);
    const develop = await viaInstallation(w, name, id, { branch: 'develop' });
    const off = await viaInstallation(w, name, id, { auto_deploy: false });
    const plain = await connect(s, w, name);
    const otherInstallation = await viaInstallation(w, name, id + 100_000);
    // Another tenant who wrote my installation id on their connection without linking it.
    const intruder = await makeWorkspace(s);
    const borrowed = await viaInstallation(intruder, name, id);
    const r = await appPush(name, id);
    expect(r.status, r.text).toBe(202);
    expect(r.body.data).toEqual({
      event: 'push',
      repo_full_name: name,
      branch: 'main',
      commit_sha: expect.any(String),
      deployments: [expect.any(String)],
      outcome: 'partly_deployed',
      done: false,
      reason: "1 of 2 projects deployed; projects[].reason says why one was not. The delivery is not recorded as done: GitHub's Redeliver acts on it again once the cause is fixed.",
      projects: expect.arrayContaining([
        { project_id: mine.id, outcome: 'queued', deployment_id: expect.any(String), reason: expect.stringMatching(/^Deployment \S+ of commit [0-9a-f]{12} was queued\.$/) },
        // the other tenant's connection names my installation without having linked it: not acted on
        {
          project_id: borrowed.id,
          outcome: 'installation_not_linked',
          deployment_id: null,
          reason: `Not deployed: this project's Git connection names GitHub App installation ${id.toString()}, which its workspace has not linked (any more); link it again (POST /api/workspaces/:slug/github/installations/link), then redeliver this push.`,
        },
      ]),
    });
    expect(r.body.data?.projects).toHaveLength(2);
    const deployments = await deploymentsOf(s, mine);
    expect(deployments.map((d) => d.id)).toEqual(r.body.data?.deployments);
    expect(deployments[0]).toMatchObject({ status: 'queued', source: 'git', branch: 'main' });
    for (const p of [develop, off, plain, otherInstallation, borrowed]) expect(await deploymentsOf(s, p)).toEqual([]);
  });

  it('deploys a delivery once', async () => {
    const id = installation++;
    const name = repo();
    await link(w, id);
    const p = await viaInstallation(w, name, id);
    const delivery = randomUUID();
    const body = Buffer.from(JSON.stringify(pushPayload(name, 'refs/heads/main', { installation: { id } })));
    expect((await deliver(s, APP_HOOK, APP_SECRET, 'push', null, { raw: body, delivery })).status).toBe(202);
    const again = await deliver(s, APP_HOOK, APP_SECRET, 'push', null, { raw: body, delivery });
    expect(again.status).toBe(200);
    expect(again.body.data?.duplicate).toBe(true);
    expect(await deploymentsOf(s, p)).toHaveLength(1);
  });

  it('says when the installation is not linked to the workspace, and deploys when GitHub redelivers after it is linked again', async () => {
    const id = installation++;
    const name = repo();
    const p = await viaInstallation(w, name, id);
    const body = Buffer.from(JSON.stringify(githubPushExample(name, { installation: { id, node_id: 'MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==' } })));
    const delivery = randomUUID();
    const signature = `sha256=${createHmac('sha256', APP_SECRET).update(body).digest('hex')}`;
    const r = await deliver(s, APP_HOOK, APP_SECRET, 'push', null, { raw: body, delivery, signature });
    expect(r.status, r.text).toBe(202);
    expect(r.body.data).toMatchObject({ deployments: [], outcome: 'not_deployed', done: false, projects: [{ project_id: p.id, outcome: 'installation_not_linked', deployment_id: null }] });
    expect(await deploymentsOf(s, p)).toEqual([]);
    await link(w, id);
    const again = await deliver(s, APP_HOOK, APP_SECRET, 'push', null, { raw: body, delivery, signature });
    expect(again.status, again.text).toBe(202);
    expect(again.body.data).toMatchObject({ outcome: 'deployed', done: true, projects: [{ project_id: p.id, outcome: 'queued' }] });
    expect((await deploymentsOf(s, p)).map((d) => d.id)).toEqual(again.body.data?.deployments);
  });

  it('answers a push no project is for as done, saying so', async () => {
    const name = repo();
    const r = await appPush(name, installation++);
    expect(r.status, r.text).toBe(202);
    expect(r.body.data).toMatchObject({ deployments: [], outcome: 'no_project', done: true, projects: [], reason: `No project deploys ${name}@main from this delivery (none is connected with auto_deploy on); nothing was deployed.` });
  });

  it('deploys a push once when it arrives both through the App and through the connection\'s own webhook, even at the same moment', async () => {
    const id = installation++;
    const name = repo();
    await link(w, id);
    const p = await viaInstallation(w, name, id);
    const first = pushPayload(name, 'refs/heads/main', { installation: { id } });
    const viaApp = await deliver(s, APP_HOOK, APP_SECRET, 'push', first);
    expect(viaApp.status, viaApp.text).toBe(202);
    expect(viaApp.body.data?.deployments).toHaveLength(1);
    const viaHook = await deliver(s, p.hook, p.secret, 'push', first);
    expect(viaHook.status, viaHook.text).toBe(202);
    expect(viaHook.body.data?.deployments).toEqual([]);
    expect((await deploymentsOf(s, p)).map((d) => d.id)).toEqual(viaApp.body.data?.deployments);

    // the next commit, by both ways at once: one deployment, which supersedes the first
    const second = pushPayload(name, 'refs/heads/main', { installation: { id } });
    const both = await Promise.all([deliver(s, APP_HOOK, APP_SECRET, 'push', second), deliver(s, p.hook, p.secret, 'push', second)]);
    for (const r of both) expect(r.status, r.text).toBe(202);
    const queued = both.flatMap((r) => r.body.data?.deployments ?? []);
    expect(queued).toHaveLength(1);
    const all = await deploymentsOf(s, p);
    expect(all.map((d) => [d.id, d.status, d.commit_sha])).toEqual([
      [queued[0], 'queued', second.after],
      [viaApp.body.data?.deployments?.[0], 'superseded', first.after],
    ]);
  });

  it('prunes claims older than seven days', async () => {
    const id = installation++;
    const name = repo();
    await link(w, id);
    await viaInstallation(w, name, id);
    const delivery = randomUUID();
    expect((await appPush(name, id, { delivery })).status).toBe(202);
    const claimed = () => s.store.db.selectFrom('webhook_deliveries').select('delivery_id').where('delivery_id', '=', delivery).execute();
    expect(await claimed()).toHaveLength(1);
    s.clock.advance(8 * 86_400_000);
    try {
      expect((await deliver(s, APP_HOOK, APP_SECRET, 'push', pushPayload(repo(), 'refs/heads/main', { installation: { id } }))).status).toBe(202);
      expect(await claimed()).toEqual([]);
    } finally {
      s.clock.advance(-8 * 86_400_000);
    }
  });
});

describe('GitHub webhooks without an App secret', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
  });
  afterAll(async () => s.close());

  it('answers 503 to every App delivery, signed or not; repository webhooks still work', async () => {
    const message = "GitHub App webhooks are not configured on this Slipway (set --github-webhook-secret); a repository webhook delivers to its Git connection's own webhook_url.";
    for (const signature of [undefined, null]) {
      const r = await deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'x' }, signature === null ? { signature } : {});
      expect(r).toMatchObject({ status: 503, body: { success: false, error: message } });
    }
    const w = await makeWorkspace(s);
    const name = repo();
    const p = await connect(s, w, name);
    const r = await deliver(s, p.hook, p.secret, 'push', pushPayload(name, 'refs/heads/main'));
    expect(r.status, r.text).toBe(202);
    expect(await deploymentsOf(s, p)).toHaveLength(1);
  });
});

describe('webhook URLs under --public-url', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite', { platform: { publicUrl: 'https://slipway.example.com' } });
  });
  afterAll(async () => s.close());

  it('are absolute', async () => {
    const w = await makeWorkspace(s);
    const p = await makeProject(s, w);
    const r = await s.request<GitView>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key, body: { repo_full_name: repo() } });
    expect(r.body.data?.webhook_url).toMatch(/^https:\/\/slipway\.example\.com\/api\/webhooks\/github\/[0-9a-f]{32}$/);
  });
});

describe('webhook URLs without --public-url', () => {
  let s: TestServer;
  let proxied: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite');
    proxied = await startTestServer('sqlite', { trustProxy: ['127.0.0.1'] });
  });
  afterAll(async () => {
    await s.close();
    await proxied.close();
  });

  const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'deploy.example.org' };

  it('are absolute under the origin the request reached, which GitHub accepts as a payload URL', async () => {
    const w = await makeWorkspace(s);
    const p = await makeProject(s, w);
    const r = await s.request<GitView>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key, body: { repo_full_name: repo() } });
    const url = r.body.data?.webhook_url ?? '';
    expect(new URL(url).origin).toBe(s.url);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/webhooks\/github\/[0-9a-f]{32}$/);
    // the same URL wherever the connection is shown, and under the Host the caller used
    const project = await s.request<{ git: GitView }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key });
    expect(project.body.data?.git.webhook_url).toBe(url);
    const list = await s.request<{ git: GitView | null }[]>('GET', `/api/workspaces/${w.slug}/projects`, { key: w.member.key });
    expect(list.body.data?.[0]?.git?.webhook_url).toBe(url);
    // X-Forwarded-* is not believed from a client that is not a trusted proxy
    const put = await s.request<GitView>('PUT', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key, body: { branch: 'main' }, headers: forwarded });
    expect(put.body.data?.webhook_url).toBe(url);
  });

  it('follow X-Forwarded-Proto and X-Forwarded-Host from a proxy of --trust-proxy', async () => {
    const w = await makeWorkspace(proxied);
    const p = await makeProject(proxied, w);
    const r = await proxied.request<GitView>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key, body: { repo_full_name: repo() }, headers: forwarded });
    expect(r.body.data?.webhook_url).toMatch(/^https:\/\/deploy\.example\.org\/api\/webhooks\/github\/[0-9a-f]{32}$/);
    const rotated = await proxied.request<GitView>('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git/webhook-secret`, { key: w.member.key, headers: forwarded });
    expect(rotated.body.data?.webhook_url).toBe(r.body.data?.webhook_url);
  });
});

describe('GitHub webhooks under the rate limits', () => {
  let s: TestServer;
  beforeAll(async () => {
    // the defaults of --anonymous-rate-limit (5/s, burst 20) and --webhook-rate-limit
    s = await startTestServer('sqlite', { githubWebhookSecret: APP_SECRET, anonymousRateLimit: { rate: 5, burst: 20 } });
  });
  afterAll(async () => s.close());

  it('takes a burst of 30 (and 100) correctly signed deliveries from one address at once without a 429', async () => {
    const pings = await Promise.all(Array.from({ length: 30 }, () => deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'Design for failure.', hook_id: 1 })));
    expect(pings.map((r) => r.status)).toEqual(Array.from({ length: 30 }, () => 200));
    const w = await makeWorkspace(s);
    const name = repo();
    const p = await connect(s, w, name);
    const pushes = await Promise.all(Array.from({ length: 100 }, () => deliver(s, p.hook, p.secret, 'push', pushPayload(name, 'refs/heads/main'))));
    expect(pushes.filter((r) => r.status === 429)).toEqual([]);
    expect(pushes.every((r) => r.status === 202)).toBe(true);
  });

  it('refuses wrong signatures with 401 and limits them per client address, without holding up correctly signed ones', async () => {
    const bad = await Promise.all(Array.from({ length: 30 }, () => deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'x' }, { secret: 'guess' })));
    const statuses = bad.map((r) => r.status);
    expect(statuses.filter((x) => x === 401).length).toBeGreaterThanOrEqual(20);
    expect(statuses.filter((x) => x === 429).length).toBeGreaterThanOrEqual(5);
    expect(statuses.every((x) => x === 401 || x === 429)).toBe(true);
    const limited = bad.find((r) => r.status === 429);
    expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited?.body.error).toMatch(/^Too many requests; retry in \d+ seconds?\.$/);
    // unknown webhook URLs spend the same tokens (which refill at 5/s meanwhile)
    const unknown = await Promise.all(Array.from({ length: 10 }, () => deliver(s, `${APP_HOOK}/${randomBytes(16).toString('hex')}`, 'x', 'ping', { zen: 'x' })));
    expect(unknown.map((r) => r.status)).toContain(429);
    // GitHub's own deliveries from that address still pass
    expect((await deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'x' })).status).toBe(200);
  });
});

describe('GitHub webhooks over their receiver\'s budget', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer('sqlite', { githubWebhookSecret: APP_SECRET, webhookRateLimit: { rate: 0.01, burst: 3 } });
  });
  afterAll(async () => s.close());

  it('answers 429 with Retry-After to signed deliveries past the receiver\'s burst, and other receivers keep theirs', async () => {
    for (let i = 0; i < 3; i++) expect((await deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'x' })).status).toBe(200);
    const limited = await deliver(s, APP_HOOK, APP_SECRET, 'ping', { zen: 'x' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    const w = await makeWorkspace(s);
    const p = await connect(s, w, repo());
    expect((await deliver(s, p.hook, p.secret, 'ping', { zen: 'x' })).status).toBe(200);
  });
});
