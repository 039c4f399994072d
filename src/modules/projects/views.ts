import type { ProjectRecord } from '../../domain/project.js';
import type { GitConnectionRow } from '../../store/repositories/index.js';
import type { ProjectPolicy } from './policy.js';
import { toNumber } from '../../store/dialects.js';
import type { GitConnection, Project } from './projects.schema.js';
import { defaultDomain, defaultUrl } from './resolve.js';

/** `POST /api/webhooks/github/<id>`, under --public-url when it is set, else the path alone. */
export const webhookUrl = (webhookId: string | null, policy: Pick<ProjectPolicy, 'publicUrl'>): string | null =>
  webhookId === null ? null : `${policy.publicUrl.replace(/\/+$/, '')}/api/webhooks/github/${webhookId}`;

export const gitView = (row: GitConnectionRow, policy: Pick<ProjectPolicy, 'publicUrl'>): GitConnection => ({
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

export function projectView(row: ProjectRecord, _workspaceSlug: string, policy: ProjectPolicy, git: GitConnectionRow | undefined): Project {
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
