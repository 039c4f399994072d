// GitHub App installations bound to workspaces (issue 9, item 3), tried as a hostile tenant would:
// the installation id of another tenant is useless without a link, and a link is made only by
// the setup-URL flow, with a state Slipway signed for that workspace and a GitHub user who can
// access the installation. The fake GitHub speaks GitHub's documented endpoints.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkInstallation as linkCli } from '../../src/app/admin/github.js';
import { resolveConfig } from '../../src/app/config.js';
import { cloneTokenFor } from '../../src/modules/github/installations.js';
import { createStore } from '../../src/store/db.js';
import { startFakeGitHub, type FakeGitHub } from '../factories/fake-github.js';
import { githubIntegration, linkInstallation, setup, startLink } from '../factories/github-link.js';
import { makeProject, makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { freshDatabase, STORE_KINDS } from '../factories/stores.js';

/** Tenant A's installation (account acme) and tenant B's (account bigcorp, with a private repository). */
const A_INSTALLATION = 4_100_000_001;
const B_INSTALLATION = 4_100_000_002;

interface Installation {
  installation_id: number;
  account_login: string;
  linked_at: string;
}

describe.each(STORE_KINDS)('GitHub App installations bound to workspaces, store %s', (kind) => {
  let s: TestServer;
  let fake: FakeGitHub;
  let a: TestWorkspace;
  let b: TestWorkspace;

  beforeAll(async () => {
    fake = await startFakeGitHub({
      installations: [
        { id: A_INSTALLATION, account: 'acme', repositories: ['acme/web', 'acme/api'] },
        { id: B_INSTALLATION, account: 'bigcorp', repositories: ['bigcorp/secret-sauce'] },
      ],
      // octo-a may access A's installation, octo-b B's
      users: { 'octo-a': [A_INSTALLATION], 'octo-b': [B_INSTALLATION] },
    });
    s = await startTestServer(kind, { github: githubIntegration(fake) });
    a = await makeWorkspace(s);
    b = await makeWorkspace(s);
    await linkInstallation(s, fake, b.slug, b.admin, B_INSTALLATION, 'octo-b');
  });
  afterAll(async () => {
    await s.close();
    await fake.close();
  });

  const git = (w: TestWorkspace, project: string) => `/api/workspaces/${w.slug}/projects/${project}/git`;
  const installations = (w: TestWorkspace) => `/api/workspaces/${w.slug}/github/installations`;
  const notLinked = (w: TestWorkspace, id: number) =>
    `GitHub App installation ${String(id)} is not linked to this workspace; an admin links it with POST /api/workspaces/${w.slug}/github/installations/link.`;

  it("refuses tenant A a Git connection with tenant B's installation, even knowing its id, and never asks GitHub for its token", async () => {
    const p = await makeProject(s, a);
    const tokensBefore = fake.calls.length;
    for (const key of [a.owner.key, a.admin.key, a.member.key]) {
      const r = await s.request('POST', git(a, p.slug), { key, body: { repo_full_name: 'bigcorp/secret-sauce', installation_id: B_INSTALLATION } });
      expect(r.status, r.text).toBe(403);
      expect(r.body).toEqual({ success: false, error: notLinked(a, B_INSTALLATION) });
    }
    // nor by changing an existing connection
    expect((await s.request('POST', git(a, p.slug), { key: a.member.key, body: { repo_full_name: 'acme/web' } })).status).toBe(201);
    const put = await s.request('PUT', git(a, p.slug), { key: a.member.key, body: { repo_full_name: 'bigcorp/secret-sauce', installation_id: B_INSTALLATION } });
    expect(put.status, put.text).toBe(403);
    expect(put.body.error).toBe(notLinked(a, B_INSTALLATION));
    const stored = await s.store.db.selectFrom('git_connections').selectAll().where('project_id', '=', p.id).executeTakeFirstOrThrow();
    expect([stored.repo_full_name, Number(stored.installation_id)]).toEqual(['acme/web', 0]);
    // A sees nothing of B's link, and cannot remove it
    expect((await s.request<Installation[]>('GET', installations(a), { key: a.owner.key })).body.data).toEqual([]);
    expect((await s.request('DELETE', `${installations(a)}/${String(B_INSTALLATION)}`, { key: a.owner.key })).status).toBe(404);
    expect((await s.request<Installation[]>('GET', installations(b), { key: b.member.key })).body.data).toEqual([
      { installation_id: B_INSTALLATION, account_login: 'bigcorp', linked_at: expect.any(String) },
    ]);
    expect(fake.calls.length).toBe(tokensBefore);
  });

  it("refuses to link B's installation to A through A's own state: A's GitHub user cannot access it", async () => {
    const { state } = await startLink(s, a.slug, a.admin);
    const r = await setup(s, { installation_id: String(B_INSTALLATION), setup_action: 'install', state, code: fake.codeFor('octo-a') });
    expect(r.status, r.text).toBe(403);
    expect(r.body).toEqual({
      success: false,
      error: `The GitHub account that signed in cannot access installation ${String(B_INSTALLATION)} of this GitHub App, so it cannot be linked.`,
    });
    expect(await s.store.db.selectFrom('github_installations').selectAll().where('workspace_id', '=', a.id).execute()).toEqual([]);
    // without a code there is no proof at all
    const { state: second } = await startLink(s, a.slug, a.admin);
    const bare = await setup(s, { installation_id: String(B_INSTALLATION), setup_action: 'install', state: second });
    expect(bare.status).toBe(400);
    expect(bare.body.error).toMatch(/^GitHub sent no code, so control of the installation cannot be proven/);
  });

  it('refuses a forged state, a state of another Slipway, an expired state and a used one', async () => {
    const { state, install_url, expires_at } = await startLink(s, a.slug, a.admin);
    expect(install_url).toBe(`${fake.htmlUrl}/installations/new?state=${encodeURIComponent(state)}`);
    expect(Date.parse(expires_at) - s.clock.now().getTime()).toBeGreaterThan(59 * 60_000);
    const redirect = (st: string, login = 'octo-a', id = A_INSTALLATION) => setup(s, { installation_id: String(id), setup_action: 'install', state: st, code: fake.codeFor(login) });

    // A's state, rewritten to name workspace B: the signature no longer matches
    const [body = '', mac = ''] = state.split('.');
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = `${Buffer.from(JSON.stringify({ ...claims, w: b.id })).toString('base64url')}.${mac}`;
    const forgedReply = await redirect(forged, 'octo-b', B_INSTALLATION);
    expect(forgedReply.status).toBe(400);
    expect(forgedReply.body.error).toBe(
      'The state is not one this Slipway issued (it is malformed or was altered); start again with POST /api/workspaces/:slug/github/installations/link.',
    );
    for (const junk of ['x', `${body}.`, `${body}.${'A'.repeat(43)}`, '../../etc/passwd']) {
      expect((await redirect(junk)).status, junk).toBe(400);
    }
    // a state signed by another Slipway (another secret key) for the same workspace id
    const other = await startTestServer(kind, { github: githubIntegration(fake) });
    try {
      const ow = await makeWorkspace(other);
      const foreign = await startLink(other, ow.slug, ow.admin);
      const [fb = ''] = foreign.state.split('.');
      const foreignClaims = JSON.parse(Buffer.from(fb, 'base64url').toString('utf8')) as Record<string, unknown>;
      const transplanted = `${Buffer.from(JSON.stringify({ ...foreignClaims, w: a.id })).toString('base64url')}.${foreign.state.split('.')[1] ?? ''}`;
      expect((await redirect(foreign.state)).status).toBe(400);
      expect((await redirect(transplanted)).status).toBe(400);
    } finally {
      await other.close();
    }
    expect(await s.store.db.selectFrom('github_installations').selectAll().where('workspace_id', '=', a.id).execute()).toEqual([]);

    // expired: one hour and a minute later
    const old = await startLink(s, a.slug, a.admin);
    s.clock.advance(61 * 60_000);
    try {
      const late = await redirect(old.state);
      expect(late.status).toBe(400);
      expect(late.body.error).toBe('This link has expired (a state is good for one hour); start again with POST /api/workspaces/:slug/github/installations/link.');
    } finally {
      s.clock.advance(-61 * 60_000);
    }

    // the genuine one works once
    const first = await redirect(state);
    expect(first.status, first.text).toBe(201);
    expect(first.body).toEqual({ success: true, data: { workspace: a.slug, installation_id: A_INSTALLATION, account_login: 'acme', linked_at: expect.any(String) } });
    const again = await redirect(state);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('This link has already been used (or its workspace was deleted); start again with POST /api/workspaces/:slug/github/installations/link.');
    // a code GitHub already exchanged (or never issued) is refused by GitHub
    const fresh = await startLink(s, a.slug, a.admin);
    const badCode = await setup(s, { installation_id: String(A_INSTALLATION), setup_action: 'install', state: fresh.state, code: 'not-a-code' });
    expect(badCode.status).toBe(400);
    expect(badCode.body.error).toBe('GitHub refused the authorization code: it may have expired or been used already. Start the link again.');

    // nothing secret reached the log: the client secret, the codes, the user tokens, the states
    const log = s.logs.join('\n');
    expect(log).not.toContain(fake.clientSecret);
    expect(log).not.toContain(state);
    expect(log).not.toMatch(/ghu_|ghs_|code=[0-9a-f]{20}/);
  });

  it('links only for someone who still is an admin of the workspace', async () => {
    const w = await makeWorkspace(s);
    const { state } = await startLink(s, w.slug, w.admin);
    await s.store.db.updateTable('members').set({ role: 'member' }).where('workspace_id', '=', w.id).where('user_id', '=', w.admin.id).execute();
    const r = await setup(s, { installation_id: String(A_INSTALLATION), setup_action: 'install', state, code: fake.codeFor('octo-a') });
    expect(r.status).toBe(403);
    expect(r.body.error).toBe('The user who started this link is no longer an admin or owner of the workspace.');
    // and a plain member cannot start one
    const member = await s.request('POST', `${installations(w)}/link`, { key: w.member.key });
    expect(member.status).toBe(403);
  });

  it('connects a covered repository of a linked installation, refuses an uncovered one with 400, and stops builds once unlinked', async () => {
    const w = await makeWorkspace(s);
    await linkInstallation(s, fake, w.slug, w.admin, A_INSTALLATION, 'octo-a');
    const p = await makeProject(s, w);
    const covered = await s.request<{ installation_id: number }>('POST', git(w, p.slug), { key: w.member.key, body: { repo_full_name: 'acme/web', installation_id: A_INSTALLATION } });
    expect(covered.status, covered.text).toBe(201);
    expect(covered.body.data?.installation_id).toBe(A_INSTALLATION);

    const q = await makeProject(s, w);
    const uncovered = await s.request('POST', git(w, q.slug), { key: w.member.key, body: { repo_full_name: 'acme/private-elsewhere', installation_id: A_INSTALLATION } });
    expect(uncovered.status).toBe(400);
    expect(uncovered.body.error).toBe(
      `GitHub App installation ${String(A_INSTALLATION)} does not cover the repository acme/private-elsewhere; add the repository to the installation on GitHub, or connect another one.`,
    );
    // B's repository through A's installation: not covered either
    const put = await s.request('PUT', git(w, p.slug), { key: w.member.key, body: { repo_full_name: 'bigcorp/secret-sauce' } });
    expect(put.status).toBe(400);
    expect((await s.request('PUT', git(w, p.slug), { key: w.member.key, body: { repo_full_name: 'acme/api' } })).status).toBe(200);
    expect(await s.store.db.selectFrom('git_connections').select('repo_full_name').where('project_id', '=', q.id).executeTakeFirst()).toBeUndefined();

    // the build's token: restricted to the one repository
    const app = githubIntegration(fake).app;
    const token = await cloneTokenFor(s.store.repos, app, { workspaceId: w.id, installationId: A_INSTALLATION, repoFullName: 'acme/api' });
    expect(fake.calls.at(-1)).toMatchObject({ installationId: String(A_INSTALLATION), status: 201, repositories: ['api'] });
    expect(fake.isValid(token ?? '', A_INSTALLATION, 'acme/api')).toBe(true);
    expect(fake.isValid(token ?? '', A_INSTALLATION, 'acme/web')).toBe(false);

    // unlinked: the list is empty, later builds fail before any token or clone, a new connection is refused
    const del = await s.request<Installation>('DELETE', `${installations(w)}/${String(A_INSTALLATION)}`, { key: w.admin.key });
    expect(del.status).toBe(200);
    expect(del.body.data).toMatchObject({ installation_id: A_INSTALLATION, account_login: 'acme' });
    expect((await s.request<Installation[]>('GET', installations(w), { key: w.member.key })).body.data).toEqual([]);
    const calls = fake.calls.length;
    await expect(cloneTokenFor(s.store.repos, app, { workspaceId: w.id, installationId: A_INSTALLATION, repoFullName: 'acme/api' })).rejects.toThrow(
      `GitHub App installation ${String(A_INSTALLATION)} is no longer linked to this workspace, so acme/api was not fetched; link it again or change the Git connection's installation_id.`,
    );
    expect(fake.calls.length).toBe(calls);
    const r = await makeProject(s, w);
    expect((await s.request('POST', git(w, r.slug), { key: w.member.key, body: { repo_full_name: 'acme/web', installation_id: A_INSTALLATION } })).status).toBe(403);
    // the other tenant's link to its own installation is untouched
    expect((await s.request<Installation[]>('GET', installations(b), { key: b.member.key })).body.data).toHaveLength(1);
  });

  it("drops a workspace's links with the workspace", async () => {
    const w = await makeWorkspace(s);
    await linkInstallation(s, fake, w.slug, w.admin, A_INSTALLATION, 'octo-a');
    await startLink(s, w.slug, w.admin);
    expect(await s.store.db.selectFrom('github_installations').selectAll().where('workspace_id', '=', w.id).execute()).toHaveLength(1);
    expect((await s.request('DELETE', `/api/workspaces/${w.slug}`, { key: w.owner.key })).status).toBe(200);
    expect(await s.store.db.selectFrom('github_installations').selectAll().where('workspace_id', '=', w.id).execute()).toEqual([]);
    expect(await s.store.db.selectFrom('github_link_states').selectAll().where('workspace_id', '=', w.id).execute()).toEqual([]);
  });
});

describe.each(STORE_KINDS)('GitHub App installations without the settings, store %s', (kind) => {
  let s: TestServer;
  let fake: FakeGitHub;
  beforeAll(async () => {
    fake = await startFakeGitHub();
    // the app without its client id and secret: tokens, but no link flow
    s = await startTestServer(kind, { github: githubIntegration(fake, { oauth: false }) });
  });
  afterAll(async () => {
    await s.close();
    await fake.close();
  });

  it('answers 503 with what to set, and still refuses unlinked installations with 403', async () => {
    const w = await makeWorkspace(s);
    const message =
      'Linking GitHub App installations is not configured on this Slipway (set --github-app-id, --github-app-private-key-file, --github-app-client-id and --github-app-client-secret).';
    expect(await s.request('POST', `/api/workspaces/${w.slug}/github/installations/link`, { key: w.admin.key })).toMatchObject({ status: 503, body: { success: false, error: message } });
    expect(await setup(s, { installation_id: '1001', setup_action: 'install', state: 'x.y', code: 'z' })).toMatchObject({ status: 503, body: { error: message } });
    const p = await makeProject(s, w);
    const r = await s.request('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/git`, { key: w.member.key, body: { repo_full_name: 'acme/web', installation_id: 1001 } });
    expect(r.status).toBe(403);
  });
});

describe.each(STORE_KINDS)('slipway admin link-installation, store %s', (kind) => {
  it("links an installation GitHub confirms is the App's, and refuses one it does not know", async () => {
    const fake = await startFakeGitHub({ installations: [{ id: A_INSTALLATION, account: 'acme', repositories: ['acme/web'] }] });
    const db = await freshDatabase(kind);
    try {
      const keyFile = join(db.dir, 'app.pem');
      writeFileSync(keyFile, fake.privateKeyPem, { mode: 0o600 });
      const config = resolveConfig(
        { 'data-dir': db.dir, 'database-url': db.url, 'github-app-id': String(fake.appId), 'github-app-private-key-file': keyFile, 'github-api-url': fake.url },
        {},
        db.dir,
      );
      const store = await createStore(db.url);
      const now = new Date().toISOString();
      try {
        await store.db.insertInto('workspaces').values({ id: 'ws-cli', name: 'cli', slug: 'cli', settings: '{}', created_at: now, updated_at: now }).execute();
      } finally {
        await store.close();
      }
      expect(await linkCli(config, { workspace: 'cli', installationId: String(A_INSTALLATION) })).toEqual({ workspace: 'cli', installationId: A_INSTALLATION, accountLogin: 'acme' });
      await expect(linkCli(config, { workspace: 'cli', installationId: '999' })).rejects.toThrow('GitHub does not know installation 999 of GitHub App');
      await expect(linkCli(config, { workspace: 'nope', installationId: String(A_INSTALLATION) })).rejects.toThrow('There is no workspace "nope".');
      await expect(linkCli(config, { workspace: 'cli', installationId: '1e3' })).rejects.toThrow('--installation-id must be a GitHub App installation id');
      const check = await createStore(db.url);
      try {
        const rows = await check.db.selectFrom('github_installations').select(['workspace_id', 'installation_id', 'account_login']).execute();
        expect(rows.map((r) => [r.workspace_id, Number(r.installation_id), r.account_login])).toEqual([['ws-cli', A_INSTALLATION, 'acme']]);
      } finally {
        await check.close();
      }
    } finally {
      await db.drop();
      await fake.close();
    }
  });
});
