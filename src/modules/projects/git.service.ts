import { iso, type Clock, type Random } from '../../domain/clock.js';
import { notFound } from '../../domain/errors.js';
import { checkConnectionInstallation, type GitHubIntegration } from '../github/installations.js';
import type { GitConnectionRow, Repositories } from '../../store/repositories/index.js';
import type { SecretBox } from '../../adapters/secrets/secret-box.js';
import type { ProjectPolicy } from './policy.js';
import type { Access } from '../../domain/access.js';
import { resolveProject, type ProjectRef } from './resolve.js';
import type { GitConnection } from './projects.schema.js';
import type { NewGitConnection, RotatedWebhookSecret } from './git.schema.js';
import { gitView, webhookUrl } from './views.js';

export interface GitInput {
  repo_full_name: string;
  branch?: string | undefined;
  installation_id?: number | undefined;
  auto_deploy?: boolean | undefined;
  dockerfile_path?: string | undefined;
  root_dir?: string | undefined;
}

export type GitPatch = Partial<GitInput>;

/** A Git connection as its webhook URL finds it. */
export interface WebhookReceiver {
  projectId: string;
  webhookId: string;
  repoFullName: string;
  branch: string;
  autoDeploy: boolean;
  /** the opened secret; null: none yet, or unreadable under this installation's key */
  secret: string | null;
  unreadable: boolean;
}

/** The sealing context binds a webhook secret to its connection: copied to another row, it does not open. */
export const webhookSecretContext = (projectId: string, webhookId: string): string => `git-webhook:${projectId}:${webhookId}`;

export const GIT_DEFAULTS = { branch: 'main', installation_id: 0, auto_deploy: true, dockerfile_path: 'Dockerfile', root_dir: '' } as const;

/** The Git connection of a project: one per project, shown on the project record. */
export class GitService {
  constructor(
    private readonly repos: Pick<Repositories, 'projects' | 'gitConnections' | 'installations'>,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly secrets: Pick<SecretBox, 'seal' | 'tryOpen'>,
    private readonly policy: Pick<ProjectPolicy, 'publicUrl'>,
    /** the GitHub App (`--github-app-*`), asked whether an installation covers a repository */
    private readonly github: GitHubIntegration | undefined,
  ) {}

  async connect(access: Access, projectSlug: ProjectRef, input: GitInput): Promise<NewGitConnection> {
    const project = await resolveProject(this.repos, access, projectSlug);
    // an installation of this workspace's only, covering the repository (item 3 of issue 9)
    await checkConnectionInstallation(this.repos, this.github, access, input.installation_id ?? GIT_DEFAULTS.installation_id, input.repo_full_name, true);
    const now = iso(this.clock.now());
    const webhookId = this.random.bytes(16).toString('hex');
    const secret = this.newWebhookSecret();
    const row: GitConnectionRow = {
      project_id: project.id,
      repo_full_name: input.repo_full_name,
      branch: input.branch ?? GIT_DEFAULTS.branch,
      installation_id: input.installation_id ?? GIT_DEFAULTS.installation_id,
      auto_deploy: (input.auto_deploy ?? GIT_DEFAULTS.auto_deploy) ? 1 : 0,
      dockerfile_path: input.dockerfile_path ?? GIT_DEFAULTS.dockerfile_path,
      root_dir: normalizeDir(input.root_dir ?? GIT_DEFAULTS.root_dir),
      created_at: now,
      updated_at: now,
      webhook_id: webhookId,
      webhook_secret: this.secrets.seal(secret, webhookSecretContext(project.id, webhookId)),
    };
    // a project connected already: 409 from the repository
    await this.repos.gitConnections.insert(row);
    return { ...gitView(row, this.policy), webhook_secret: secret };
  }

  async update(access: Access, projectSlug: ProjectRef, patch: GitPatch): Promise<GitConnection> {
    const { repos } = this;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.gitConnections.of(project.id);
    if (row === undefined) throw notFound('Git connection');
    const next: GitConnectionRow = {
      ...row,
      ...(patch.repo_full_name === undefined ? {} : { repo_full_name: patch.repo_full_name }),
      ...(patch.branch === undefined ? {} : { branch: patch.branch }),
      ...(patch.installation_id === undefined ? {} : { installation_id: patch.installation_id }),
      ...(patch.auto_deploy === undefined ? {} : { auto_deploy: patch.auto_deploy ? 1 : 0 }),
      ...(patch.dockerfile_path === undefined ? {} : { dockerfile_path: patch.dockerfile_path }),
      ...(patch.root_dir === undefined ? {} : { root_dir: normalizeDir(patch.root_dir) }),
      updated_at: iso(this.clock.now()),
    };
    // The installation must be linked to this workspace; GitHub is asked again whether it covers
    // the repository when either of them changes.
    const changesSource = patch.installation_id !== undefined || patch.repo_full_name !== undefined;
    await checkConnectionInstallation(this.repos, this.github, access, Number(next.installation_id), next.repo_full_name, changesSource);
    // The webhook id and secret are not written back: a rotation meanwhile must stand.
    const { project_id: _id, created_at: _created, webhook_id: _hook, webhook_secret: _secret, ...changes } = next;
    await repos.gitConnections.update(project.id, changes);
    return gitView(next, this.policy);
  }

  async disconnect(access: Access, projectSlug: ProjectRef): Promise<GitConnection> {
    const { repos } = this;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.gitConnections.of(project.id);
    if (row === undefined) throw notFound('Git connection');
    await repos.gitConnections.delete(project.id);
    return gitView(row, this.policy);
  }

  /**
   * A new webhook secret for the connection, answered this once; the old one stops verifying at
   * once. A connection made before per-connection secrets gets its first one (and its webhook
   * id, if it somehow has none) here.
   */
  async rotateWebhookSecret(access: Access, projectSlug: ProjectRef): Promise<RotatedWebhookSecret> {
    const { repos } = this;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.gitConnections.of(project.id);
    if (row === undefined) throw notFound('Git connection');
    const webhookId = row.webhook_id ?? this.random.bytes(16).toString('hex');
    const secret = this.newWebhookSecret();
    const sealedSecret = this.secrets.seal(secret, webhookSecretContext(project.id, webhookId));
    if (!(await repos.gitConnections.setWebhook(project.id, { id: webhookId, sealedSecret, at: iso(this.clock.now()) }))) throw notFound('Git connection');
    return { webhook_url: webhookUrl(webhookId, this.policy) ?? '', webhook_secret: secret };
  }

  /**
   * The connection a repository webhook delivers to, by the id in its URL, with its secret
   * opened: null when no connection has that id; `secret` null when it has none yet, or when
   * this installation's key cannot open it (`unreadable`).
   */
  async webhookReceiver(webhookId: string): Promise<WebhookReceiver | null> {
    const row = await this.repos.gitConnections.byWebhookId(webhookId);
    if (row?.webhook_id == null) return null;
    const secret = row.webhook_secret === null ? null : this.secrets.tryOpen(row.webhook_secret, webhookSecretContext(row.project_id, row.webhook_id));
    return {
      projectId: row.project_id,
      webhookId: row.webhook_id,
      repoFullName: row.repo_full_name,
      branch: row.branch,
      autoDeploy: row.auto_deploy === 1,
      secret,
      unreadable: row.webhook_secret !== null && secret === null,
    };
  }

  /** 32 random bytes in hex: what GitHub's webhook form takes as its secret. */
  private newWebhookSecret(): string {
    return this.random.bytes(32).toString('hex');
  }
}

/** "app/", "./app" and "app" name one directory; the empty string is the repository root. */
const normalizeDir = (dir: string): string => dir.replace(/^(\.\/)+/, '').replace(/\/+$/, '').replace(/^\.$/, '');
