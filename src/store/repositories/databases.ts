import { lockClause, orDuplicate, toNumber } from '../dialects.js';
import type { DatabaseEventsTable, DatabasesTable } from '../tables/databases.js';
import { Repository } from './repository.js';

export type DatabaseRow = DatabasesTable;
export type DatabaseEventRow = DatabaseEventsTable;

/** Managed databases and what happened to them (docs/databases.md). */
export class DatabaseRepository extends Repository {
  /** Inside a transaction: the databases of the workspace (those made by template instances too), its row locked first so that concurrent creations count one after the other. */
  async lockAndCountIn(workspaceId: string): Promise<number> {
    if (lockClause(this.dialect)) await this.db.selectFrom('workspaces').select('id').where('id', '=', workspaceId).forNoKeyUpdate().execute();
    const { n } = await this.db
      .selectFrom('databases')
      .select((eb) => eb.fn.countAll<string | number>().as('n'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return toNumber(n);
  }

  /** Fails with Duplicate (409) for a slug the workspace has already. */
  insert(row: DatabaseRow): Promise<unknown> {
    return orDuplicate(this.db.insertInto('databases').values(row).execute(), () => `A database with the slug "${row.slug}" already exists in this workspace.`);
  }

  inWorkspace(workspaceId: string): Promise<DatabaseRow[]> {
    return this.db.selectFrom('databases').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
  }

  bySlug(workspaceId: string, slug: string): Promise<DatabaseRow | undefined> {
    return this.db.selectFrom('databases').selectAll().where('workspace_id', '=', workspaceId).where('slug', '=', slug).executeTakeFirst();
  }

  byId(id: string): Promise<DatabaseRow | undefined> {
    return this.db.selectFrom('databases').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Every database in one of `statuses`, oldest first: the leader's work. */
  withStatus(statuses: readonly string[]): Promise<DatabaseRow[]> {
    return this.db.selectFrom('databases').selectAll().where('status', 'in', [...statuses]).orderBy('created_at').orderBy('id').execute();
  }

  /** The ids of every database there is (the leader tells its containers from orphans). */
  async ids(): Promise<Set<string>> {
    return new Set((await this.db.selectFrom('databases').select('id').execute()).map((r) => r.id));
  }

  /** The databases a template instance provisioned. */
  ownedBy(projectId: string): Promise<DatabaseRow[]> {
    return this.db.selectFrom('databases').selectAll().where('owner_project_id', '=', projectId).execute();
  }

  /** The user names of every database of `type` on a shared server, in any status. */
  async sharedNames(type: string): Promise<Set<string>> {
    const rows = await this.db.selectFrom('databases').select('username').where('provisioner', '=', 'shared').where('type', '=', type).execute();
    return new Set(rows.map((r) => r.username));
  }

  /**
   * Changes the row only while its status is still `from` (a DELETE may have come meanwhile):
   * true when it did.
   */
  async update(id: string, from: string, patch: Partial<Omit<DatabaseRow, 'id' | 'workspace_id'>>): Promise<boolean> {
    const r = await this.db.updateTable('databases').set(patch).where('id', '=', id).where('status', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('databases').where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  addEvent(row: DatabaseEventRow): Promise<unknown> {
    return this.db.insertInto('database_events').values(row).execute();
  }

  /** The newest `limit` events, oldest first. */
  async events(databaseId: string, limit = 50): Promise<DatabaseEventRow[]> {
    const rows = await this.db.selectFrom('database_events').selectAll().where('database_id', '=', databaseId).orderBy('id', 'desc').limit(limit).execute();
    return rows.reverse();
  }
}
