import type { Kysely } from 'kysely';
import type { DeploymentStatus } from '../../domain/deployment.js';
import type { DB, DeploymentRow } from '../schema.js';
import { Repository } from './repository.js';

// The deployment queries of the project views and the project status. Functions as well as
// methods: src/deploy still calls projects/status.ts with a bare Kysely handle.

/** The status of the project's newest deployment (by `order`) among `statuses`, or null. */
export async function newestDeploymentStatus(
  db: Kysely<DB>,
  projectId: string,
  statuses: readonly DeploymentStatus[],
  order: 'created_at' | 'finished_at',
): Promise<DeploymentStatus | null> {
  const row = await db
    .selectFrom('deployments')
    .select('status')
    .where('project_id', '=', projectId)
    .where('status', 'in', statuses)
    .orderBy(order, 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.status ?? null;
}

/** Whether any deployment of the project is `running`. */
export async function anyRunningDeployment(db: Kysely<DB>, projectId: string): Promise<boolean> {
  const running = await db.selectFrom('deployments').select('id').where('project_id', '=', projectId).where('status', '=', 'running').limit(1).executeTakeFirst();
  return running !== undefined;
}

/** The deployment a project serves: its newest `running` one (two overlap only during a switch). */
export function servingDeploymentOf(db: Kysely<DB>, projectId: string): Promise<DeploymentRow | undefined> {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('status', '=', 'running')
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
}

export class DeploymentRepository extends Repository {
  /** The project's newest deployment, whatever its status. */
  latest(projectId: string): Promise<DeploymentRow | undefined> {
    return this.db
      .selectFrom('deployments')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  serving(projectId: string): Promise<DeploymentRow | undefined> {
    return servingDeploymentOf(this.db, projectId);
  }

  anyRunning(projectId: string): Promise<boolean> {
    return anyRunningDeployment(this.db, projectId);
  }

  newestStatus(projectId: string, statuses: readonly DeploymentStatus[], order: 'created_at' | 'finished_at'): Promise<DeploymentStatus | null> {
    return newestDeploymentStatus(this.db, projectId, statuses, order);
  }
}
