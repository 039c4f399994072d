import type { Platform } from '../deps.js';
import type { ProjectRecord } from '../../domain/project.js';
import type { DeploymentRow, GitConnectionsTable } from '../../store/schema.js';
import { toNumber } from '../../store/dialects.js';
import type { Deployment } from '../deployments/deployments.schema.js';
import type { GitConnection, Project } from './projects.schema.js';
import { defaultDomain, defaultUrl } from './resolve.js';

/** `POST /api/webhooks/github/<id>`, under --public-url when it is set, else the path alone. */
export const webhookUrl = (webhookId: string | null, platform: Pick<Platform, 'publicUrl'>): string | null =>
  webhookId === null ? null : `${(platform.publicUrl ?? '').replace(/\/+$/, '')}/api/webhooks/github/${webhookId}`;

export const gitView = (row: GitConnectionsTable, platform: Pick<Platform, 'publicUrl'>): GitConnection => ({
  repo_full_name: row.repo_full_name,
  branch: row.branch,
  installation_id: toNumber(row.installation_id),
  auto_deploy: row.auto_deploy === 1,
  dockerfile_path: row.dockerfile_path,
  root_dir: row.root_dir,
  created_at: row.created_at,
  updated_at: row.updated_at,
  webhook_url: webhookUrl(row.webhook_id, platform),
});

export function projectView(row: ProjectRecord, _workspaceSlug: string, platform: Platform, git: GitConnectionsTable | undefined): Project {
  const domain = defaultDomain(row, platform.appsDomain);
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
    url: defaultUrl(domain, platform.routerPort),
    git: git === undefined ? null : gitView(git, platform),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** What the API shows of a deployment: the queue's lease bookkeeping stays inside. */
export const deploymentView = (row: DeploymentRow): Deployment => ({
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
