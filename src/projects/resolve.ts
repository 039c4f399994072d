import type { Kysely } from 'kysely';
import { notFound } from '../domain/errors.js';
import type { DB, ProjectsTable } from '../store/schema.js';
import type { Access } from '../tenancy/context.js';

export type ProjectRow = ProjectsTable;

/**
 * The project `:project_slug` of the caller's workspace, or 404. Every project-scoped service
 * starts here, so a slug or id of another workspace's project is never reachable.
 */
export async function resolveProject(db: Kysely<DB>, access: Access, projectSlug: string): Promise<ProjectRow> {
  const row = await db
    .selectFrom('projects')
    .selectAll()
    .where('workspace_id', '=', access.workspace.id)
    .where('slug', '=', projectSlug)
    .executeTakeFirst();
  if (row === undefined) throw notFound('Project');
  return row;
}

/** `<project>-<workspace>.<apps domain>`: the host every project is served at. */
export const defaultDomain = (projectSlug: string, workspaceSlug: string, appsDomain: string): string =>
  `${projectSlug}-${workspaceSlug}.${appsDomain}`;

/** The URL users reach the project at through the router. */
export function defaultUrl(host: string, routerPort: number): string {
  return routerPort === 80 || routerPort === 0 ? `http://${host}` : `http://${host}:${routerPort.toString()}`;
}
