// A deploy of a private repository through a GitHub App, end to end: the workspace links the
// installation by the setup-URL flow, the connection is checked against the installation's
// repositories, and the orchestrator exchanges the project's installation_id for an installation
// token restricted to the repository at a local stand-in for GitHub's documented endpoint
// (POST /app/installations/{id}/access_tokens, RS256 app JWT), clones with it from a real
// `git http-backend` that accepts only tokens issued for that installation and repository,
// builds on the real Docker Engine and serves the app through the router.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { GitHubApp } from '../../src/adapters/git/index.js';
import { instanceId } from '../../src/store/db.js';
import { startDeployFixture, viaRouter, type DeployFixture, type TestEngine } from '../factories/engine.js';
import { startFakeGitHub, type FakeGitHub } from '../factories/fake-github.js';
import { githubIntegration, linkInstallation } from '../factories/github-link.js';
import type { GitServer, TestRepo } from '../factories/git-server.js';
import type { TestServer, TestWorkspace } from '../factories/harness.js';
import { ensureBaseImage } from '../factories/images.js';
import { STORE_KINDS } from '../factories/stores.js';
import { settledDeployment } from '../factories/deployments.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';

interface GitView {
  repo_full_name: string;
  installation_id: number;
}

/** Above 2^31: installation ids are stored as bigint, which PostgreSQL hands back as a string. */
const INSTALLATION = 3_000_000_017;
/** An installation that is uninstalled after it was linked: the fake GitHub then answers 404. */
const UNKNOWN_INSTALLATION = 3_000_000_099;
const REPO = 'acme/private-site';
const CONTENT = 'private hello, cloned with an installation token';
/** A compact JWT, as the app sends to GitHub: base64url header `{"` … */
const JWT_LIKE = /eyJ[\w-]+\.[\w-]+\.[\w-]+/;

/** The whole build log of a finished deployment, over the API's WebSocket, ending with [END]. */
function buildLogFrames(url: string, key: string): Promise<string[]> {
  return new Promise<string[]>((resolve, reject) => {
    const got: string[] = [];
    const ws = new WebSocket(url, { headers: { 'x-api-key': key } });
    ws.on('message', (m: Buffer) => got.push(m.toString('utf8')));
    ws.on('close', () => {
      resolve(got);
    });
    ws.on('error', reject);
  });
}

/** What git sends for the token (http.extraHeader): `Basic base64(x-access-token:<token>)`. */
const basicFor = (token: string) => `Basic ${Buffer.from(`x-access-token:${token}`, 'utf8').toString('base64')}`;

describe.each(STORE_KINDS)('deploying a private repository through a GitHub App installation token, store %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let fake: FakeGitHub;
  let fx: DeployFixture;
  let repo: TestRepo;
  let sha: string;
  let gitServer: GitServer;
  let routerPort: number;
  let docker: Docker;
  let engine: TestEngine;
  /** every line the orchestrator logged */
  const engineLog: string[] = [];
  const projects = '/api/workspaces/WS/projects';
  const path = (p: string) => p.replace('WS', w.slug);
  const hostOf = (project: string) => `${project}-${w.slug}.apps.test`;
  /** the token the first deployment cloned with, found by the first case */
  let issuedToken = '';

  const waitFor = (project: string, id: string) => settledDeployment<Deployment>(s, w.member.key, path(`${projects}/${project}`), id, 120_000);

  async function deploy(project: string): Promise<Deployment> {
    const r = await s.request<Deployment>('POST', path(`${projects}/${project}/deploy`), { key: w.member.key });
    expect(r.status, r.text).toBe(202);
    expect(r.body.data?.status).toBe('queued');
    return waitFor(project, r.body.data?.id ?? '');
  }

  async function createProject(name: string): Promise<void> {
    const r = await s.request('POST', path(projects), { key: w.member.key, body: { name, port: 8080, cpu: '0.25', ram: '0.125' } });
    expect(r.status, r.text).toBe(201);
  }

  /** Everything about a deployment a user or an operator can see: the API's views, its stored row and its stored build log. */
  async function everythingAbout(project: string, id: string): Promise<{ api: string; row: string; log: string[] }> {
    const one = await s.request('GET', path(`${projects}/${project}/deployments/${id}`), { key: w.member.key });
    const list = await s.request('GET', path(`${projects}/${project}/deployments`), { key: w.member.key });
    const view = await s.request('GET', path(`${projects}/${project}`), { key: w.member.key });
    const row = await s.store.db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    const log = await buildLogFrames(`${s.url.replace('http', 'ws')}${path(`${projects}/${project}/deployments/${id}/logs`)}`, w.member.key);
    return { api: [one.text, list.text, view.text].join('\n'), row: JSON.stringify(row), log };
  }

  beforeAll(async () => {
    docker = new Docker();
    const base = await ensureBaseImage();
    fake = await startFakeGitHub({
      installations: [
        { id: INSTALLATION, account: 'acme', repositories: [REPO] },
        { id: UNKNOWN_INSTALLATION, account: 'acme', repositories: [REPO] },
      ],
    });
    const record = (level: string) => (obj: object, msg: string) => {
      engineLog.push(`${level} ${msg} ${JSON.stringify(obj, (_k, v: unknown) => (v instanceof Error ? `${v.name}: ${v.message}` : v))}`);
    };
    fx = await startDeployFixture(kind, REPO, {
      // The repository is private to the installation: only a token GitHub issued for it, sent
      // the way GitHub expects (user x-access-token), may read it.
      authorize: (c, repoPath) => repoPath === `${REPO}.git` && c?.username === 'x-access-token' && fake.isValid(c.password, INSTALLATION, REPO),
      server: { github: githubIntegration(fake) },
      engine: {
        githubApp: new GitHubApp({ appId: fake.appId, privateKey: fake.privateKeyPem, apiUrl: fake.url }),
        log: {
          info: record('info'),
          warn: record('warn'),
          error: (obj, msg) => {
            record('error')(obj, msg);
            console.error(msg, obj);
          },
        },
      },
    });
    ({ s, w, repo, gitServer, engine } = fx);
    sha = await repo.commit('a private site', {
      Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'index.html': `${CONTENT}\n`,
    });
    routerPort = engine.routerPort;
  }, 120_000);

  afterAll(async () => {
    await fx.close();
    await fake.close();
  }, 60_000);

  it('the Git server refuses the repository without a token, with an unknown one, and with one of another installation', async () => {
    const refs = `${gitServer.url}/${REPO}.git/info/refs?service=git-upload-pack`;
    const status = async (authorization?: string) =>
      (await fetch(refs, authorization === undefined ? {} : { headers: { authorization } })).status;
    expect(await status()).toBe(401);
    expect(await status(basicFor(`ghs_${'0'.repeat(36)}`))).toBe(401);
    // a live token, but GitHub issued it for another installation of the app
    const other = `ghs_${'1'.repeat(36)}`;
    fake.issued.set(other, { installationId: INSTALLATION + 1, expiresAt: new Date(Date.now() + 3_600_000) });
    try {
      expect(await status(basicFor(other))).toBe(401);
    } finally {
      fake.issued.delete(other);
    }
    expect(fake.calls).toEqual([]);
    expect(fake.issued.size).toBe(0);
  });

  it('exchanges installation_id for a token, clones with it, builds, runs and serves the repository', async () => {
    await createProject('private');
    // the installation is linked to the workspace first; without that the connection is refused
    const refused = await s.request<GitView>('POST', path(`${projects}/private/git`), { key: w.member.key, body: { repo_full_name: REPO, installation_id: INSTALLATION } });
    expect(refused.status, refused.text).toBe(403);
    await linkInstallation(s, fake, w.slug, w.admin, INSTALLATION);
    expect(fake.calls).toEqual([]);
    const connected = await s.request<GitView>('POST', path(`${projects}/private/git`), { key: w.member.key, body: { repo_full_name: REPO, installation_id: INSTALLATION } });
    expect(connected.status, connected.text).toBe(201);
    expect(connected.body.data).toMatchObject({ repo_full_name: REPO, installation_id: INSTALLATION });
    // the API asked GitHub whether the installation covers the repository, with an installation token
    expect(fake.calls.map((c) => [c.installationId, c.status, c.repositories])).toEqual([[String(INSTALLATION), 201, undefined]]);
    expect(fake.requests.filter((r) => r.startsWith('GET /installation/repositories'))).toEqual(['GET /installation/repositories 200']);
    const callsBefore = fake.calls.length;
    const issuedBefore = new Set(fake.issued.keys());
    expect((await viaRouter(routerPort, hostOf('private'))).status).toBe(503);
    const gitBefore = gitServer.requests.length;

    const d = await deploy('private');
    expect(d, d.error ?? '').toMatchObject({ status: 'running', source: 'git', error: null, commit_sha: sha });
    expect(await viaRouter(routerPort, hostOf('private'))).toEqual({ status: 200, body: `${CONTENT}\n` });

    // exactly one access_tokens call for the build, for the installation and restricted to the
    // repository, with a JWT GitHub accepts for the app
    expect(fake.calls.slice(callsBefore)).toEqual([
      {
        installationId: String(INSTALLATION),
        status: 201,
        headers: { accept: 'application/vnd.github+json', apiVersion: '2022-11-28', userAgent: 'slipway' },
        claims: { iss: fake.appId, iat: expect.any(Number), exp: expect.any(Number) },
        repositories: ['private-site'],
      },
    ]);
    const built = [...fake.issued.keys()].filter((t) => !issuedBefore.has(t));
    expect(built.map((t) => fake.issued.get(t))).toEqual([{ installationId: INSTALLATION, expiresAt: expect.any(Date), repositories: ['private-site'] }]);
    issuedToken = built[0] ?? '';
    expect(fake.isValid(issuedToken, INSTALLATION)).toBe(true);

    // every request of the clone carried that token, and none was refused
    const clone = gitServer.requests.slice(gitBefore);
    // (protocol v2: the ref advertisement, then ls-refs and fetch as upload-pack POSTs)
    expect(clone[0]?.url).toBe(`/${REPO}.git/info/refs?service=git-upload-pack`);
    expect(clone.length).toBeGreaterThanOrEqual(2);
    expect(clone.slice(1).map((r) => `${r.method} ${r.url}`)).toEqual(clone.slice(1).map(() => `POST /${REPO}.git/git-upload-pack`));
    expect(clone.map((r) => [r.status, r.authorization])).toEqual(clone.map(() => [200, basicFor(issuedToken)]));
  });

  it('never shows the token: not in the build log, the deployment, the project, the image or the engine log', async () => {
    expect(issuedToken).toMatch(/^ghs_[0-9a-f]{36}$/);
    // the pattern below does catch the app's JWT
    expect(new GitHubApp({ appId: fake.appId, privateKey: fake.privateKeyPem, apiUrl: fake.url }).appJwt()).toMatch(JWT_LIKE);
    const basic = basicFor(issuedToken).replace('Basic ', '');
    const list = await s.request<{ deployments: Deployment[] }>('GET', path(`${projects}/private/deployments`), { key: w.member.key });
    const d = list.body.data?.deployments[0];
    expect(d?.status).toBe('running');
    const seen = await everythingAbout('private', d?.id ?? '');
    // the log is the real one: it tells the fetch, the build and the switch
    expect(seen.log[0]).toMatch(new RegExp(`^Fetching ${REPO}@main from http://127\\.0\\.0\\.1:\\d+\\.$`));
    expect(seen.log).toContain(`Commit ${sha.slice(0, 12)}: a private site`);
    expect(seen.log.some((f) => /^Step 1\/\d : FROM /.test(f))).toBe(true);
    expect(seen.log.at(-2)).toBe(`Deployment is live at ${hostOf('private')}.`);
    expect(seen.log.at(-1)).toBe('[END]');
    expect(seen.api).toContain(d?.id ?? 'no deployment');
    expect(seen.row).toContain(sha);

    const image = d?.image ?? '';
    expect(image).toMatch(/^slipway\//);
    const imageFacts = JSON.stringify([await docker.getImage(image).inspect(), await docker.getImage(image).history()]);
    const containers = await docker.listContainers({ filters: { label: [`slipway.instance=${await instanceId(s.store)}`] } });
    expect(containers).toHaveLength(1);
    const containerFacts = JSON.stringify(await Promise.all(containers.map((c) => docker.getContainer(c.Id).inspect())));

    for (const [where, text] of Object.entries({
      'build log': seen.log.join('\n'),
      'API views': seen.api,
      'stored deployment': seen.row,
      image: imageFacts,
      container: containerFacts,
      'engine log': engineLog.join('\n'),
      'server log': s.logs.join('\n'),
    })) {
      expect(text, where).not.toContain(issuedToken);
      expect(text, where).not.toContain(fake.clientSecret);
      expect(text, where).not.toMatch(/ghu_|ghs_/);
      expect(text, where).not.toContain(basic);
      expect(text, where).not.toMatch(JWT_LIKE);
    }
  });

  it('fails a project whose installation was uninstalled on GitHub, with a readable error, and keeps the other app serving', async () => {
    await createProject('orphan');
    await linkInstallation(s, fake, w.slug, w.admin, UNKNOWN_INSTALLATION);
    // connected without an installation first, then pointed at the linked one, which covers the repository
    const connected = await s.request<GitView>('POST', path(`${projects}/orphan/git`), { key: w.member.key, body: { repo_full_name: REPO } });
    expect(connected.status, connected.text).toBe(201);
    expect(connected.body.data?.installation_id).toBe(0);
    const changed = await s.request<GitView>('PUT', path(`${projects}/orphan/git`), { key: w.member.key, body: { installation_id: UNKNOWN_INSTALLATION } });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.data).toMatchObject({ repo_full_name: REPO, installation_id: UNKNOWN_INSTALLATION });
    // then the account owner uninstalls the app
    fake.uninstall(UNKNOWN_INSTALLATION);
    const callsBefore = fake.calls.length;
    const issuedBefore = fake.issued.size;
    const gitBefore = gitServer.requests.length;

    const d = await deploy('orphan');
    expect(d.status).toBe('failed');
    expect(d.error).toBe(
      `GitHub App installation ${UNKNOWN_INSTALLATION} was not found: the app may have been uninstalled, or the installation belongs to another app.`,
    );

    // GitHub was asked once, with valid app credentials: the installation is what it refused
    expect(fake.calls.slice(callsBefore)).toEqual([
      {
        installationId: String(UNKNOWN_INSTALLATION),
        status: 404,
        headers: { accept: 'application/vnd.github+json', apiVersion: '2022-11-28', userAgent: 'slipway' },
        claims: { iss: fake.appId, iat: expect.any(Number), exp: expect.any(Number) },
        repositories: ['private-site'],
      },
    ]);
    expect(fake.issued.size).toBe(issuedBefore);
    // no clone was tried without a token (nor with the other project's)
    expect(gitServer.requests.slice(gitBefore)).toEqual([]);

    const seen = await everythingAbout('orphan', d.id);
    expect(seen.log).toEqual([`Fetching ${REPO}@main from ${gitServer.url}.`, `[failed] ${d.error ?? ''}`, '[END]']);
    for (const [where, text] of Object.entries({ 'build log': seen.log.join('\n'), 'API views': seen.api, 'stored deployment': seen.row, 'engine log': engineLog.join('\n') })) {
      expect(text, where).not.toContain(issuedToken);
      expect(text, where).not.toMatch(/ghs_/);
      expect(text, where).not.toMatch(JWT_LIKE);
      expect(text, where).not.toMatch(/Bearer|PRIVATE KEY/);
    }
    const orphan = await s.request<{ status: string }>('GET', path(`${projects}/orphan`), { key: w.member.key });
    expect(orphan.body.data?.status).toBe('failed');
    expect((await viaRouter(routerPort, hostOf('orphan'))).status).toBe(503);

    // the first project is untouched
    expect(await viaRouter(routerPort, hostOf('private'))).toEqual({ status: 200, body: `${CONTENT}\n` });
    const first = await s.request<{ status: string }>('GET', path(`${projects}/private`), { key: w.member.key });
    expect(first.body.data?.status).toBe('running');
  });

  it('drops a cached token that Git refuses (revoked on GitHub): that deploy fails, the next one gets a fresh token', async () => {
    expect(fake.isValid(issuedToken, INSTALLATION)).toBe(true);
    const callsBefore = fake.calls.length;
    // GitHub revokes the installation token Slipway still holds in its cache.
    fake.issued.delete(issuedToken);
    const refused = await deploy('private');
    expect(refused.status).toBe('failed');
    expect(refused.error).toMatch(/refused the access token/);
    expect(fake.calls.length).toBe(callsBefore);
    // the running deployment keeps serving
    expect(await viaRouter(routerPort, hostOf('private'))).toEqual({ status: 200, body: `${CONTENT}\n` });

    const again = await deploy('private');
    expect(again, again.error ?? '').toMatchObject({ status: 'running', error: null });
    expect(fake.calls.slice(callsBefore).map((c) => [c.installationId, c.status])).toEqual([[String(INSTALLATION), 201]]);
    const fresh = [...fake.issued.keys()].filter((t) => fake.issued.get(t)?.installationId === INSTALLATION && fake.issued.get(t)?.repositories !== undefined);
    expect(fresh).toHaveLength(1);
    expect(fresh[0]).not.toBe(issuedToken);
    expect(await viaRouter(routerPort, hostOf('private'))).toEqual({ status: 200, body: `${CONTENT}\n` });
  });

  it('fails the build of a connection whose installation was unlinked, without asking GitHub or cloning', async () => {
    const unlinked = await s.request('DELETE', path(`/api/workspaces/WS/github/installations/${String(INSTALLATION)}`), { key: w.admin.key });
    expect(unlinked.status, unlinked.text).toBe(200);
    const callsBefore = fake.calls.length;
    const gitBefore = gitServer.requests.length;
    const d = await deploy('private');
    expect(d.status).toBe('failed');
    expect(d.error).toBe(
      `GitHub App installation ${String(INSTALLATION)} is no longer linked to this workspace, so ${REPO} was not fetched; link it again or change the Git connection's installation_id.`,
    );
    expect(fake.calls.length).toBe(callsBefore);
    expect(gitServer.requests.slice(gitBefore)).toEqual([]);
    // the running deployment keeps serving
    expect(await viaRouter(routerPort, hostOf('private'))).toEqual({ status: 200, body: `${CONTENT}\n` });
  });
});
