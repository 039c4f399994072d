import { notFound } from '../../domain/errors.js';
import { resolveProject, type ProjectRef } from '../projects/resolve.js';
import type { Deployment, DeploymentPage } from './deployments.schema.js';
import type { Access } from '../../domain/access.js';
import type { DeploymentRow, Repositories } from '../../store/repositories/index.js';

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

/** Reading deployments; creating them (deploy, redeploy, rollback) is the orchestrator's. */
export class DeploymentService {
  constructor(private readonly repos: Pick<Repositories, 'projects' | 'deployments'>) {}

  /** Newest first. */
  async list(access: Access, projectSlug: ProjectRef, page: number, limit: number): Promise<DeploymentPage> {
    const { repos } = this;
    const project = await resolveProject(repos, access, projectSlug);
    const [rows, total] = await Promise.all([repos.deployments.page(project.id, limit, (page - 1) * limit), repos.deployments.count(project.id)]);
    return { deployments: rows.map(deploymentView), total, page, limit };
  }

  async get(access: Access, projectSlug: ProjectRef, id: string): Promise<Deployment> {
    const { repos } = this;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.deployments.find(project.id, id);
    if (row === undefined) throw notFound('Deployment');
    return deploymentView(row);
  }
}
