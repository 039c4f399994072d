import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
// Money columns are bigint minor units (cents) on both dialects; pg returns them as strings.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('projects')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('slug', 'text', (c) => c.notNull())
    .addColumn('port', 'integer', (c) => c.notNull())
    .addColumn('replicas', 'integer', (c) => c.notNull())
    .addColumn('cpu', 'text', (c) => c.notNull())
    .addColumn('ram', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('projects_ws_slug_uq', ['workspace_id', 'slug'])
    .execute();

  await db.schema
    .createTable('git_connections')
    .addColumn('project_id', 'text', (c) => c.primaryKey().references('projects.id').onDelete('cascade'))
    .addColumn('repo_full_name', 'text', (c) => c.notNull())
    .addColumn('branch', 'text', (c) => c.notNull())
    .addColumn('installation_id', 'bigint', (c) => c.notNull())
    .addColumn('auto_deploy', 'integer', (c) => c.notNull())
    .addColumn('dockerfile_path', 'text', (c) => c.notNull())
    .addColumn('root_dir', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('git_repo_idx').on('git_connections').columns(['repo_full_name', 'branch']).execute();

  await db.schema
    .createTable('env_vars')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    // plaintext for ordinary values; `v1:<iv>:<tag>:<ciphertext>` (AES-256-GCM) for secrets
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('is_secret', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('env_project_key_uq', ['project_id', 'key'])
    .execute();

  await db.schema
    .createTable('domains')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('domain', 'text', (c) => c.notNull().unique())
    .addColumn('verified', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('domains_project_idx').on('domains').column('project_id').execute();

  await db.schema
    .createTable('uptime_monitors')
    .addColumn('project_id', 'text', (c) => c.primaryKey().references('projects.id').onDelete('cascade'))
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('check_interval_sec', 'integer', (c) => c.notNull())
    .addColumn('check_path', 'text', (c) => c.notNull())
    // encrypted like a secret env value: the URL is a credential
    .addColumn('chat_webhook_url', 'text')
    .addColumn('notify_email', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('last_checked_at', 'text')
    .addColumn('last_response_ms', 'integer')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('deployments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('image', 'text')
    .addColumn('branch', 'text')
    .addColumn('commit_sha', 'text')
    .addColumn('commit_message', 'text')
    .addColumn('error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text')
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema.createIndex('deployments_project_idx').on('deployments').columns(['project_id', 'created_at']).execute();

  await db.schema
    .createTable('wallets')
    .addColumn('workspace_id', 'text', (c) => c.primaryKey().references('workspaces.id').onDelete('cascade'))
    .addColumn('balance', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('alert_threshold', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  // Workspaces that exist already get an empty wallet (no credit is invented for them).
  await sql`insert into wallets (workspace_id, balance, currency, alert_threshold, created_at, updated_at)
            select id, 0, 'USD', 0, created_at, created_at from workspaces`.execute(db);

  await db.schema
    .createTable('wallet_transactions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('amount', 'bigint', (c) => c.notNull())
    .addColumn('balance_after', 'bigint', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('wallet_tx_ws_idx').on('wallet_transactions').columns(['workspace_id', 'created_at']).execute();
}
