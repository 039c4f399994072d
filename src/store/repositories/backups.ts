import { toNumber } from '../dialects.js';
import type { BackupsTable } from '../tables/backups.js';
import { Repository } from './repository.js';

export type BackupRow = BackupsTable;

/** PostgreSQL returns bigint as text: every row leaves here with numbers. */
const row = (r: BackupRow): BackupRow => ({ ...r, size: r.size === null ? null : toNumber(r.size) });

/** Backups of managed databases and the backup worker's queue (docs/backups.md). */
export class BackupRepository extends Repository {
  insert(r: BackupRow): Promise<unknown> {
    return this.db.insertInto('backups').values(r).execute();
  }

  /** The database's backups, newest first. */
  async ofDatabase(databaseId: string, limit = 200): Promise<BackupRow[]> {
    const rows = await this.db.selectFrom('backups').selectAll().where('database_id', '=', databaseId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.map(row);
  }

  async byId(id: string): Promise<BackupRow | undefined> {
    const r = await this.db.selectFrom('backups').selectAll().where('id', '=', id).executeTakeFirst();
    return r === undefined ? undefined : row(r);
  }

  /** The backups in one of `statuses`, oldest first: the worker's work. */
  async withStatus(statuses: readonly string[]): Promise<BackupRow[]> {
    const rows = await this.db.selectFrom('backups').selectAll().where('status', 'in', [...statuses]).orderBy('created_at').orderBy('id').execute();
    return rows.map(row);
  }

  /** A pending or running backup of the database, if any (one runs at a time per database). */
  async active(databaseId: string): Promise<BackupRow | undefined> {
    const r = await this.db.selectFrom('backups').selectAll().where('database_id', '=', databaseId).where('status', 'in', ['pending', 'running']).executeTakeFirst();
    return r === undefined ? undefined : row(r);
  }

  /** Changes the row only while its status is still `from`: true when it did. */
  async update(id: string, from: string, patch: Partial<Omit<BackupRow, 'id' | 'workspace_id' | 'database_id'>>): Promise<boolean> {
    const r = await this.db.updateTable('backups').set(patch).where('id', '=', id).where('status', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('backups').where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  /** The ids of every database that has a backup record (the sweep keeps their artifacts). */
  async databaseIds(): Promise<Set<string>> {
    const rows = await this.db.selectFrom('backups').select('database_id').distinct().execute();
    return new Set(rows.map((r) => r.database_id));
  }

  /** Every object key there is (the sweep removes artifacts no record names). */
  async objectKeys(): Promise<Set<string>> {
    const rows = await this.db.selectFrom('backups').select('object_key').execute();
    return new Set(rows.map((r) => r.object_key));
  }
}
