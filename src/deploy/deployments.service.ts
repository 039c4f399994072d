import { notFound } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import { resolveProject } from '../projects/resolve.js';
import { deploymentView, type DeploymentView } from '../projects/views.js';
import { toNumber } from '../store/dialects.js';
import type { Access } from '../tenancy/context.js';

export interface DeploymentPage {
  deployments: DeploymentView[];
  total: number;
  page: number;
  limit: number;
}

/** Reading deployments; creating them (deploy, redeploy, rollback) is the orchestrator's. */
export class DeploymentService {
  constructor(private readonly deps: Deps) {}

  /** Newest first. */
  async list(access: Access, projectSlug: string, page: number, limit: number): Promise<DeploymentPage> {
    const { db } = this.deps.store;
    const project = await resolveProject(db, access, projectSlug);
    const [rows, count] = await Promise.all([
      db
        .selectFrom('deployments')
        .selectAll()
        .where('project_id', '=', project.id)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit)
        .offset((page - 1) * limit)
        .execute(),
      db.selectFrom('deployments').select(db.fn.countAll<string | number>().as('n')).where('project_id', '=', project.id).executeTakeFirstOrThrow(),
    ]);
    return { deployments: rows.map(deploymentView), total: toNumber(count.n), page, limit };
  }

  async get(access: Access, projectSlug: string, id: string): Promise<DeploymentView> {
    const { db } = this.deps.store;
    const project = await resolveProject(db, access, projectSlug);
    const row = await db.selectFrom('deployments').selectAll().where('project_id', '=', project.id).where('id', '=', id).executeTakeFirst();
    if (row === undefined) throw notFound('Deployment');
    return deploymentView(row);
  }
}
