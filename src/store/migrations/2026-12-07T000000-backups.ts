import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Backups of managed databases (docs/backups.md). A backup row is the work queue of the leader's
// backup worker (pending → running → succeeded | failed) and the record of its artifact: where it
// is, its size and checksum as read back, its manifest. `databases.restore_from` names the backup
// a new database is restored from before it is `running`.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('backups')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('database_id', 'text', (c) => c.notNull().references('databases.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('object_key', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint')
    .addColumn('checksum', 'text')
    .addColumn('manifest', 'text')
    .addColumn('started_at', 'text')
    .addColumn('finished_at', 'text')
    .addColumn('verified_at', 'text')
    .addColumn('restore_seconds', 'real')
    .addColumn('error', 'text')
    .addColumn('requested_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('backups_database_idx').on('backups').columns(['database_id', 'created_at']).execute();
  await db.schema.createIndex('backups_status_idx').on('backups').column('status').execute();
  await db.schema.alterTable('databases').addColumn('restore_from', 'text').execute();
}
