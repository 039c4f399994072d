import type { ProjectPolicy } from './policy.js';
import type { ProjectRecord } from '../../domain/project.js';
import type { DeploymentRow, GitConnectionRow } from '../../store/repositories/index.js';
import { toNumber } from '../../store/dialects.js';
import { defaultDomain, defaultUrl } from './resolve.js';

export interface GitView {
  repo_full_name: string;
  branch: string;
  installation_id: number;
  auto_deploy: boolean;
  dockerfile_path: string;
  root_dir: string;
  created_at: string;
  updated_at: string;
  /** where this connection's repository webhook delivers; its secret is shown only when made */
  webhook_url: string | null;
}

/** `POST /api/webhooks/github/<id>`, under --public-url when it is set, else the path alone. */
export const webhookUrl = (webhookId: string | null, policy: Pick<ProjectPolicy, 'publicUrl'>): string | null =>
  webhookId === null ? null : `${policy.publicUrl.replace(/\/+$/, '')}/api/webhooks/github/${webhookId}`;

export const gitView = (row: GitConnectionRow, policy: Pick<ProjectPolicy, 'publicUrl'>): GitView => ({
  repo_full_name: row.repo_full_name,
  branch: row.branch,
  installation_id: toNumber(row.installation_id),
  auto_deploy: row.auto_deploy === 1,
  dockerfile_path: row.dockerfile_path,
  root_dir: row.root_dir,
  created_at: row.created_at,
  updated_at: row.updated_at,
  webhook_url: webhookUrl(row.webhook_id, policy),
});

export interface ProjectView {
  id: string;
  name: string;
  slug: string;
  status: ProjectRecord['status'];
  port: number;
  replicas: number;
  cpu: string;
  ram: string;
  default_domain: string;
  url: string;
  git: GitView | null;
  created_at: string;
  updated_at: string;
}

export function projectView(row: ProjectRecord, _workspaceSlug: string, policy: ProjectPolicy, git: GitConnectionRow | undefined): ProjectView {
  const domain = defaultDomain(row, policy.appsDomain);
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    status: row.status,
    port: row.port,
    replicas: row.replicas,
    cpu: row.cpu,
    ram: row.ram,
    default_domain: domain,
    url: defaultUrl(domain, policy.routerPort),
    git: git === undefined ? null : gitView(git, policy),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** What the API shows of a deployment: the queue's lease bookkeeping stays inside. */
export type DeploymentView = Omit<DeploymentRow, 'lease_owner' | 'lease_until' | 'attempts' | 'restart_requested_at' | 'require_head'>;

export const deploymentView = (row: DeploymentRow): DeploymentView => ({
  id: row.id,
  project_id: row.project_id,
  status: row.status,
  source: row.source,
  image: row.image,
  branch: row.branch,
  commit_sha: row.commit_sha,
  commit_message: row.commit_message,
  error: row.error,
  created_at: row.created_at,
  started_at: row.started_at,
  finished_at: row.finished_at,
});
