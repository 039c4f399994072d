import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
// GitHub App installations linked to a workspace by the setup-URL flow (proof of control), and
// the one-time `state` nonces of that flow. A Git connection may only use an installation linked
// to its own workspace; deleting the workspace drops its links.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('github_installations')
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('installation_id', 'bigint', (c) => c.notNull())
    .addColumn('account_login', 'text', (c) => c.notNull())
    // the user who proved control; kept when that user is deleted
    .addColumn('linked_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('github_installations_pk', ['workspace_id', 'installation_id'])
    .execute();
  await db.schema.createIndex('github_installations_id_idx').on('github_installations').column('installation_id').execute();

  await db.schema
    .createTable('github_link_states')
    .addColumn('nonce', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('github_link_states_expiry_idx').on('github_link_states').column('expires_at').execute();
}
