// GitHub App installations bound to workspaces. An installation is linked to a workspace only by
// the app's setup-URL flow, with proof that the person linking controls it: Slipway hands out a
// signed, single-use `state`; GitHub sends the browser back to the setup URL with the
// installation id, that state and (with "Request user authorization (OAuth) during installation"
// on) a code; the code is exchanged for the user's token, and only an installation listed by
// GET /user/installations for that user is linked. The installation id of the redirect alone
// proves nothing: anyone can type one (GitHub's docs warn of this).
// https://docs.github.com/en/apps/creating-github-apps/registering-a-github-app/about-the-setup-url
import { timingSafeEqual } from 'node:crypto';
import { GitHubAppError, type GitHubApp } from '../../adapters/git/github-app.js';
import { iso, type Clock, type Random } from '../../domain/clock.js';
import { AppError, forbidden, invalid, notFound } from '../../domain/errors.js';
import { atLeast, isRole } from '../../domain/roles.js';
import { toNumber } from '../../store/dialects.js';
import type { InstallationRow, Repositories } from '../../store/repositories/index.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { Access } from '../../domain/access.js';
import type { GitHubOAuth } from './oauth.js';
import type { Installation, LinkedInstallation, LinkStart } from './github.schema.js';

/** What `serve` builds from the `--github-app-*` settings. */
export interface GitHubIntegration {
  app: GitHubApp;
  /** the app's OAuth client (client id and secret); null: installations cannot be linked */
  oauth: GitHubOAuth | null;
}

export interface SetupQuery {
  installation_id?: string | undefined;
  setup_action?: string | undefined;
  state?: string | undefined;
  code?: string | undefined;
}

/** A state is good for this long after POST …/github/installations/link. */
export const STATE_TTL_MS = 60 * 60_000;
const STATE_PURPOSE = 'github installation link state v1';

export const NOT_CONFIGURED =
  'Linking GitHub App installations is not configured on this Slipway (set --github-app-id, --github-app-private-key-file, --github-app-client-id and --github-app-client-secret).';
const START_AGAIN = 'start again with POST /api/workspaces/:slug/github/installations/link';

interface StatePayload {
  /** workspace id */
  w: string;
  /** user id of the admin who started the link */
  u: string;
  /** nonce, the key of its github_link_states row */
  n: string;
  /** expiry, ms since the epoch */
  e: number;
}

const view = (row: InstallationRow): Installation => ({
  installation_id: toNumber(row.installation_id),
  account_login: row.account_login,
  linked_at: row.created_at,
});

/** The link flow and the list of a workspace's linked installations. */
export class GitHubInstallationService {
  constructor(
    private readonly repos: Pick<Repositories, 'installations' | 'members'>,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly secrets: Pick<SecretBox, 'mac'>,
    /** the GitHub App (`--github-app-*`); absent: installations cannot be linked */
    private readonly github: GitHubIntegration | undefined,
  ) {}

  /** `POST /api/workspaces/:slug/github/installations/link` (admin): a fresh state and where to send the browser. */
  async startLink(access: Access): Promise<LinkStart> {
    const { github } = this;
    if (github?.oauth == null) throw new AppError('UNAVAILABLE', NOT_CONFIGURED);
    const info = await github.app.appInfo().catch((err: unknown) => {
      // the App's settings or GitHub, never the caller's doing
      throw err instanceof GitHubAppError ? new AppError('UNAVAILABLE', err.message) : err;
    });
    const now = this.clock.now();
    const expires = new Date(now.getTime() + STATE_TTL_MS);
    const nonce = this.random.bytes(18).toString('base64url');
    await this.repos.installations.addState({ nonce, workspace_id: access.workspace.id, user_id: access.caller.user.id, expires_at: iso(expires) }, iso(now));
    const state = this.sign({ w: access.workspace.id, u: access.caller.user.id, n: nonce, e: expires.getTime() });
    return { install_url: `${info.htmlUrl}/installations/new?state=${encodeURIComponent(state)}`, state, expires_at: iso(expires) };
  }

  /**
   * `GET /api/github/setup` (no key): where GitHub sends the browser back. Links the installation
   * to the state's workspace once the state is good and unused, the admin who asked still is
   * one, and GitHub says the user of `code` may access the installation.
   */
  async completeSetup(q: SetupQuery): Promise<LinkedInstallation> {
    const github = this.github;
    if (github?.oauth == null) throw new AppError('UNAVAILABLE', NOT_CONFIGURED);
    if (q.state === undefined || q.state === '') throw invalid(`The state parameter is missing: ${START_AGAIN}, and install the app from the URL it answers.`);
    const state = this.verify(q.state);
    if (state === null) throw invalid(`The state is not one this Slipway issued (it is malformed or was altered); ${START_AGAIN}.`);
    const { repos } = this;
    const now = this.clock.now();
    if (state.e <= now.getTime()) throw invalid(`This link has expired (a state is good for one hour); ${START_AGAIN}.`);
    if (q.setup_action === 'request') {
      throw invalid('The installation was requested and waits for an owner of the GitHub account to approve it; once it is installed, link it again.');
    }
    if (q.installation_id === undefined || !/^[1-9][0-9]{0,15}$/.test(q.installation_id) || !Number.isSafeInteger(Number(q.installation_id))) {
      throw invalid('The installation_id parameter must be the positive whole number GitHub sends to the setup URL.');
    }
    const installationId = Number(q.installation_id);
    if (q.code === undefined || q.code === '') {
      throw invalid('GitHub sent no code, so control of the installation cannot be proven: the GitHub App must have "Request user authorization (OAuth) during installation" turned on.');
    }
    // Single use: the row is removed by the one request that gets to delete it.
    if (!(await repos.installations.consumeState({ nonce: state.n, workspace_id: state.w, user_id: state.u }))) {
      throw invalid(`This link has already been used (or its workspace was deleted); ${START_AGAIN}.`);
    }
    const membership = await repos.members.access(state.w, state.u);
    if (membership === undefined) throw notFound('Workspace');
    if (!isRole(membership.role) || !atLeast(membership.role, 'admin')) {
      throw forbidden('The user who started this link is no longer an admin or owner of the workspace.');
    }

    let accountLogin: string;
    try {
      const userToken = await github.oauth.exchangeCode(q.code);
      const found = (await github.oauth.userInstallations(userToken)).find((i) => i.id === installationId);
      if (found === undefined) {
        throw forbidden(`The GitHub account that signed in cannot access installation ${String(installationId)} of this GitHub App, so it cannot be linked.`);
      }
      accountLogin = found.accountLogin;
    } catch (err) {
      throw fromGitHub(err);
    }

    const row: InstallationRow = { workspace_id: state.w, installation_id: installationId, account_login: accountLogin, linked_by: state.u, created_at: iso(now) };
    await repos.installations.link(row);
    const stored = await repos.installations.find(state.w, installationId);
    if (stored === undefined) throw new Error(`installation ${String(installationId)} not found after linking it`);
    return { workspace: membership.workspace.slug, ...view(stored) };
  }

  async list(access: Access): Promise<Installation[]> {
    const rows = await this.repos.installations.list(access.workspace.id);
    return rows.map(view);
  }

  /** Unlinks; later builds of connections that name the installation fail without cloning. */
  async unlink(access: Access, installationId: number): Promise<Installation> {
    const { installations } = this.repos;
    const row = await installations.find(access.workspace.id, installationId);
    if (row === undefined) throw notFound('GitHub App installation');
    await installations.unlink(access.workspace.id, installationId);
    return view(row);
  }

  private sign(p: StatePayload): string {
    const body = Buffer.from(JSON.stringify(p), 'utf8').toString('base64url');
    return `${body}.${this.secrets.mac(STATE_PURPOSE, body).toString('base64url')}`;
  }

  private verify(state: string): StatePayload | null {
    const m = /^([A-Za-z0-9_-]{1,1000})\.([A-Za-z0-9_-]{43})$/.exec(state);
    if (m === null) return null;
    const [, body = '', mac = ''] = m;
    const expected = this.secrets.mac(STATE_PURPOSE, body);
    const given = Buffer.from(mac, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    try {
      const p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Partial<StatePayload>;
      if (typeof p.w !== 'string' || typeof p.u !== 'string' || typeof p.n !== 'string' || typeof p.e !== 'number') return null;
      return { w: p.w, u: p.u, n: p.n, e: p.e };
    } catch {
      return null;
    }
  }
}

/**
 * A Git connection's installation (create and update): linked to the connection's own workspace
 * (403), and (when `checkCoverage`) covering the repository, asked of GitHub (400).
 */
export async function checkConnectionInstallation(
  repos: Pick<Repositories, 'installations'>,
  github: GitHubIntegration | undefined,
  access: Access,
  installationId: number,
  repoFullName: string,
  checkCoverage: boolean,
): Promise<void> {
  if (installationId === 0) return;
  if (!(await repos.installations.isLinked(access.workspace.id, installationId))) {
    throw forbidden(
      `GitHub App installation ${String(installationId)} is not linked to this workspace; an admin links it with POST /api/workspaces/${access.workspace.slug}/github/installations/link.`,
    );
  }
  if (!checkCoverage) return;
  if (github === undefined) throw new AppError('UNAVAILABLE', 'No GitHub App is configured on this Slipway, so a Git connection cannot use an installation (set installation_id to 0).');
  let covered: boolean;
  try {
    covered = await github.app.covers(installationId, repoFullName);
  } catch (err) {
    throw fromGitHub(err);
  }
  if (!covered) {
    throw invalid(`GitHub App installation ${String(installationId)} does not cover the repository ${repoFullName}; add the repository to the installation on GitHub, or connect another one.`);
  }
}

/**
 * The token a build clones a Git connection's repository with: none for installation 0 (public
 * repositories); otherwise the installation must still be linked to the project's workspace,
 * and the token is restricted to that one repository. Throws a one-sentence Error otherwise,
 * before anything is cloned.
 */
export async function cloneTokenFor(
  from: Pick<Repositories, 'installations'>,
  app: GitHubApp | undefined,
  conn: { workspaceId: string; installationId: number; repoFullName: string },
  signal?: AbortSignal,
): Promise<string | undefined> {
  const { installationId, repoFullName } = conn;
  if (installationId === 0) return undefined;
  if (!(await from.installations.isLinked(conn.workspaceId, installationId))) {
    throw new Error(`GitHub App installation ${String(installationId)} is no longer linked to this workspace, so ${repoFullName} was not fetched; link it again or change the Git connection's installation_id.`);
  }
  if (app === undefined) throw new Error(`No GitHub App is configured on this Slipway, so installation ${String(installationId)} cannot fetch ${repoFullName}.`);
  const repository = repoFullName.split('/')[1] ?? repoFullName;
  return (await app.installationToken(installationId, { repository, signal })).token;
}

/** GitHub's failures as API errors: the user's fault → 400/403, GitHub's or the operator's → 503. */
function fromGitHub(err: unknown): unknown {
  if (!(err instanceof GitHubAppError)) return err;
  switch (err.code) {
    case 'installation_not_found':
    case 'repository_not_covered':
    case 'invalid':
      // a bad code (exchange), an installation GitHub does not know, a repository it does not cover
      return invalid(err.message);
    case 'unauthorized':
    case 'forbidden':
    case 'unreachable':
    case 'bad_response':
    case 'cancelled':
      // the App's credentials, GitHub's state or the network: not the caller's doing
      return new AppError('UNAVAILABLE', err.message);
  }
}
