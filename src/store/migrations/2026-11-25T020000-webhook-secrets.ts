import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
// Push webhooks per Git connection (issue 9, item 6).
//
// - git_connections.webhook_id: the random id in the connection's own delivery URL
//   (`POST /api/webhooks/github/<webhook_id>`); unique, so one URL names one connection.
// - git_connections.webhook_secret: the connection's webhook secret, sealed with the secret box
//   (context `git-webhook:<project_id>:<webhook_id>`). A migration cannot reach the secret key,
//   so existing connections get a webhook id here and no secret (NULL): their URL refuses every
//   delivery until a member creates the secret with `POST …/git/webhook-secret`. A secret made
//   here could never be shown to anyone anyway (it is shown once, when made), so nothing is lost.
// - deployments.require_head: 1 for a deployment a push webhook queued; its build fails unless
//   the pushed commit is still the branch's head when fetched.
// - webhook_deliveries: one row per delivery acted on, keyed by receiver (`app`, or a
//   connection's webhook id) and X-GitHub-Delivery, and unique per receiver and body digest,
//   so that a repeated delivery (two replicas, a retry, a replay) is acted on at most once.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('git_connections').addColumn('webhook_id', 'text').execute();
  await db.schema.alterTable('git_connections').addColumn('webhook_secret', 'text').execute();
  const rows = await sql<{ project_id: string }>`select project_id from git_connections`.execute(db);
  for (const row of rows.rows) {
    await sql`update git_connections set webhook_id = ${randomBytes(16).toString('hex')} where project_id = ${row.project_id}`.execute(db);
  }
  await db.schema.createIndex('git_connections_webhook_idx').on('git_connections').column('webhook_id').unique().execute();

  await db.schema.alterTable('deployments').addColumn('require_head', 'integer', (c) => c.notNull().defaultTo(0)).execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('receiver', 'text', (c) => c.notNull())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('payload_digest', 'text', (c) => c.notNull())
    .addColumn('received_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_deliveries_pk', ['receiver', 'delivery_id'])
    .addUniqueConstraint('webhook_deliveries_digest_uq', ['receiver', 'payload_digest'])
    .execute();
  await db.schema.createIndex('webhook_deliveries_received_idx').on('webhook_deliveries').column('received_at').execute();
}
