// A GitHub App's credentials → installation access tokens, the documented way:
// https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app
// https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app
import { createPrivateKey, createSign, type KeyObject } from 'node:crypto';
import { systemClock, type Clock } from '../../domain/clock.js';

export type GitHubAppErrorCode =
  | 'invalid'
  /** GitHub rejected the app's JWT: wrong app id or private key, or a clock far off */
  | 'unauthorized'
  | 'installation_not_found'
  /** the installation does not cover a repository the token was asked for */
  | 'repository_not_covered'
  /** the installation is suspended or the app lacks the permission */
  | 'forbidden'
  | 'unreachable'
  | 'bad_response'
  | 'cancelled';

/** One sentence, free of secrets (neither the JWT nor a token). */
export class GitHubAppError extends Error {
  constructor(
    readonly code: GitHubAppErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'GitHubAppError';
  }
}

export interface GitHubAppOptions {
  /** the App ID from the app's settings page (the JWT's `iss`) */
  appId: string | number;
  /** the app's private key, PEM (GitHub hands out PKCS#1 `BEGIN RSA PRIVATE KEY`; PKCS#8 works too) */
  privateKey: string | KeyObject;
  /** default https://api.github.com; GitHub Enterprise Server: `https://HOST/api/v3` */
  apiUrl?: string | undefined;
  clock?: Clock | undefined;
  /** a token is fetched anew once less than this is left of its life; default 5 minutes */
  refreshBeforeMs?: number | undefined;
  /** per request to GitHub; default 30 s */
  timeoutMs?: number | undefined;
  /** GitHub refuses requests without a User-Agent */
  userAgent?: string | undefined;
  fetch?: typeof fetch | undefined;
}

export interface InstallationToken {
  token: string;
  expiresAt: Date;
}

export const GITHUB_API_URL = 'https://api.github.com';
const API_VERSION = '2022-11-28';
// GitHub: "iat 60 seconds in the past to allow for clock drift", "exp no more than 10 minutes
// into the future". Nine minutes from now keeps exp − iat at ten minutes exactly.
const IAT_SKEW_S = 60;
const JWT_LIFETIME_S = 9 * 60;

/**
 * Installation tokens of one GitHub App, cached per installation until shortly before they
 * expire (they live one hour). Concurrent callers for one installation share one request.
 */
export class GitHubApp {
  private readonly appId: string;
  private readonly key: KeyObject;
  private readonly apiUrl: string;
  private readonly clock: Clock;
  private readonly refreshBeforeMs: number;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly fetch: typeof fetch;
  /** by `<installation>` (every repository) or `<installation>/<repository name>` (one) */
  private readonly cache = new Map<string, InstallationToken & { installationId: number }>();
  private readonly pending = new Map<string, Promise<InstallationToken>>();
  private info: Promise<AppInfo> | undefined;

  constructor(opts: GitHubAppOptions) {
    this.appId = String(opts.appId).trim();
    if (!/^[1-9][0-9]*$/.test(this.appId) && !/^Iv[0-9A-Za-z.]+$/.test(this.appId)) {
      throw new GitHubAppError('invalid', 'The GitHub App id must be the numeric App ID (or the client ID) from the app settings.');
    }
    this.key = parsePrivateKey(opts.privateKey);
    this.apiUrl = (opts.apiUrl ?? GITHUB_API_URL).replace(/\/+$/, '');
    if (!/^https?:\/\//.test(this.apiUrl)) throw new GitHubAppError('invalid', 'The GitHub API URL must be an http(s):// URL.');
    this.clock = opts.clock ?? systemClock;
    this.refreshBeforeMs = opts.refreshBeforeMs ?? 5 * 60_000;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.userAgent = opts.userAgent ?? 'slipway';
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  /** The app's own JWT (RS256), for the `/app` endpoints. */
  appJwt(): string {
    const now = Math.floor(this.clock.now().getTime() / 1000);
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
    // a numeric App ID goes as a number, a client ID ("Iv1.…") as a string
    const iss = /^[0-9]+$/.test(this.appId) ? Number(this.appId) : this.appId;
    const payload = base64url(JSON.stringify({ iat: now - IAT_SKEW_S, exp: now + JWT_LIFETIME_S, iss }));
    const signature = createSign('RSA-SHA256').update(`${header}.${payload}`).sign(this.key);
    return `${header}.${payload}.${base64url(signature)}`;
  }

  /**
   * An installation token: for every repository the installation covers, or (`repository`, a
   * repository name without its owner) restricted to that one repository, as GitHub documents
   * (`repositories` of POST /app/installations/{id}/access_tokens). The cached one while it has
   * life left.
   */
  async installationToken(
    installationId: number,
    opts: { signal?: AbortSignal | undefined; repository?: string | undefined } = {},
  ): Promise<InstallationToken> {
    if (!Number.isSafeInteger(installationId) || installationId <= 0) {
      throw new GitHubAppError('invalid', `The GitHub App installation id must be a positive whole number (got ${String(installationId)}).`);
    }
    const repository = opts.repository?.toLowerCase();
    const key = repository === undefined ? String(installationId) : `${String(installationId)}/${repository}`;
    const cached = this.cache.get(key);
    if (cached !== undefined && cached.expiresAt.getTime() - this.refreshBeforeMs > this.clock.now().getTime()) return { token: cached.token, expiresAt: cached.expiresAt };
    let request = this.pending.get(key);
    if (request === undefined) {
      request = this.request(installationId, repository).then((token) => {
        this.cache.set(key, { ...token, installationId });
        return token;
      });
      const shared = request;
      void shared.finally(() => this.pending.delete(key)).catch(() => undefined);
      this.pending.set(key, shared);
    }
    // one caller giving up must not fail the others waiting on the same request
    return opts.signal === undefined ? request : abortable(request, opts.signal, installationId);
  }

  /** Drops the cached tokens of an installation, e.g. after git reported one refused. */
  forget(installationId: number): void {
    for (const [key, t] of this.cache) if (t.installationId === installationId) this.cache.delete(key);
  }

  /** The app itself (GET /app with the JWT): its web page, under which installations start. */
  async appInfo(): Promise<AppInfo> {
    this.info ??= this.appRequest('/app', { authorization: `Bearer ${this.appJwt()}` }, 'the app').then((body) => {
      const htmlUrl = body['html_url'];
      if (typeof htmlUrl !== 'string' || !/^https?:\/\//.test(htmlUrl)) throw new GitHubAppError('bad_response', "GitHub's answer for GET /app carried no html_url.");
      return { htmlUrl: htmlUrl.replace(/\/+$/, ''), slug: typeof body['slug'] === 'string' ? body['slug'] : '' };
    });
    const info = this.info;
    // a failure is not remembered: the next caller asks again
    info.catch(() => {
      if (this.info === info) this.info = undefined;
    });
    return info;
  }

  /** One installation of this app (GET /app/installations/{id} with the JWT): the account it is on. */
  async installation(installationId: number): Promise<{ id: number; accountLogin: string }> {
    if (!Number.isSafeInteger(installationId) || installationId <= 0) {
      throw new GitHubAppError('invalid', `The GitHub App installation id must be a positive whole number (got ${String(installationId)}).`);
    }
    const body = await this.appRequest(`/app/installations/${String(installationId)}`, { authorization: `Bearer ${this.appJwt()}` }, `installation ${String(installationId)} of GitHub App ${this.appId}`);
    const account = typeof body['account'] === 'object' && body['account'] !== null ? (body['account'] as Record<string, unknown>) : {};
    return { id: installationId, accountLogin: typeof account['login'] === 'string' ? account['login'] : '' };
  }

  /**
   * Whether the installation covers `owner/name` (GET /installation/repositories with an
   * installation token, every page). Repository names compare case-insensitively, as on GitHub.
   */
  async covers(installationId: number, repoFullName: string, opts: { signal?: AbortSignal | undefined } = {}): Promise<boolean> {
    try {
      return await this.listCovers(installationId, repoFullName, opts);
    } catch (err) {
      // a cached token GitHub no longer takes (revoked): once more with a fresh one
      if (!(err instanceof GitHubAppError && err.code === 'unauthorized')) throw err;
      this.forget(installationId);
      return this.listCovers(installationId, repoFullName, opts);
    }
  }

  private async listCovers(installationId: number, repoFullName: string, opts: { signal?: AbortSignal | undefined }): Promise<boolean> {
    const wanted = repoFullName.toLowerCase();
    const { token } = await this.installationToken(installationId, opts);
    for (let page = 1; page <= MAX_PAGES; page++) {
      const body = await this.appRequest(`/installation/repositories?per_page=100&page=${String(page)}`, { authorization: `token ${token}` }, `installation ${String(installationId)}`);
      const repos = body['repositories'];
      if (!Array.isArray(repos)) throw new GitHubAppError('bad_response', `GitHub's list of the repositories of installation ${String(installationId)} carried no repositories.`);
      for (const r of repos as unknown[]) {
        const name = typeof r === 'object' && r !== null ? (r as Record<string, unknown>)['full_name'] : undefined;
        if (typeof name === 'string' && name.toLowerCase() === wanted) return true;
      }
      const total = typeof body['total_count'] === 'number' ? body['total_count'] : 0;
      if (repos.length < 100 || page * 100 >= total) return false;
    }
    return false;
  }

  /** A GET to the API; the JSON object answered, or a GitHubAppError naming `what`. */
  private async appRequest(path: string, auth: { authorization: string }, what: string): Promise<Record<string, unknown>> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await this.fetch(`${this.apiUrl}${path}`, {
        headers: { accept: 'application/vnd.github+json', ...auth, 'x-github-api-version': API_VERSION, 'user-agent': this.userAgent },
        signal: timeout,
      });
    } catch (err) {
      const why = timeout.aborted ? `no answer within ${String(this.timeoutMs / 1000)} s` : causeOf(err);
      throw new GitHubAppError('unreachable', `The GitHub API at ${this.apiUrl} could not be reached (${why}).`);
    }
    const body = parseJson(await res.text().catch(() => ''));
    const says = typeof body?.['message'] === 'string' ? ` GitHub says: "${body['message'].slice(0, 200)}".` : '';
    if (res.status === 401) throw new GitHubAppError('unauthorized', `GitHub rejected the credentials of GitHub App ${this.appId} for ${what}: check the app id and the private key, and the server's clock.${says}`);
    if (res.status === 403) throw new GitHubAppError('forbidden', `GitHub refused access to ${what}.${says}`);
    if (res.status === 404) throw new GitHubAppError('installation_not_found', `GitHub does not know ${what}.${says}`);
    if (res.status !== 200 || body === undefined) throw new GitHubAppError('bad_response', `GitHub answered ${String(res.status)} when asked about ${what}.${says}`);
    return body;
  }

  private async request(installationId: number, repository: string | undefined): Promise<InstallationToken> {
    const url = `${this.apiUrl}/app/installations/${installationId}/access_tokens`;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await this.fetch(url, {
        method: 'POST',
        headers: {
          accept: 'application/vnd.github+json',
          authorization: `Bearer ${this.appJwt()}`,
          'x-github-api-version': API_VERSION,
          'user-agent': this.userAgent,
          ...(repository === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(repository === undefined ? {} : { body: JSON.stringify({ repositories: [repository] }) }),
        signal: timeout,
      });
    } catch (err) {
      const why = timeout.aborted ? `no answer within ${this.timeoutMs / 1000} s` : causeOf(err);
      throw new GitHubAppError('unreachable', `The GitHub API at ${this.apiUrl} could not be reached (${why}).`);
    }
    const text = await res.text().catch(() => '');
    const body = parseJson(text);
    const says = typeof body?.['message'] === 'string' ? ` GitHub says: "${body['message'].slice(0, 200)}".` : '';
    switch (res.status) {
      case 201:
      case 200:
        break;
      case 401:
        throw new GitHubAppError('unauthorized', `GitHub rejected the credentials of GitHub App ${this.appId}: check the app id and the private key, and the server's clock.${says}`);
      case 403:
        throw new GitHubAppError('forbidden', `GitHub refused a token for installation ${installationId}: the installation may be suspended or lack permission.${says}`);
      case 404:
        throw new GitHubAppError('installation_not_found', `GitHub App installation ${installationId} was not found: the app may have been uninstalled, or the installation belongs to another app.`);
      case 422:
        if (repository !== undefined) {
          throw new GitHubAppError('repository_not_covered', `GitHub App installation ${installationId} does not cover the repository ${repository}: add it to the installation's repositories on GitHub.`);
        }
        throw new GitHubAppError('bad_response', `GitHub answered 422 when asked for a token of installation ${installationId}.${says}`);
      default:
        throw new GitHubAppError('bad_response', `GitHub answered ${res.status} when asked for a token of installation ${installationId}.${says}`);
    }
    const token = body?.['token'];
    const expiresAt = typeof body?.['expires_at'] === 'string' ? new Date(body['expires_at']) : undefined;
    if (typeof token !== 'string' || token === '' || expiresAt === undefined || Number.isNaN(expiresAt.getTime())) {
      throw new GitHubAppError('bad_response', `GitHub's answer for installation ${installationId} carried no token and expiry.`);
    }
    return { token, expiresAt };
  }
}

/** What GET /app tells of the app. */
export interface AppInfo {
  /** `https://github.com/apps/<slug>`: installations start at `<htmlUrl>/installations/new` */
  htmlUrl: string;
  slug: string;
}

/** Pages of 100 read from GET /installation/repositories before giving up (10,000 repositories). */
const MAX_PAGES = 100;

function abortable<T>(work: Promise<T>, signal: AbortSignal, installationId: number): Promise<T> {
  const cancelled = () => new GitHubAppError('cancelled', `The request for a token of installation ${installationId} was cancelled.`);
  if (signal.aborted) return Promise.reject(cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => { reject(cancelled()); };
    signal.addEventListener('abort', onAbort, { once: true });
    void work.then(resolve, reject).finally(() => { signal.removeEventListener('abort', onAbort); });
  });
}

function parsePrivateKey(key: string | KeyObject): KeyObject {
  let parsed: KeyObject;
  try {
    parsed = typeof key === 'string' ? createPrivateKey({ key, format: 'pem' }) : key;
  } catch {
    throw new GitHubAppError('invalid', 'The GitHub App private key could not be read: it must be the PEM file downloaded from the app settings.');
  }
  if (parsed.type !== 'private' || parsed.asymmetricKeyType !== 'rsa') {
    throw new GitHubAppError('invalid', 'The GitHub App private key must be an RSA private key in PEM form.');
  }
  return parsed;
}

const base64url = (data: string | Buffer): string => Buffer.from(data).toString('base64url');

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** fetch's TypeError says only "fetch failed"; the reason is in its cause. */
function causeOf(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  if (cause instanceof Error) {
    const code = 'code' in cause && typeof cause.code === 'string' ? cause.code : undefined;
    return code ?? cause.message;
  }
  return String(cause);
}
