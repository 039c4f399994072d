import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
// The deployments table doubles as the deploy queue: a worker leases a queued row and keeps the
// lease alive; a lease that runs out means the worker died and the row is reaped.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('deployments').addColumn('lease_owner', 'text').execute();
  await db.schema.alterTable('deployments').addColumn('lease_until', 'text').execute();
  await db.schema.alterTable('deployments').addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.createIndex('deployments_status_idx').on('deployments').columns(['status', 'created_at']).execute();

  // Facts about this installation; `instance_id` labels everything it creates on a container
  // engine, so two Slipways sharing one engine never take each other's containers for orphans.
  await db.schema
    .createTable('meta')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
  await sql`insert into meta (key, value) values ('instance_id', ${randomUUID()})`.execute(db);

  await db.schema
    .createTable('deployment_logs')
    .addColumn('deployment_id', 'text', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('line', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('deployment_logs_pk', ['deployment_id', 'seq'])
    .execute();
}
