import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
// Named leases: the one process that holds a lease (and keeps renewing it) does that lease's
// work, such as running the deploy engine when several Slipway processes share the store.
// Times are RFC 3339 text like the deploy queue's `lease_until`, compared as text.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('leases')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('acquired_at', 'text', (c) => c.notNull())
    .execute();
}
