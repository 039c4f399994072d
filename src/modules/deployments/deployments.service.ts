import { notFound } from '../../domain/errors.js';
import { resolveProject, type ProjectRef } from '../projects/resolve.js';
import { deploymentView, type DeploymentView } from '../projects/views.js';
import type { Access } from '../tenancy/context.js';
import type { Repositories } from '../../store/repositories/index.js';

export interface DeploymentPage {
  deployments: DeploymentView[];
  total: number;
  page: number;
  limit: number;
}

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

  async get(access: Access, projectSlug: ProjectRef, id: string): Promise<DeploymentView> {
    const { repos } = this;
    const project = await resolveProject(repos, access, projectSlug);
    const row = await repos.deployments.find(project.id, id);
    if (row === undefined) throw notFound('Deployment');
    return deploymentView(row);
  }
}
