import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Backups of managed databases (docs/backups.md). A backup row is the work queue of the leader's
// backup worker (pending → running → succeeded | failed) and the record of its artifact: where it
// is, its size and checksum as read back, its manifest. `databases.restore_from` names the backup
// a new database is restored from before it is `running`. `verify_status` queues a verification
// (a restore into a scratch server, compared with the manifest). A backup policy is one per
// database: its cron schedule, retention, destination and verification, the next run (claimed by
// moving it forward, so that two leaders never run one schedule twice) and the alert it raised.
// A backup destination is a workspace's S3-compatible bucket (its credentials sealed).
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
    .addColumn('verify_status', 'text')
    .addColumn('verify_error', 'text')
    .addColumn('error', 'text')
    .addColumn('requested_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('backups_database_idx').on('backups').columns(['database_id', 'created_at']).execute();
  await db.schema.createIndex('backups_status_idx').on('backups').column('status').execute();
  await db.schema.createIndex('backups_verify_idx').on('backups').column('verify_status').execute();
  await db.schema.alterTable('databases').addColumn('restore_from', 'text').execute();
  await db.schema
    .createTable('backup_policies')
    .addColumn('database_id', 'text', (c) => c.primaryKey().references('databases.id').onDelete('cascade'))
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('schedule', 'text', (c) => c.notNull())
    .addColumn('timezone', 'text', (c) => c.notNull())
    .addColumn('keep_count', 'integer', (c) => c.notNull())
    .addColumn('keep_days', 'integer')
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('verify', 'text', (c) => c.notNull())
    .addColumn('next_run_at', 'text', (c) => c.notNull())
    .addColumn('alert', 'text')
    .addColumn('alerted_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('backup_destinations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('endpoint', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('bucket', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('path_style', 'integer', (c) => c.notNull())
    .addColumn('access_key_id', 'text', (c) => c.notNull())
    .addColumn('secret_access_key', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('backup_destinations_name_uq', ['workspace_id', 'name'])
    .execute();
  await db.schema.createIndex('backup_policies_next_idx').on('backup_policies').column('next_run_at').execute();
}
