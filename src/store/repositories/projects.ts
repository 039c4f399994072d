import type { ProjectStatus } from '../../domain/project.js';
import { lockClause, orDuplicate, toNumber } from '../dialects.js';
import type { Insertable } from 'kysely';
import type { ProjectRecord } from '../../domain/project.js';
import type { ProjectsTable } from '../tables/projects.js';
import { PreparedQuery } from '../prepared-query.js';
import type { GitConnectionRow } from './git-connections.js';
import { Repository } from './repository.js';

export type ProjectRow = ProjectRecord;

/** The project and its Git connection in one statement, built once (PreparedQuery): `GET …/projects/:project_slug`. */
const WITH_GIT = new PreparedQuery(2, (db, workspaceId: string, slug: string) =>
  db
    .selectFrom('projects')
    .leftJoin('git_connections as g', 'g.project_id', 'projects.id')
    .selectAll('projects')
    .select([
      'g.project_id as git_project_id',
      'g.repo_full_name as git_repo_full_name',
      'g.branch as git_branch',
      'g.installation_id as git_installation_id',
      'g.auto_deploy as git_auto_deploy',
      'g.dockerfile_path as git_dockerfile_path',
      'g.root_dir as git_root_dir',
      'g.created_at as git_created_at',
      'g.updated_at as git_updated_at',
      'g.webhook_id as git_webhook_id',
      'g.webhook_secret as git_webhook_secret',
    ])
    .where('projects.workspace_id', '=', workspaceId)
    .where('projects.slug', '=', slug),
);

/** The joined row as the project and its Git connection, both frozen (they may be shared). */
function splitWithGit(row: WithGitRow): { project: ProjectRow; git: GitConnectionRow | undefined } {
  const {
    git_project_id, git_repo_full_name, git_branch, git_installation_id, git_auto_deploy, git_dockerfile_path, git_root_dir,
    git_created_at, git_updated_at, git_webhook_id, git_webhook_secret, ...project
  } = row;
  const git =
    git_project_id === null || git_repo_full_name === null || git_branch === null || git_installation_id === null || git_auto_deploy === null ||
    git_dockerfile_path === null || git_root_dir === null || git_created_at === null || git_updated_at === null
      ? undefined
      : {
          project_id: git_project_id, repo_full_name: git_repo_full_name, branch: git_branch, installation_id: git_installation_id,
          auto_deploy: git_auto_deploy, dockerfile_path: git_dockerfile_path, root_dir: git_root_dir, created_at: git_created_at,
          updated_at: git_updated_at, webhook_id: git_webhook_id, webhook_secret: git_webhook_secret,
        };
  return Object.freeze({ project: Object.freeze(project), git: git === undefined ? undefined : Object.freeze(git) });
}

type WithGitRow = NonNullable<Awaited<ReturnType<typeof WITH_GIT.first>>>;
const SPLIT = new WeakMap<object, { project: ProjectRow; git: GitConnectionRow | undefined }>();

export class ProjectRepository extends Repository {
  byId(id: string): Promise<ProjectRow | undefined> {
    return this.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The project `slug` of the workspace. */
  inWorkspace(workspaceId: string, slug: string): Promise<ProjectRow | undefined> {
    return this.db.selectFrom('projects').selectAll().where('workspace_id', '=', workspaceId).where('slug', '=', slug).executeTakeFirst();
  }

  /** The project `slug` of the workspace with its Git connection (undefined when it has none). */
  async inWorkspaceWithGit(workspaceId: string, slug: string): Promise<{ project: ProjectRow; git: GitConnectionRow | undefined } | undefined> {
    const row = await WITH_GIT.first(this.db, this.dialect, workspaceId, slug);
    if (row === undefined) return undefined;
    // a row kept by the prepared query comes back as the same object: split it once
    let split = SPLIT.get(row);
    if (split === undefined) {
      split = splitWithGit(row);
      SPLIT.set(row, split);
    }
    return split;
  }

  /** The workspace's projects (or template instances), oldest first. */
  list(workspaceId: string, kind: ProjectRow['kind'] = 'project'): Promise<ProjectRow[]> {
    return this.db.selectFrom('projects').selectAll().where('workspace_id', '=', workspaceId).where('kind', '=', kind).orderBy('created_at').orderBy('id').execute();
  }

  /** Every project and template instance by its id, with its slug and its workspace's: the labels of `/metrics`. */
  labels(): Promise<{ id: string; project: string; workspace: string }[]> {
    return this.db
      .selectFrom('projects')
      .innerJoin('workspaces', 'workspaces.id', 'projects.workspace_id')
      .select(['projects.id', 'projects.slug as project', 'workspaces.slug as workspace'])
      .execute();
  }

  /** Fails with Duplicate (409) for a slug taken in the workspace or a host label taken anywhere. */
  async insert(row: Insertable<ProjectsTable>): Promise<void> {
    await orDuplicate(this.db.insertInto('projects').values(row).execute(), () => `The slug "${row.slug}" or the host label "${row.host_label}" is already taken.`);
  }

  async update(id: string, patch: Pick<ProjectRow, 'name' | 'port' | 'replicas' | 'cpu' | 'ram' | 'updated_at'>): Promise<void> {
    await this.db.updateTable('projects').set(patch).where('id', '=', id).execute();
  }

  /** Env vars, domains, the Git connection, the monitor and deployments cascade from the row. */
  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('projects').where('id', '=', id).execute();
  }

  /** The status the project record shows. */
  async status(id: string): Promise<ProjectStatus | undefined> {
    return (await this.db.selectFrom('projects').select('status').where('id', '=', id).executeTakeFirst())?.status;
  }

  async setStatus(id: string, status: ProjectStatus, at: string): Promise<void> {
    await this.db.updateTable('projects').set({ status, updated_at: at }).where('id', '=', id).execute();
  }

  /**
   * Inside the transaction that creates a project: how many projects the workspace holds, its
   * row locked first on PostgreSQL so that concurrent creations count one after the other.
   */
  async lockAndCountIn(workspaceId: string): Promise<number> {
    if (lockClause(this.dialect)) await this.db.selectFrom('workspaces').select('id').where('id', '=', workspaceId).forNoKeyUpdate().execute();
    const { n } = await this.db
      .selectFrom('projects')
      .select((eb) => eb.fn.countAll<string | number>().as('n'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return toNumber(n);
  }

  /**
   * Inside a transaction: the project's row locked against other writers of what it owns.
   * `noKey` (FOR NO KEY UPDATE) does not block inserts elsewhere that reference the project.
   * PostgreSQL only: SQLite runs one writer at a time (and FOR UPDATE fails there).
   */
  async lock(id: string, opts: { noKey: boolean }): Promise<void> {
    if (!lockClause(this.dialect)) return;
    const q = this.db.selectFrom('projects').select('id').where('id', '=', id);
    await (opts.noKey ? q.forNoKeyUpdate() : q.forUpdate()).execute();
  }
}
