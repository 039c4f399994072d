import { forbidden } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import type { Repositories } from '../store/repositories/index.js';

/**
 * What one user may make through the API (docs/operations.md "Limits"): every workspace costs
 * an engine network and gets the starting credit, every project its containers. 0: no limit.
 * The bootstrap and `slipway admin` write the store directly and are not limited.
 */
export interface TenantLimits {
  /** workspaces a user may have created and not deleted (`--max-workspaces-per-user`) */
  maxWorkspacesPerUser: number;
  /** projects a workspace may hold (`--max-projects-per-workspace`) */
  maxProjectsPerWorkspace: number;
}

export const DEFAULT_TENANT_LIMITS: TenantLimits = { maxWorkspacesPerUser: 10, maxProjectsPerWorkspace: 50 };

const limitsOf = (deps: Deps): TenantLimits => ({ ...DEFAULT_TENANT_LIMITS, ...deps.platform.limits });

/**
 * Inside the transaction that creates a workspace for `userId`: refuses (403) when the user
 * has already created as many workspaces (that still exist) as the limit allows. Creations are
 * counted, not owner memberships: otherwise two accounts could create without end (create, make
 * the other an owner, step down, create again). The user's row is locked first, so that
 * concurrent creations by one user count one after the other (SQLite has one writer anyway).
 * The caller records the creation in `workspace_creators` in the same transaction.
 */
export async function holdWorkspaceRoom(deps: Deps, tx: Repositories, userId: string): Promise<void> {
  const max = limitsOf(deps).maxWorkspacesPerUser;
  if (max === 0) return;
  const n = await tx.workspaces.lockAndCountCreatedBy(userId);
  if (n >= max) {
    throw forbidden(
      `You have already created ${n.toString()} workspaces, the most a user may create on this installation (--max-workspaces-per-user, SLIPWAY_MAX_WORKSPACES_PER_USER = ${max.toString()}); delete one you no longer need, or ask the operator.`,
    );
  }
}

/** Inside the transaction that creates a project: refuses (403) a workspace that holds as many as the limit allows. */
export async function holdProjectRoom(deps: Deps, tx: Repositories, workspaceId: string): Promise<void> {
  const max = limitsOf(deps).maxProjectsPerWorkspace;
  if (max === 0) return;
  const n = await tx.projects.lockAndCountIn(workspaceId);
  if (n >= max) {
    throw forbidden(
      `This workspace already holds ${n.toString()} projects, the most a workspace may hold on this installation (--max-projects-per-workspace, SLIPWAY_MAX_PROJECTS_PER_WORKSPACE = ${max.toString()}); delete one you no longer need, or ask the operator.`,
    );
  }
}
