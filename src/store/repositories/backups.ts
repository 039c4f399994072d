import { orDuplicate, toNumber } from '../dialects.js';
import type { BackupDestinationsTable, BackupPoliciesTable, BackupsTable, RestoresTable } from '../tables/backups.js';
import { Repository } from './repository.js';

export type BackupRow = BackupsTable;
export type BackupPolicyRow = BackupPoliciesTable;
export type BackupDestinationRow = BackupDestinationsTable;
export type RestoreRow = RestoresTable;

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

  /** Succeeded backups of the database at `destination`, newest first (retention counts them all, whatever their trigger). */
  async succeeded(databaseId: string, destination?: string): Promise<BackupRow[]> {
    let q = this.db.selectFrom('backups').selectAll().where('database_id', '=', databaseId).where('status', '=', 'succeeded');
    if (destination !== undefined) q = q.where('destination', '=', destination);
    return (await q.orderBy('finished_at', 'desc').orderBy('id', 'desc').execute()).map(row);
  }

  /** Backups whose verification waits (oldest first). */
  async verifyQueue(): Promise<BackupRow[]> {
    const rows = await this.db.selectFrom('backups').selectAll().where('verify_status', '=', 'pending').orderBy('created_at').execute();
    return rows.map(row);
  }

  /** Changes the verification only while it is still `from`: true when it did. */
  async updateVerify(id: string, from: string | null, patch: Pick<Partial<BackupRow>, 'verify_status' | 'verify_error' | 'verified_at' | 'restore_seconds'>): Promise<boolean> {
    let q = this.db.updateTable('backups').set(patch).where('id', '=', id).where('status', '=', 'succeeded');
    q = from === null ? q.where('verify_status', 'is', null) : q.where('verify_status', '=', from);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Verifications a previous leader left running: failed, said so. */
  async failRunningVerifications(message: string): Promise<void> {
    await this.db.updateTable('backups').set({ verify_status: 'failed', verify_error: message }).where('verify_status', '=', 'running').execute();
  }

  // --- policies ------------------------------------------------------------------------------

  policy(databaseId: string): Promise<BackupPolicyRow | undefined> {
    return this.db.selectFrom('backup_policies').selectAll().where('database_id', '=', databaseId).executeTakeFirst();
  }

  async putPolicy(r: BackupPolicyRow): Promise<void> {
    const { database_id: _id, workspace_id: _ws, created_at: _c, ...rest } = r;
    await this.db.insertInto('backup_policies').values(r).onConflict((oc) => oc.column('database_id').doUpdateSet(rest)).execute();
  }

  async deletePolicy(databaseId: string): Promise<boolean> {
    const r = await this.db.deleteFrom('backup_policies').where('database_id', '=', databaseId).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  /** Every policy (the leader's scheduler and alerts look at each). */
  policies(): Promise<BackupPolicyRow[]> {
    return this.db.selectFrom('backup_policies').selectAll().orderBy('database_id').execute();
  }

  /** Moves a due run forward, only from the value read: the leader that moved it runs it (never two). */
  async advance(databaseId: string, from: string, next: string): Promise<boolean> {
    const r = await this.db.updateTable('backup_policies').set({ next_run_at: next }).where('database_id', '=', databaseId).where('next_run_at', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async setAlert(databaseId: string, alert: string | null, at: string | null): Promise<void> {
    await this.db.updateTable('backup_policies').set({ alert, alerted_at: at }).where('database_id', '=', databaseId).execute();
  }

  // --- destinations --------------------------------------------------------------------------

  insertDestination(r: BackupDestinationRow): Promise<unknown> {
    return orDuplicate(this.db.insertInto('backup_destinations').values(r).execute(), () => `A backup destination named "${r.name}" already exists in this workspace.`);
  }

  /** The workspace's destinations, by name. */
  destinations(workspaceId: string): Promise<BackupDestinationRow[]> {
    return this.db.selectFrom('backup_destinations').selectAll().where('workspace_id', '=', workspaceId).orderBy('name').execute();
  }

  /** Every workspace's destinations (the leader's sweep). */
  allDestinations(): Promise<BackupDestinationRow[]> {
    return this.db.selectFrom('backup_destinations').selectAll().orderBy('id').execute();
  }

  /** One destination of the workspace (another workspace's is as absent as an unknown one). */
  destination(workspaceId: string, id: string): Promise<BackupDestinationRow | undefined> {
    return this.db.selectFrom('backup_destinations').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  }

  async updateDestination(workspaceId: string, id: string, patch: Partial<Omit<BackupDestinationRow, 'id' | 'workspace_id' | 'created_at'>>): Promise<boolean> {
    const r = await orDuplicate(this.db.updateTable('backup_destinations').set(patch).where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst(), () => `A backup destination named "${patch.name ?? ''}" already exists in this workspace.`);
    return Number(r.numUpdatedRows) > 0;
  }

  async deleteDestination(workspaceId: string, id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('backup_destinations').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  /** What still uses a destination: the policies that send there and the backups kept there. */
  async destinationUse(id: string): Promise<{ policies: number; backups: number }> {
    const p = await this.db.selectFrom('backup_policies').select((eb) => eb.fn.countAll().as('n')).where('destination', '=', id).executeTakeFirstOrThrow();
    const b = await this.db.selectFrom('backups').select((eb) => eb.fn.countAll().as('n')).where('destination', '=', id).executeTakeFirstOrThrow();
    return { policies: toNumber(p.n), backups: toNumber(b.n) };
  }

  // --- in-place restores ---------------------------------------------------------------------

  insertRestore(r: RestoreRow): Promise<unknown> {
    return this.db.insertInto('restores').values(r).execute();
  }

  restore(id: string): Promise<RestoreRow | undefined> {
    return this.db.selectFrom('restores').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The database's restores, newest first. */
  restoresOf(databaseId: string, limit = 100): Promise<RestoreRow[]> {
    return this.db.selectFrom('restores').selectAll().where('database_id', '=', databaseId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
  }

  /** Restores in one of `statuses`, oldest first (the worker's work). */
  restoresWithStatus(statuses: readonly string[]): Promise<RestoreRow[]> {
    return this.db.selectFrom('restores').selectAll().where('status', 'in', [...statuses]).orderBy('created_at').orderBy('id').execute();
  }

  /** A pending or restoring restore of the database, if any. */
  activeRestore(databaseId: string): Promise<RestoreRow | undefined> {
    return this.db.selectFrom('restores').selectAll().where('database_id', '=', databaseId).where('status', 'in', ['pending', 'restoring']).executeTakeFirst();
  }

  /** Changes the restore only while its status is still `from`: true when it did. */
  async updateRestore(id: string, from: string, patch: Partial<Omit<RestoreRow, 'id' | 'workspace_id' | 'database_id'>>): Promise<boolean> {
    const r = await this.db.updateTable('restores').set(patch).where('id', '=', id).where('status', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }
}
