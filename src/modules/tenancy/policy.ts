import { conflict, forbidden } from '../../domain/errors.js';
import type { Repositories } from '../../store/repositories/index.js';

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
  /** databases a workspace may hold, those of its template instances included (`--max-databases-per-workspace`) */
  maxDatabasesPerWorkspace: number;
  /**
   * MiB of memory all tenants' containers may reserve on this installation (`--max-reserved-memory`,
   * set in GiB; the configuration's default is the host's memory): work that would reserve more
   * is refused with 409. 0 here: no bound.
   */
  maxReservedMemoryMb: number;
}

export const DEFAULT_TENANT_LIMITS: TenantLimits = { maxWorkspacesPerUser: 10, maxProjectsPerWorkspace: 50, maxDatabasesPerWorkspace: 10, maxReservedMemoryMb: 0 };

/** A new workspace's wallet (`--currency`, `--starting-credit`: minor units, for a verified owner's first workspace). */
export interface StartingWallet {
  currency: string;
  credit: number;
}

/** How invitations travel (docs/decisions.md#invitations). */
export interface InvitationPolicy {
  /** without a mailer: whether the create response carries the token (`--invitation-token-in-response`) */
  tokenInResponse: boolean;
  /** `--public-url`: the API's address, named in the e-mail; empty: the e-mail asks the inviter for it */
  publicUrl: string;
}

/**
 * Inside the transaction that creates a workspace for `userId`: refuses (403) when the user
 * has already created as many workspaces (that still exist) as the limit allows. Creations are
 * counted, not owner memberships: otherwise two accounts could create without end (create, make
 * the other an owner, step down, create again). The user's row is locked first, so that
 * concurrent creations by one user count one after the other (SQLite has one writer anyway).
 * The caller records the creation in `workspace_creators` in the same transaction.
 */
export async function holdWorkspaceRoom(limits: TenantLimits, tx: Pick<Repositories, 'workspaces'>, userId: string): Promise<void> {
  const max = limits.maxWorkspacesPerUser;
  if (max === 0) return;
  const n = await tx.workspaces.lockAndCountCreatedBy(userId);
  if (n >= max) {
    throw forbidden(
      `You have already created ${n.toString()} workspaces, the most a user may create on this installation (--max-workspaces-per-user, SLIPWAY_MAX_WORKSPACES_PER_USER = ${max.toString()}); delete one you no longer need, or ask the operator.`,
    );
  }
}

/** Inside the transaction that creates a project: refuses (403) a workspace that holds as many as the limit allows. */
export async function holdProjectRoom(limits: TenantLimits, tx: Pick<Repositories, 'projects'>, workspaceId: string): Promise<void> {
  const max = limits.maxProjectsPerWorkspace;
  if (max === 0) return;
  const n = await tx.projects.lockAndCountIn(workspaceId);
  if (n >= max) {
    throw forbidden(
      `This workspace already holds ${n.toString()} projects, the most a workspace may hold on this installation (--max-projects-per-workspace, SLIPWAY_MAX_PROJECTS_PER_WORKSPACE = ${max.toString()}); delete one you no longer need, or ask the operator.`,
    );
  }
}

/**
 * Inside the transaction that creates a database (directly, or a template instance's): refuses
 * (403) a workspace that holds as many databases as the limit allows, whatever made them.
 */
export async function holdDatabaseRoom(limits: TenantLimits, tx: Pick<Repositories, 'databases'>, workspaceId: string): Promise<void> {
  const max = limits.maxDatabasesPerWorkspace;
  if (max === 0) return;
  const n = await tx.databases.lockAndCountIn(workspaceId);
  if (n >= max) {
    throw forbidden(
      `This workspace already holds ${n.toString()} databases (those of template instances included), the most a workspace may hold on this installation (--max-databases-per-workspace, SLIPWAY_MAX_DATABASES_PER_WORKSPACE = ${max.toString()}); delete one you no longer need, or ask the operator.`,
    );
  }
}

/** "1.5 GiB", "512 MiB" */
const formatMb = (mb: number): string => (mb >= 1024 ? `${String(Math.round((mb / 1024) * 1000) / 1000)} GiB` : `${mb.toString()} MiB`);

/**
 * Before work that starts containers (a database, a deploy, redeploy, rollback, restart, a
 * resize, a template instance's deploy): refuses (409) when the memory they reserve, `needMb`
 * for the resource `resourceId` (its present reservation is replaced, not added to), would take
 * what all tenants' containers reserve on this installation past `--max-reserved-memory`. The
 * figure of the others is not shown: it is the sum of every tenant's work.
 */
export async function holdMemoryRoom(limits: TenantLimits, repos: Pick<Repositories, 'capacity'>, resourceId: string | null, needMb: number): Promise<void> {
  const max = limits.maxReservedMemoryMb;
  if (max === 0 || needMb <= 0) return;
  const reserved = await repos.capacity.reservedMemoryMb(resourceId);
  if (reserved + needMb > max) {
    throw conflict(
      `This installation cannot reserve ${formatMb(needMb)} of memory for it now: the containers of all its tenants may reserve at most ${formatMb(max)} together (--max-reserved-memory, SLIPWAY_MAX_RESERVED_MEMORY), and that bound would be passed. Stop or shrink something you run, or ask the operator.`,
    );
  }
}
