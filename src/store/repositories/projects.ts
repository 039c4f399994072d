import type { Kysely } from 'kysely';
import type { ProjectStatus } from '../../domain/project.js';
import { lockClause, toNumber } from '../dialects.js';
import type { DB, ProjectsTable } from '../schema.js';
import { Repository } from './repository.js';

export type ProjectRow = ProjectsTable;

/**
 * The project `slug` of the workspace. A function as well as a method: src/deploy still calls
 * projects/resolve.ts with a bare Kysely handle.
 */
export const projectInWorkspace = (db: Kysely<DB>, workspaceId: string, slug: string): Promise<ProjectRow | undefined> =>
  db.selectFrom('projects').selectAll().where('workspace_id', '=', workspaceId).where('slug', '=', slug).executeTakeFirst();

/** The status a project record shows (also for src/deploy, see projectInWorkspace). */
export const projectStatus = async (db: Kysely<DB>, projectId: string): Promise<ProjectStatus | undefined> =>
  (await db.selectFrom('projects').select('status').where('id', '=', projectId).executeTakeFirst())?.status;

export const setProjectStatus = async (db: Kysely<DB>, projectId: string, status: ProjectStatus, at: string): Promise<void> => {
  await db.updateTable('projects').set({ status, updated_at: at }).where('id', '=', projectId).execute();
};

export class ProjectRepository extends Repository {
  inWorkspace(workspaceId: string, slug: string): Promise<ProjectRow | undefined> {
    return projectInWorkspace(this.db, workspaceId, slug);
  }

  /** The workspace's projects, oldest first. */
  list(workspaceId: string): Promise<ProjectRow[]> {
    return this.db.selectFrom('projects').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
  }

  /** Fails with the store's unique violation for a slug taken in the workspace or a host label taken anywhere. */
  async insert(row: ProjectRow): Promise<void> {
    await this.db.insertInto('projects').values(row).execute();
  }

  async update(id: string, patch: Pick<ProjectRow, 'name' | 'port' | 'replicas' | 'cpu' | 'ram' | 'updated_at'>): Promise<void> {
    await this.db.updateTable('projects').set(patch).where('id', '=', id).execute();
  }

  /** Env vars, domains, the Git connection, the monitor and deployments cascade from the row. */
  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('projects').where('id', '=', id).execute();
  }

  status(id: string): Promise<ProjectStatus | undefined> {
    return projectStatus(this.db, id);
  }

  setStatus(id: string, status: ProjectStatus, at: string): Promise<void> {
    return setProjectStatus(this.db, id, status, at);
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
