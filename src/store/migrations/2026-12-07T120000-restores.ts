import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// In-place restores of managed databases (docs/backups.md#in-place-restore). A restore row is the
// work of the leader's backup worker: `pending` while its safety backup (a backup with trigger
// `safety`, taken first) runs, then `restoring`, then `succeeded` (with the counts compared to
// the manifest in `result`) or `failed` (with the step and its error). `backup_id` is not a
// foreign key: the record stays when the backup is deleted later.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('restores')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('database_id', 'text', (c) => c.notNull().references('databases.id').onDelete('cascade'))
    .addColumn('backup_id', 'text', (c) => c.notNull())
    .addColumn('safety_backup_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('step', 'text')
    .addColumn('result', 'text')
    .addColumn('error', 'text')
    .addColumn('requested_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text')
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema.createIndex('restores_database_idx').on('restores').columns(['database_id', 'created_at']).execute();
  await db.schema.createIndex('restores_status_idx').on('restores').column('status').execute();
}
