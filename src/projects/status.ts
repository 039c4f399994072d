import { Kysely } from 'kysely';
import { ACTIVE, FINAL, projectStatusOf, type DeploymentStatus } from '../domain/deployment.js';
import type { ProjectStatus } from '../domain/project.js';
import { anyRunningDeployment, newestDeploymentStatus, servingDeploymentOf } from '../store/repositories/deployments.js';
import type { Repositories } from '../store/repositories/index.js';
import { projectStatus, setProjectStatus } from '../store/repositories/projects.js';
import type { DB, DeploymentRow } from '../store/schema.js';

/** The queries the project status needs: the repositories, or (src/deploy, for now) a bare Kysely handle. */
export type StatusSource = Pick<Repositories, 'projects' | 'deployments'> | Kysely<DB>;

interface StatusQueries {
  newestStatus(projectId: string, statuses: readonly DeploymentStatus[], order: 'created_at' | 'finished_at'): Promise<DeploymentStatus | null>;
  anyRunning(projectId: string): Promise<boolean>;
  status(projectId: string): Promise<ProjectStatus | undefined>;
  setStatus(projectId: string, status: ProjectStatus, at: string): Promise<void>;
}

function queries(from: StatusSource): StatusQueries {
  if (!(from instanceof Kysely)) {
    const { deployments, projects } = from;
    return {
      newestStatus: (p, s, o) => deployments.newestStatus(p, s, o),
      anyRunning: (p) => deployments.anyRunning(p),
      status: (p) => projects.status(p),
      setStatus: (p, s, at) => projects.setStatus(p, s, at),
    };
  }
  return {
    newestStatus: (p, s, o) => newestDeploymentStatus(from, p, s, o),
    anyRunning: (p) => anyRunningDeployment(from, p),
    status: (p) => projectStatus(from, p),
    setStatus: (p, s, at) => setProjectStatus(from, p, s, at),
  };
}

/**
 * Recompute a project's status from its deployments (docs/decisions.md#project-status) and
 * store it. Called after every deployment transition, so the project record never disagrees
 * with its deployments.
 */
export async function refreshProjectStatus(from: StatusSource, projectId: string, now: string): Promise<ProjectStatus> {
  const q = queries(from);
  // Each fact by its own query, so that no number of newer deployments (a run of failed
  // deploys) hides the one that is serving or in progress.
  const active = await q.newestStatus(projectId, ACTIVE, 'created_at');
  const serving = await q.anyRunning(projectId);
  // The deployment that ended last decides (a stop after a failed deploy means `stopped`).
  const lastFinal = await q.newestStatus(projectId, FINAL, 'finished_at');
  const current = await q.status(projectId);
  // `crashed` and `suspended` are set by the reconciler and billing; a serving deployment keeps them.
  const status = serving && (current === 'crashed' || current === 'suspended') && active === null ? current : projectStatusOf(active, serving, lastFinal);
  await q.setStatus(projectId, status, now);
  return status;
}

/** The deployment a project serves: its newest `running` one (two overlap only during a switch). */
export function servingDeployment(from: Pick<Repositories, 'deployments'> | Kysely<DB>, projectId: string): Promise<DeploymentRow | undefined> {
  return from instanceof Kysely ? servingDeploymentOf(from, projectId) : from.deployments.serving(projectId);
}
