import { ACTIVE, FINAL, projectStatusOf } from '../../domain/deployment.js';
import type { ProjectStatus } from '../../domain/project.js';
import type { Repositories } from '../../store/repositories/index.js';

/** The queries the project status needs: the store's repositories, or a transaction's. */
export type StatusSource = Pick<Repositories, 'projects' | 'deployments'>;

/**
 * Recompute a project's status from its deployments (docs/decisions.md#project-status) and
 * store it. Called after every deployment transition, so the project record never disagrees
 * with its deployments.
 */
export async function refreshProjectStatus({ projects, deployments }: StatusSource, projectId: string, now: string): Promise<ProjectStatus> {
  // Each fact by its own query, so that no number of newer deployments (a run of failed
  // deploys) hides the one that is serving or in progress.
  const active = await deployments.newestStatus(projectId, ACTIVE, 'created_at');
  const serving = await deployments.anyRunning(projectId);
  // The deployment that ended last decides (a stop after a failed deploy means `stopped`).
  const lastFinal = await deployments.newestStatus(projectId, FINAL, 'finished_at');
  const current = await projects.status(projectId);
  // `crashed` is set by the reconciler, a serving deployment keeps it; `suspended` is set by
  // billing and kept until a deployment starts (the resume after a top-up, or a deploy).
  const keep = active === null && ((serving && current === 'crashed') || current === 'suspended');
  const status = keep ? current : projectStatusOf(active, serving, lastFinal);
  await projects.setStatus(projectId, status, now);
  return status;
}

