// GitSource against real Git: `git http-backend` over smart HTTP on loopback, file:// paths, and
// a private repository whose token comes from the fake GitHub App endpoint.
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { GitHubApp } from '../../src/adapters/git/github-app.js';
import { GitSource, gitEnvironment, GitSourceError, type Checkout } from '../../src/adapters/git/git-source.js';
import { startFakeGitHub, type FakeGitHub } from '../factories/fake-github.js';
import { closedPort, git, RepoRoot, startGitServer, startSilentServer, type GitServer } from '../factories/git-server.js';

const INSTALLATION = 1001;

let root: RepoRoot;
let server: GitServer;
let github: FakeGitHub;
let work: string;
const shas: Record<string, string> = {};
/** temp directories of argv recorders */
const scratch: string[] = [];

beforeAll(async () => {
  root = await RepoRoot.create();
  work = await mkdtemp(join(tmpdir(), 'slipway-git-work-'));
  const app = await root.repo('acme/app');
  shas['first'] = await app.commit('First commit', { 'README.md': '# app\n', 'index.html': 'v1\n' });
  shas['second'] = await app.commit('Second commit\n\nWith a body line.', { 'index.html': 'v2\n' });
  shas['feature'] = await app.commit('Feature work', { 'feature.txt': 'on feature\n' }, 'feature');
  shas['main'] = await app.commit('Third commit', { 'index.html': 'v3\n' }, 'main');

  const plain = await root.repo('acme/plain', { bareSuffix: false });
  shas['plain'] = await plain.commit('Plain repository', { 'hello.txt': 'hi\n' });

  const secret = await root.repo('acme/private');
  shas['private'] = await secret.commit('Private commit', { 'secret.txt': 'classified\n' });

  github = await startFakeGitHub({ installations: [INSTALLATION] });
  // what GitHub does: a private repository answers 401 unless the installation token is sent
  server = await startGitServer({
    root: root.dir,
    authorize: (credentials, repoPath) =>
      repoPath !== 'acme/private.git' || (credentials?.username === 'x-access-token' && github.isValid(credentials.password, INSTALLATION)),
  });
});

afterAll(async () => {
  await server.close();
  await github.close();
  await root.dispose();
  await Promise.all([work, ...scratch].map((d) => rm(d, { recursive: true, force: true })));
});

const source = (baseUrl = server.url, extra: { git?: string } = {}) => new GitSource({ baseUrl, ...extra });

async function failure(p: Promise<unknown>): Promise<GitSourceError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof GitSourceError) return err;
    throw err;
  }
  throw new Error('expected a GitSourceError');
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

const installationToken = async (): Promise<string> => {
  const app = new GitHubApp({ appId: github.appId, privateKey: github.privateKeyPem, apiUrl: github.url });
  return (await app.installationToken(INSTALLATION)).token;
};

describe('over smart HTTP', () => {
  it('clones a branch shallowly and reports its head commit', async () => {
    const out = await source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, keepGitDir: true });
    expect(out.commitSha).toBe(shas['main']);
    expect(out.commitMessage).toBe('Third commit');
    expect(out.dir.startsWith(work)).toBe(true);
    expect(await readFile(join(out.dir, 'index.html'), 'utf8')).toBe('v3\n');
    // depth 1: one commit of history, and only the asked branch
    expect((await git(['rev-list', '--count', 'HEAD'], out.dir)).trim()).toBe('1');
    expect((await git(['rev-parse', '--is-shallow-repository'], out.dir)).trim()).toBe('true');
    const remoteBranches = (await git(['branch', '--remotes', '--format=%(refname:short)'], out.dir)).trim().split('\n');
    expect(remoteBranches.filter((b) => b !== 'origin/HEAD' && b !== 'origin')).toEqual(['origin/main']);
    expect(server.requests.some((r) => r.url.startsWith('/acme/app.git/info/refs'))).toBe(true);
  });

  it('clones another branch, and each fetch gets a fresh directory', async () => {
    const a = await source().fetch({ repoFullName: 'acme/app', branch: 'feature', workDir: work });
    const b = await source().fetch({ repoFullName: 'acme/app', branch: 'feature', workDir: work });
    expect(a.commitSha).toBe(shas['feature']);
    expect(a.commitMessage).toBe('Feature work');
    expect(await readFile(join(a.dir, 'feature.txt'), 'utf8')).toBe('on feature\n');
    expect(b.dir).not.toBe(a.dir);
  });

  it('keeps the full commit message, body included', async () => {
    const out = await source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: shas['second'] });
    expect(out.commitSha).toBe(shas['second']);
    expect(out.commitMessage).toBe('Second commit\n\nWith a body line.');
    expect(await readFile(join(out.dir, 'index.html'), 'utf8')).toBe('v2\n');
  });

  it('with requireHead, fetches a pushed commit only while it is the head of its branch, leaving no directory otherwise', async () => {
    const before = await readdir(work);
    // A push webhook's old commit (replayed, or overtaken by a newer push): refused before any build.
    const stale = await failure(source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: shas['second'], requireHead: true }));
    expect(stale.code).toBe('not_head');
    expect(stale.message).toBe(`${(shas['second'] ?? '').slice(0, 12)} is no longer the head of main (now ${(shas['main'] ?? '').slice(0, 12)}); the newer push deploys it.`);
    expect(await readdir(work)).toEqual(before);
    // The head of another branch is not the head of this one.
    const elsewhere = await failure(source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: shas['feature'], requireHead: true }));
    expect(elsewhere.code).toBe('not_head');
    // The current head is fetched as always.
    const head = await source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: shas['main'], requireHead: true });
    expect(head.commitSha).toBe(shas['main']);
    // Without requireHead (a member's deploy of an explicit commit), an older commit still builds.
    const old = await source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: shas['second'] });
    expect(old.commitSha).toBe(shas['second']);
  });

  it('leaves .git out of the checkout unless asked to keep it', async () => {
    const out = await source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work });
    expect((await readdir(out.dir)).sort()).toEqual(['README.md', 'index.html']);
  });

  it('names an unknown repository, branch or commit', async () => {
    const repo = await failure(source().fetch({ repoFullName: 'acme/nope', branch: 'main', workDir: work }));
    expect(repo.code).toBe('repo_not_found');
    expect(repo.message).toBe(`Repository acme/nope was not found at ${server.url}.`);

    const branch = await failure(source().fetch({ repoFullName: 'acme/app', branch: 'does-not-exist', workDir: work }));
    expect(branch.code).toBe('branch_not_found');
    expect(branch.message).toBe('Branch "does-not-exist" was not found in acme/app.');

    const commit = await failure(source().fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: 'a'.repeat(40) }));
    expect(commit.code).toBe('commit_not_found');
    expect(commit.message).toBe(`Commit ${'a'.repeat(40)} was not found in acme/app.`);
  });

  it('refuses names that are not a repository or a branch before running git', async () => {
    const wrapper = await argvRecorder();
    const s = source(server.url, { git: wrapper.path });
    for (const repoFullName of ['../etc', 'acme', 'acme/../x', 'acme/a b']) {
      expect((await failure(s.fetch({ repoFullName, branch: 'main', workDir: work }))).code).toBe('invalid');
    }
    for (const branch of ['-u', '--upload-pack=touch', 'a..b', 'a b', 'x:y', '']) {
      expect((await failure(s.fetch({ repoFullName: 'acme/app', branch, workDir: work }))).code).toBe('invalid');
    }
    expect((await failure(s.fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, commitSha: 'HEAD~1' }))).code).toBe('invalid');
    expect(await wrapper.lines()).toEqual([]);
  });

  it('says when the host cannot be reached', async () => {
    const port = await closedPort();
    const err = await failure(source(`http://127.0.0.1:${port}`).fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work }));
    expect(err.code).toBe('unreachable');
    expect(err.message).toMatch(new RegExp(`^The Git host http://127\\.0\\.0\\.1:${port} could not be reached: .*connect`));
  });

  it('stops a fetch that outlives its time limit, and one that is cancelled, leaving no directory', async () => {
    const silent = await startSilentServer();
    const dir = await mkdtemp(join(tmpdir(), 'slipway-git-stop-'));
    try {
      const timedOut = await failure(source(silent.url).fetch({ repoFullName: 'acme/app', branch: 'main', workDir: dir, timeoutMs: 300 }));
      expect(timedOut.code).toBe('timed_out');
      expect(timedOut.message).toBe('Fetching acme/app took longer than 300 ms and was stopped.');

      const controller = new AbortController();
      const before = silent.connections();
      const pending = failure(source(silent.url).fetch({ repoFullName: 'acme/app', branch: 'main', workDir: dir, signal: controller.signal }));
      await vi.waitFor(() => {
        expect(silent.connections()).toBeGreaterThan(before);
      });
      controller.abort();
      const cancelled = await pending;
      expect(cancelled.code).toBe('cancelled');
      expect(cancelled.message).toBe('Fetching acme/app was cancelled.');

      const already = await failure(source(silent.url).fetch({ repoFullName: 'acme/app', branch: 'main', workDir: dir, signal: AbortSignal.abort() }));
      expect(already.code).toBe('cancelled');
      expect(await readdir(dir)).toEqual([]);
    } finally {
      await silent.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('from file:// paths', () => {
  it('clones `<base>/<owner>/<name>` or, failing that, `<owner>/<name>.git`, shallowly', async () => {
    const bare = await source(root.fileUrl).fetch({ repoFullName: 'acme/app', branch: 'main', workDir: work, keepGitDir: true });
    expect(bare.commitSha).toBe(shas['main']);
    expect(bare.commitMessage).toBe('Third commit');
    expect((await git(['rev-list', '--count', 'HEAD'], bare.dir)).trim()).toBe('1');

    const plain = await source(root.fileUrl).fetch({ repoFullName: 'acme/plain', branch: 'main', workDir: work });
    expect(plain.commitSha).toBe(shas['plain']);
    expect(await readFile(join(plain.dir, 'hello.txt'), 'utf8')).toBe('hi\n');
    expect(await source(root.fileUrl).remoteUrl('acme/plain')).toBe(`${root.fileUrl}/acme/plain`);
    expect(await source(root.fileUrl).remoteUrl('acme/app')).toBe(`${root.fileUrl}/acme/app.git`);
  });

  it('names an unknown repository and branch', async () => {
    const repo = await failure(source(root.fileUrl).fetch({ repoFullName: 'acme/nope', branch: 'main', workDir: work }));
    expect(repo.code).toBe('repo_not_found');
    expect(repo.message).toBe(`Repository acme/nope was not found at ${root.fileUrl}.`);
    const branch = await failure(source(root.fileUrl).fetch({ repoFullName: 'acme/app', branch: 'nope', workDir: work }));
    expect(branch.code).toBe('branch_not_found');
  });
});

describe('a private repository', () => {
  it('clones with the installation token from the GitHub App endpoint', async () => {
    const token = await installationToken();
    const out = await source().fetch({ repoFullName: 'acme/private', branch: 'main', workDir: work, token });
    expect(out.commitSha).toBe(shas['private']);
    expect(await readFile(join(out.dir, 'secret.txt'), 'utf8')).toBe('classified\n');
    const sent = server.requests.filter((r) => r.url.startsWith('/acme/private.git') && r.status === 200);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((r) => r.authorization === `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`)).toBe(true);
  });

  it('fails without a token, or with a refused one, in a sentence that says so', async () => {
    const none = await failure(source().fetch({ repoFullName: 'acme/private', branch: 'main', workDir: work }));
    expect(none.code).toBe('access_denied');
    expect(none.message).toBe(`Repository acme/private was not found at ${server.url}, or it is private and no access token was given (connect a GitHub App installation).`);

    const bogus = 'ghs_bogus0123456789';
    const refused = await failure(source().fetch({ repoFullName: 'acme/private', branch: 'main', workDir: work, token: bogus }));
    expect(refused.code).toBe('access_denied');
    expect(refused.message).toBe(`${server.url} refused the access token for acme/private: the repository does not exist or the token does not grant access to it.`);
    expect(refused.message).not.toContain(bogus);
  });

  it('never puts the token in argv, the URL, the checkout, the result or an error', async () => {
    const token = await installationToken();
    const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
    const wrapper = await argvRecorder();
    const s = source(server.url, { git: wrapper.path });
    const out: Checkout = await s.fetch({ repoFullName: 'acme/private', branch: 'main', workDir: work, token, keepGitDir: true });
    const errors = [
      await failure(s.fetch({ repoFullName: 'acme/private', branch: 'nope', workDir: work, token })),
      await failure(s.fetch({ repoFullName: 'acme/private', branch: 'main', workDir: work, token, commitSha: 'b'.repeat(40) })),
      await failure(s.fetch({ repoFullName: 'acme/missing', branch: 'main', workDir: work, token })),
    ];
    expect(errors.map((e) => e.code)).toEqual(['branch_not_found', 'commit_not_found', 'repo_not_found']);

    const argv = await wrapper.lines();
    expect(argv.some((l) => l.includes(`clone`) && l.includes(`${server.url}/acme/private.git`))).toBe(true);
    // the header travels as configuration in the environment, scoped to this host
    expect(await wrapper.configKeys()).toContain(`http.${server.url}/.extraHeader`);
    const haystacks = [
      ...argv,
      JSON.stringify(out),
      ...errors.flatMap((e) => [e.message, String(e.stack)]),
      ...server.requests.map((r) => r.url),
      ...(await Promise.all((await filesUnder(out.dir)).map((f) => readFile(f, 'latin1')))),
    ];
    for (const secret of [token, basic]) {
      expect(haystacks.filter((h) => h.includes(secret))).toEqual([]);
    }
  });
});

describe("git's environment", () => {
  it('is minimal: PATH, proxies and CAs from the parent, a scratch HOME, no SLIPWAY_* or GIT_* variable of the parent', () => {
    const parent: NodeJS.ProcessEnv = {
      PATH: '/usr/bin:/bin',
      HOME: '/home/slipway',
      HTTPS_PROXY: 'http://proxy.internal:3128',
      no_proxy: 'localhost',
      SSL_CERT_FILE: '/etc/ssl/ca.pem',
      SLIPWAY_WEBHOOK_SECRET: 'whsec',
      SLIPWAY_DATABASE_URL: 'postgres://u:p@db/slipway',
      AWS_SECRET_ACCESS_KEY: 'aws',
      GIT_DIR: '/elsewhere/.git',
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'core.sshCommand',
      GIT_CONFIG_VALUE_0: 'evil',
      XDG_CONFIG_HOME: '/home/slipway/.config',
      SSH_ASKPASS: '/usr/bin/askpass',
    };
    const env = gitEnvironment(parent, { home: '/tmp/scratch-home', protocol: 'https', config: [['http.https://git.test/.extraHeader', 'Authorization: Basic x']] });
    expect(env).toEqual({
      PATH: '/usr/bin:/bin',
      HTTPS_PROXY: 'http://proxy.internal:3128',
      no_proxy: 'localhost',
      SSL_CERT_FILE: '/etc/ssl/ca.pem',
      HOME: '/tmp/scratch-home',
      LANG: 'C',
      LC_ALL: 'C',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      GIT_ASKPASS: '',
      GIT_ALLOW_PROTOCOL: 'https',
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'http.https://git.test/.extraHeader',
      GIT_CONFIG_VALUE_0: 'Authorization: Basic x',
    });
  });

  it('a real fetch runs git without the SLIPWAY_* variables of the process, in a scratch HOME, and still works', async () => {
    const names = ['SLIPWAY_TEST_SECRET', 'SLIPWAY_WEBHOOK_SECRET'] as const;
    const saved = names.map((n) => process.env[n]);
    process.env['SLIPWAY_TEST_SECRET'] = 'parent-secret-value';
    process.env['SLIPWAY_WEBHOOK_SECRET'] = 'parent-webhook-secret';
    const recorder = await envRecorder();
    try {
      const token = await installationToken();
      const out = await source(server.url, { git: recorder.path }).fetch({ repoFullName: 'acme/private', branch: 'main', workDir: work, token });
      expect(out.commitSha).toBe(shas['private']);
      const env = await recorder.text();
      expect(env).toContain('GIT_CONFIG_NOSYSTEM=1');
      expect(env).not.toMatch(/^SLIPWAY_/m);
      expect(env).not.toContain('parent-secret-value');
      expect(env).not.toContain('parent-webhook-secret');
      const homes = [...env.matchAll(/^HOME=(.*)$/gm)].map((m) => m[1]);
      expect(homes.length).toBeGreaterThan(0);
      expect(homes.every((h) => h !== process.env['HOME'] && h?.includes('slipway-git-home-'))).toBe(true);
    } finally {
      names.forEach((n, i) => {
        const v = saved[i];
        if (v === undefined) Reflect.deleteProperty(process.env, n);
        else process.env[n] = v;
      });
    }
  });
});

/** A git wrapper that appends its whole environment to a log, then runs git. */
async function envRecorder(): Promise<{ path: string; text(): Promise<string> }> {
  const dir = await mkdtemp(join(tmpdir(), 'slipway-git-env-'));
  scratch.push(dir);
  const log = join(dir, 'env.log');
  const path = join(dir, 'git');
  await writeFile(log, '');
  await writeFile(path, `#!/bin/sh\nenv >> '${log}'\nexec git "$@"\n`);
  await chmod(path, 0o755);
  return { path, text: () => readFile(log, 'utf8') };
}

/** A git wrapper that writes each invocation's arguments (and the config keys it was given) to a log, then runs git. */
async function argvRecorder(): Promise<{ path: string; lines(): Promise<string[]>; configKeys(): Promise<string[]> }> {
  const dir = await mkdtemp(join(tmpdir(), 'slipway-git-wrapper-'));
  scratch.push(dir);
  const log = join(dir, 'argv.log');
  const keys = join(dir, 'keys.log');
  const path = join(dir, 'git');
  await writeFile(log, '');
  await writeFile(keys, '');
  await writeFile(path, `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\nprintf '%s\\n' "$GIT_CONFIG_KEY_0" >> '${keys}'\nexec git "$@"\n`);
  await chmod(path, 0o755);
  const read = async (file: string) => (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
  return { path, lines: () => read(log), configKeys: () => read(keys) };
}
