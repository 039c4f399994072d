// The user side of a GitHub App, the documented way: the code GitHub hands to the setup URL when
// "Request user authorization (OAuth) during installation" is on is exchanged for a user access
// token, which lists the app's installations that user may access.
// https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app
// https://docs.github.com/en/rest/apps/installations#list-app-installations-accessible-to-the-user-access-token
import { GitHubAppError } from '../../adapters/git/github-app.js';

export interface GitHubOAuthOptions {
  clientId: string;
  /** never logged, never put in an error message */
  clientSecret: string;
  /** https://github.com, or the GitHub Enterprise Server's web address */
  webUrl: string;
  /** https://api.github.com, or `https://HOST/api/v3` */
  apiUrl: string;
  timeoutMs?: number | undefined;
  userAgent?: string | undefined;
  fetch?: typeof fetch | undefined;
}

export interface UserInstallation {
  id: number;
  /** the account the app is installed on (a user or an organization) */
  accountLogin: string;
}

const API_VERSION = '2022-11-28';
const MAX_PAGES = 100;

export class GitHubOAuth {
  private readonly webUrl: string;
  private readonly apiUrl: string;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly fetch: typeof fetch;

  constructor(private readonly opts: GitHubOAuthOptions) {
    this.webUrl = opts.webUrl.replace(/\/+$/, '');
    this.apiUrl = opts.apiUrl.replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.userAgent = opts.userAgent ?? 'slipway';
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  /**
   * POST <web>/login/oauth/access_token with the app's client id and secret: the user access
   * token, or a GitHubAppError ('unauthorized' when GitHub refused the code).
   */
  async exchangeCode(code: string): Promise<string> {
    const body = await this.call(`${this.webUrl}/login/oauth/access_token`, 'GitHub (sign-in)', {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json', 'user-agent': this.userAgent },
      body: JSON.stringify({ client_id: this.opts.clientId, client_secret: this.opts.clientSecret, code }),
    });
    // GitHub answers 200 with an `error` field when the code is bad, expired or used.
    const error = body['error'];
    if (typeof error === 'string') {
      if (error === 'incorrect_client_credentials') {
        throw new GitHubAppError('forbidden', 'GitHub refused the GitHub App client id or client secret configured on this Slipway (--github-app-client-id, --github-app-client-secret).');
      }
      throw new GitHubAppError('invalid', 'GitHub refused the authorization code: it may have expired or been used already. Start the link again.');
    }
    const token = body['access_token'];
    if (typeof token !== 'string' || token === '') throw new GitHubAppError('bad_response', "GitHub's answer to the code exchange carried no access token.");
    return token;
  }

  /** Every installation of this app that the user of `userToken` may access (GET /user/installations, every page). */
  async userInstallations(userToken: string): Promise<UserInstallation[]> {
    const out: UserInstallation[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const body = await this.call(`${this.apiUrl}/user/installations?per_page=100&page=${String(page)}`, 'the GitHub API', {
        headers: { accept: 'application/vnd.github+json', authorization: `Bearer ${userToken}`, 'x-github-api-version': API_VERSION, 'user-agent': this.userAgent },
      });
      const list = body['installations'];
      if (!Array.isArray(list)) throw new GitHubAppError('bad_response', "GitHub's list of the user's installations carried no installations.");
      for (const item of list as unknown[]) {
        if (typeof item !== 'object' || item === null) continue;
        const i = item as Record<string, unknown>;
        const account = typeof i['account'] === 'object' && i['account'] !== null ? (i['account'] as Record<string, unknown>) : {};
        if (typeof i['id'] === 'number' && Number.isSafeInteger(i['id'])) {
          out.push({ id: i['id'], accountLogin: typeof account['login'] === 'string' ? account['login'] : '' });
        }
      }
      const total = typeof body['total_count'] === 'number' ? body['total_count'] : 0;
      if (list.length < 100 || page * 100 >= total) break;
    }
    return out;
  }

  private async call(url: string, what: string, init: RequestInit): Promise<Record<string, unknown>> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await this.fetch(url, { ...init, signal: timeout });
    } catch {
      throw new GitHubAppError('unreachable', `${what} at ${new URL(url).origin} could not be reached${timeout.aborted ? ` within ${String(this.timeoutMs / 1000)} s` : ''}.`);
    }
    let body: unknown;
    try {
      body = JSON.parse(await res.text());
    } catch {
      body = undefined;
    }
    if (res.status === 401) throw new GitHubAppError('unauthorized', 'GitHub refused the user access token.');
    if (res.status !== 200 || typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new GitHubAppError('bad_response', `${what} answered ${String(res.status)} to ${new URL(url).pathname}.`);
    }
    return body as Record<string, unknown>;
  }
}
