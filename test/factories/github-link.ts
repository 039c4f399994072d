// The GitHub App of a test server, pointed at the fake GitHub, and the installation link flow as a
// browser goes through it: POST …/github/installations/link, GitHub's installation page (played
// by the fake: the user may access the installation), then GitHub's redirect to the setup URL.
import { GitHubApp } from '../../src/adapters/git/github-app.js';
import type { GitHubIntegration } from '../../src/modules/github/installations.js';
import { GitHubOAuth } from '../../src/modules/github/oauth.js';
import type { FakeGitHub } from './fake-github.js';
import type { Reply, TestServer, TestUser } from './harness.js';

export function githubIntegration(fake: FakeGitHub, opts: { oauth?: boolean } = {}): GitHubIntegration {
  return {
    app: new GitHubApp({ appId: fake.appId, privateKey: fake.privateKeyPem, apiUrl: fake.url }),
    oauth: opts.oauth === false ? null : new GitHubOAuth({ clientId: fake.clientId, clientSecret: fake.clientSecret, webUrl: fake.url, apiUrl: fake.url }),
  };
}

export interface LinkStart {
  install_url: string;
  state: string;
  expires_at: string;
}

export async function startLink(s: TestServer, slug: string, admin: TestUser): Promise<LinkStart> {
  const r = await s.request<LinkStart>('POST', `/api/workspaces/${slug}/github/installations/link`, { key: admin.key });
  if (r.status !== 201 || r.body.data === undefined) throw new Error(`link start: ${String(r.status)} ${r.text}`);
  return r.body.data;
}

/** GitHub's redirect to the setup URL, as the browser follows it. */
export function setup(s: TestServer, q: Record<string, string>): Promise<Reply<{ workspace: string; installation_id: number; account_login: string; linked_at: string }>> {
  return s.request('GET', `/api/github/setup?${new URLSearchParams(q).toString()}`);
}

/** The whole flow: `login` (a GitHub user who may access the installation) installs and comes back. */
export async function linkInstallation(s: TestServer, fake: FakeGitHub, slug: string, admin: TestUser, installationId: number, login = 'octo-admin'): Promise<void> {
  const { state } = await startLink(s, slug, admin);
  fake.grant(login, installationId);
  const r = await setup(s, { installation_id: String(installationId), setup_action: 'install', state, code: fake.codeFor(login) });
  if (r.status !== 201) throw new Error(`setup: ${String(r.status)} ${r.text}`);
}
