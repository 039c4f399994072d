// The GitHub App client against a real local HTTP server that checks the JWT the way GitHub
// documents it (RS256 signature by the app's key, iss, iat, exp) and issues expiring tokens.
import { generateKeyPairSync, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/clock.js';
import { GitHubApp, GitHubAppError } from '../../src/adapters/git/github-app.js';
import { startFakeGitHub, type FakeGitHub } from '../factories/fake-github.js';
import { closedPort } from '../factories/git-server.js';

const INSTALLATION = 31337;
const OTHER_INSTALLATION = 7;

/** A clock the test moves by hand; the app and the fake GitHub read the same one. */
class ManualClock implements Clock {
  constructor(private ms: number) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

let clock: ManualClock;
let github: FakeGitHub;

beforeAll(async () => {
  clock = new ManualClock(Date.parse('2026-11-20T10:00:00.000Z'));
  github = await startFakeGitHub({ appId: 987654, installations: [INSTALLATION, OTHER_INSTALLATION], clock });
});

afterAll(async () => {
  await github.close();
});

const makeApp = (opts: { clock?: Clock; privateKey?: string; appId?: number; apiUrl?: string } = {}) =>
  new GitHubApp({
    appId: opts.appId ?? github.appId,
    privateKey: opts.privateKey ?? github.privateKeyPem,
    apiUrl: opts.apiUrl ?? github.url,
    clock: opts.clock ?? clock,
  });

async function failure(p: Promise<unknown>): Promise<GitHubAppError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof GitHubAppError) return err;
    throw err;
  }
  throw new Error('expected a GitHubAppError');
}

const decode = (part: string): Record<string, unknown> => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;

describe('the app JWT', () => {
  it('is RS256, signed by the app key, issued 60 s in the past and good for at most 10 minutes', () => {
    const jwt = makeApp().appJwt();
    const [h, p, s] = jwt.split('.') as [string, string, string];
    expect(decode(h)).toEqual({ alg: 'RS256', typ: 'JWT' });
    const now = clock.now().getTime() / 1000;
    const claims = decode(p);
    expect(claims).toEqual({ iss: github.appId, iat: now - 60, exp: expect.any(Number) });
    const exp = claims['exp'] as number;
    expect(exp).toBeGreaterThan(now);
    expect(exp - now).toBeLessThanOrEqual(600);
    expect(exp - (now - 60)).toBeLessThanOrEqual(600);
    expect(verify('RSA-SHA256', Buffer.from(`${h}.${p}`), github.publicKey, Buffer.from(s, 'base64url'))).toBe(true);
  });
});

describe('installation tokens', () => {
  it('exchanges the installation id for a token, with the documented headers', async () => {
    const before = github.calls.length;
    const token = await makeApp().installationToken(INSTALLATION);
    expect(token.token).toMatch(/^ghs_/);
    expect(token.expiresAt.getTime()).toBe(clock.now().getTime() + 60 * 60_000);
    expect(github.isValid(token.token, INSTALLATION)).toBe(true);
    const calls = github.calls.slice(before);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      installationId: String(INSTALLATION),
      status: 201,
      headers: { accept: 'application/vnd.github+json', apiVersion: '2022-11-28', userAgent: 'slipway' },
      claims: { iss: github.appId },
    });
    expect(calls[0]?.rejected).toBeUndefined();
  });

  it('caches a token until shortly before it expires, then fetches a new one', async () => {
    const own = new ManualClock(clock.now().getTime());
    const fake = await startFakeGitHub({ installations: [INSTALLATION, OTHER_INSTALLATION], clock: own });
    try {
      const app = new GitHubApp({ appId: fake.appId, privateKey: fake.privateKeyPem, apiUrl: fake.url, clock: own, refreshBeforeMs: 5 * 60_000 });
      const first = await app.installationToken(INSTALLATION);
      own.advance(54 * 60_000);
      expect(await app.installationToken(INSTALLATION)).toEqual(first);
      expect(fake.calls).toHaveLength(1);

      // 5 minutes or less of life left: refreshed, and the new token is the one kept
      own.advance(60_000);
      const second = await app.installationToken(INSTALLATION);
      expect(second.token).not.toBe(first.token);
      expect(second.expiresAt.getTime()).toBeGreaterThan(first.expiresAt.getTime());
      expect(await app.installationToken(INSTALLATION)).toEqual(second);
      expect(fake.calls).toHaveLength(2);

      // per installation, and forget() drops one
      const other = await app.installationToken(OTHER_INSTALLATION);
      expect(other.token).not.toBe(second.token);
      expect(fake.isValid(other.token, OTHER_INSTALLATION)).toBe(true);
      expect(fake.calls).toHaveLength(3);
      app.forget(INSTALLATION);
      const third = await app.installationToken(INSTALLATION);
      expect(third.token).not.toBe(second.token);
      expect(fake.calls).toHaveLength(4);
    } finally {
      await fake.close();
    }
  });

  it('shares one request among concurrent callers', async () => {
    const app = makeApp();
    const before = github.calls.length;
    const tokens = await Promise.all([1, 2, 3, 4, 5].map(() => app.installationToken(OTHER_INSTALLATION)));
    expect(new Set(tokens.map((t) => t.token)).size).toBe(1);
    expect(github.calls.length - before).toBe(1);
  });

  it('says when the installation does not exist', async () => {
    const err = await failure(makeApp().installationToken(555));
    expect(err.code).toBe('installation_not_found');
    expect(err.message).toBe('GitHub App installation 555 was not found: the app may have been uninstalled, or the installation belongs to another app.');
    expect(github.calls.at(-1)).toMatchObject({ installationId: '555', status: 404 });
  });

  it('is refused with another key, another app id, or a clock too far behind', async () => {
    const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const cases: [GitHubApp, string][] = [
      [makeApp({ privateKey: otherKey }), 'bad signature'],
      [makeApp({ appId: 111 }), 'wrong iss'],
      [makeApp({ clock: new ManualClock(clock.now().getTime() - 20 * 60_000) }), 'expired'],
      [makeApp({ clock: new ManualClock(clock.now().getTime() + 20 * 60_000) }), 'issued in the future'],
    ];
    for (const [app, reason] of cases) {
      const err = await failure(app.installationToken(INSTALLATION));
      expect(err.code).toBe('unauthorized');
      expect(err.message).toMatch(/^GitHub rejected the credentials of GitHub App \d+: check the app id and the private key, and the server's clock\. GitHub says: "A JSON web token could not be decoded"\.$/);
      expect(github.calls.at(-1)).toMatchObject({ status: 401, rejected: reason });
    }
  });

  it('says when the API cannot be reached', async () => {
    const port = await closedPort();
    const err = await failure(makeApp({ apiUrl: `http://127.0.0.1:${port}` }).installationToken(INSTALLATION));
    expect(err.code).toBe('unreachable');
    expect(err.message).toBe(`The GitHub API at http://127.0.0.1:${port} could not be reached (ECONNREFUSED).`);
  });

  it('stops waiting when the caller cancels', async () => {
    const err = await failure(makeApp().installationToken(INSTALLATION, { signal: AbortSignal.abort() }));
    expect(err.code).toBe('cancelled');
  });

  it('checks its settings and arguments', async () => {
    expect(() => new GitHubApp({ appId: 1, privateKey: 'not a key' })).toThrow('The GitHub App private key could not be read');
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    expect(() => new GitHubApp({ appId: 1, privateKey: ec })).toThrow('The GitHub App private key must be an RSA private key in PEM form.');
    expect(() => new GitHubApp({ appId: 'abc', privateKey: github.privateKeyPem })).toThrow('The GitHub App id must be');
    expect((await failure(makeApp().installationToken(0))).code).toBe('invalid');
    expect((await failure(makeApp().installationToken(1.5))).code).toBe('invalid');
  });

  it('restricts a token to one repository the installation covers, and refuses one it does not cover', async () => {
    const fake = await startFakeGitHub({ installations: [{ id: INSTALLATION, account: 'acme', repositories: ['acme/one', 'acme/two'] }], clock });
    try {
      const app = new GitHubApp({ appId: fake.appId, privateKey: fake.privateKeyPem, apiUrl: fake.url, clock });
      const one = await app.installationToken(INSTALLATION, { repository: 'one' });
      expect(fake.calls.at(-1)).toMatchObject({ status: 201, repositories: ['one'] });
      expect(fake.isValid(one.token, INSTALLATION, 'acme/one')).toBe(true);
      expect(fake.isValid(one.token, INSTALLATION, 'acme/two')).toBe(false);
      // cached per repository: another repository gets its own token
      expect(await app.installationToken(INSTALLATION, { repository: 'one' })).toEqual(one);
      const two = await app.installationToken(INSTALLATION, { repository: 'two' });
      expect(two.token).not.toBe(one.token);
      const err = await failure(app.installationToken(INSTALLATION, { repository: 'secret' }));
      expect(err.code).toBe('repository_not_covered');
      expect(err.message).toBe(`GitHub App installation ${INSTALLATION} does not cover the repository secret: add it to the installation's repositories on GitHub.`);
      // forget() drops every token of the installation
      app.forget(INSTALLATION);
      expect((await app.installationToken(INSTALLATION, { repository: 'one' })).token).not.toBe(one.token);
    } finally {
      await fake.close();
    }
  });

  it('tells which repositories an installation covers, and the app page installations start from', async () => {
    const repos = Array.from({ length: 150 }, (_, i) => `acme/repo-${String(i)}`);
    const fake = await startFakeGitHub({ installations: [{ id: INSTALLATION, account: 'acme', repositories: repos }], clock });
    try {
      const app = new GitHubApp({ appId: fake.appId, privateKey: fake.privateKeyPem, apiUrl: fake.url, clock });
      expect(await app.covers(INSTALLATION, 'acme/repo-3')).toBe(true);
      // on the second page, and case-insensitively
      expect(await app.covers(INSTALLATION, 'ACME/Repo-149')).toBe(true);
      expect(await app.covers(INSTALLATION, 'acme/repo-150')).toBe(false);
      expect(await app.covers(INSTALLATION, 'other/repo-3')).toBe(false);
      expect((await failure(app.covers(OTHER_INSTALLATION, 'acme/repo-3'))).code).toBe('installation_not_found');
      // a cached token GitHub revoked: covers() fetches a fresh one and answers
      const calls = fake.calls.length;
      for (const t of [...fake.issued.keys()]) fake.issued.delete(t);
      expect(await app.covers(INSTALLATION, 'acme/repo-3')).toBe(true);
      expect(fake.calls.length).toBe(calls + 1);
      expect(await app.appInfo()).toEqual({ htmlUrl: fake.htmlUrl, slug: 'slipway-test' });
      expect(fake.requests).toContain('GET /app 200');
    } finally {
      await fake.close();
    }
  });
});
