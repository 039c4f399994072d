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
  const newestActive = await db
    .selectFrom('deployments')
    .select('status')
    .where('project_id', '=', projectId)
    .where('status', 'in', ACTIVE)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  const active = newestActive?.status ?? null;
  const running = await db.selectFrom('deployments').select('id').where('project_id', '=', projectId).where('status', '=', 'running').limit(1).executeTakeFirst();
  const serving = running !== undefined;
  // The deployment that ended last decides (a stop after a failed deploy means `stopped`).
  const ended = await db
    .selectFrom('deployments')
    .select('status')
    .where('project_id', '=', projectId)
    .where('status', 'in', FINAL)
    .orderBy('finished_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  const lastFinal: DeploymentStatus | null = ended?.status ?? null;
  const current = await db.selectFrom('projects').select('status').where('id', '=', projectId).executeTakeFirst();
  // `crashed` and `suspended` are set by the reconciler and billing; a serving deployment keeps them.
  const status = serving && (current?.status === 'crashed' || current?.status === 'suspended') && active === null ? current.status : projectStatusOf(active, serving, lastFinal);
  await db.updateTable('projects').set({ status, updated_at: now }).where('id', '=', projectId).execute();
  return status;
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
