import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Who created each workspace through the API, for `--max-workspaces-per-user`
// (docs/operations.md "Limits"). Counting owner memberships instead would let two accounts
// create without end: create, add the other account as owner, step down, create again. A row
// goes with its workspace (or its user). Workspaces that exist already are credited to their
// first owner.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('workspace_creators')
    .addColumn('workspace_id', 'text', (c) => c.primaryKey().references('workspaces.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('workspace_creators_user_idx').on('workspace_creators').column('user_id').execute();
  await sql`
    insert into workspace_creators (workspace_id, user_id, created_at)
    select w.id,
           (select m.user_id from members m where m.workspace_id = w.id and m.role = 'owner' order by m.joined_at, m.user_id limit 1),
           w.created_at
    from workspaces w
    where exists (select 1 from members m where m.workspace_id = w.id and m.role = 'owner')`.execute(db);
}
