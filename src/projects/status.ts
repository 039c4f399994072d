import type { Kysely } from 'kysely';
import { ACTIVE, FINAL, projectStatusOf, type DeploymentStatus } from '../domain/deployment.js';
import type { ProjectStatus } from '../domain/project.js';
import type { DB, DeploymentRow } from '../store/schema.js';

/**
 * Recompute a project's status from its deployments (docs/decisions.md#project-status) and
 * store it. Called after every deployment transition, so the project record never disagrees
 * with its deployments.
 */
export async function refreshProjectStatus(db: Kysely<DB>, projectId: string, now: string): Promise<ProjectStatus> {
  // Each fact by its own query, so that no number of newer deployments (a run of failed
  // deploys) hides the one that is serving or in progress.
  const active = await newestStatus(db, projectId, ACTIVE, 'created_at');
  const running = await db.selectFrom('deployments').select('id').where('project_id', '=', projectId).where('status', '=', 'running').limit(1).executeTakeFirst();
  const serving = running !== undefined;
  // The deployment that ended last decides (a stop after a failed deploy means `stopped`).
  const lastFinal = await newestStatus(db, projectId, FINAL, 'finished_at');
  const current = await db.selectFrom('projects').select('status').where('id', '=', projectId).executeTakeFirst();
  // `crashed` and `suspended` are set by the reconciler and billing; a serving deployment keeps them.
  const status = serving && (current?.status === 'crashed' || current?.status === 'suspended') && active === null ? current.status : projectStatusOf(active, serving, lastFinal);
  await db.updateTable('projects').set({ status, updated_at: now }).where('id', '=', projectId).execute();
  return status;
}

/** The status of the project's newest deployment (by `order`) among `statuses`, or null. */
async function newestStatus(
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

/** The deployment a project serves: its newest `running` one (two overlap only during a switch). */
export function servingDeployment(db: Kysely<DB>, projectId: string): Promise<DeploymentRow | undefined> {
  return db
    .selectFrom('deployments')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('status', '=', 'running')
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
}
