import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Managed databases (docs/databases.md). A row is the database's whole record: the provisioner
// that owns it, its status (`provisioning` is the leader's work queue: a kill -9 leaves the row
// there and the next leader finishes the work), the image actually used, where apps and the
// host reach it, and the password sealed with the secret key. A workspace's databases go with
// it (cascade); their containers and volumes are then removed by the leader, which finds them
// by label without a row. `database_events` is what happened to one, shown on GET.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('databases')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('slug', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('provisioner', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('image', 'text')
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('port', 'integer', (c) => c.notNull())
    .addColumn('external_host', 'text')
    .addColumn('external_port', 'integer')
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('password', 'text', (c) => c.notNull())
    .addColumn('database_name', 'text', (c) => c.notNull())
    .addColumn('memory_mb', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('databases_workspace_slug', ['workspace_id', 'slug'])
    .execute();
  await db.schema.createIndex('databases_status_idx').on('databases').column('status').execute();
  await db.schema
    .createTable('database_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('database_id', 'text', (c) => c.notNull().references('databases.id').onDelete('cascade'))
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('database_events_database_idx').on('database_events').columns(['database_id', 'id']).execute();
}
