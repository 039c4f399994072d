import { notFound } from '../domain/errors.js';
import type { Repositories } from '../store/repositories/index.js';
import type { ProjectsTable } from '../store/schema.js';
import type { Access } from '../tenancy/context.js';

export type ProjectRow = ProjectsTable;

/**
 * The project `:project_slug` of the caller's workspace, or 404. Every project-scoped service
 * starts here, so a slug or id of another workspace's project is never reachable. `from`: the
 * repositories (of a transaction, or the store's).
 */
export async function resolveProject(from: Pick<Repositories, 'projects'>, access: Access, projectSlug: string): Promise<ProjectRow> {
  const row = await from.projects.inWorkspace(access.workspace.id, projectSlug);
  if (row === undefined) throw notFound('Project');
  return row;
}

/**
 * The first label of a new project's default host, `<project>-<workspace>`. Ambiguous on its own
 * (`shop-api` in `alpha` and `shop` in `api-alpha`): it is stored with the project
 * (`projects.host_label`, uniquely indexed) and a project whose label is taken is refused.
 */
export const defaultHostLabel = (projectSlug: string, workspaceSlug: string): string => `${projectSlug}-${workspaceSlug}`;

/** `<host_label>.<apps domain>`: the host a project is served at, unique platform-wide. */
export const defaultDomain = (project: Pick<ProjectsTable, 'host_label'>, appsDomain: string): string => `${project.host_label}.${appsDomain}`;

/** The URL users reach the project at through the router. */
export function defaultUrl(host: string, routerPort: number): string {
  return routerPort === 80 || routerPort === 0 ? `http://${host}` : `http://${host}:${routerPort.toString()}`;
}
