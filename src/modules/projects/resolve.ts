import { notFound } from '../../domain/errors.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { ProjectKind, ProjectRecord } from '../../domain/project.js';
import type { Access } from '../../domain/access.js';

export type ProjectRow = ProjectRecord;

/**
 * A project as a route names it: its slug (a project), or its slug and kind (a template
 * instance, under `/templates/:template_slug`). Project routes never reach instances and
 * template routes never reach projects, though both share the workspace's slugs.
 */
export type ProjectRef = string | { readonly slug: string; readonly kind: ProjectKind };

export const templateRef = (slug: string): ProjectRef => ({ slug, kind: 'template' });

/**
 * The project `:project_slug` (or instance `:template_slug`) of the caller's workspace, or 404.
 * Every project-scoped service starts here, so a slug or id of another workspace's project is
 * never reachable. `from`: the repositories (of a transaction, or the store's).
 */
export async function resolveProject(from: Pick<Repositories, 'projects'>, access: Access, ref: ProjectRef): Promise<ProjectRow> {
  const { slug, kind } = typeof ref === 'string' ? { slug: ref, kind: 'project' } : ref;
  const row = await from.projects.inWorkspace(access.workspace.id, slug);
  if (row?.kind !== kind) throw notFound(kind === 'template' ? 'Template instance' : 'Project');
  return row;
}

/**
 * The first label of a new project's default host, `<project>-<workspace>`. Ambiguous on its own
 * (`shop-api` in `alpha` and `shop` in `api-alpha`): it is stored with the project
 * (`projects.host_label`, uniquely indexed) and a project whose label is taken is refused.
 */
export const defaultHostLabel = (projectSlug: string, workspaceSlug: string): string => `${projectSlug}-${workspaceSlug}`;

/** `<host_label>.<apps domain>`: the host a project is served at, unique platform-wide. */
export const defaultDomain = (project: Pick<ProjectRecord, 'host_label'>, appsDomain: string): string => `${project.host_label}.${appsDomain}`;

/** The URL users reach the project at through the router. */
export function defaultUrl(host: string, routerPort: number): string {
  return routerPort === 80 || routerPort === 0 ? `http://${host}` : `http://${host}:${routerPort.toString()}`;
}
