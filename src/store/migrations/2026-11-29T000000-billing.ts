import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Billing (docs/billing.md). Money is kept in micro-units of the currency (1 USD = 1,000,000) so
// that per-minute usage loses nothing to rounding; the API still shows minor units.
// - wallets: `balance_micros` replaces `balance`; `empty_since` is when the available balance
//   reached 0 (suspension follows after the grace period), `alerts_sent` the low-balance
//   notices already sent for the current crossing (`below`, `empty`, `suspended`).
// - wallet_transactions: `amount_micros` and `balance_after_micros` replace the cent columns;
//   `reference` ties a row to what caused it (a payment id, a usage hour), unique per workspace.
// - billing_meters: per resource seen running, the first minute not yet metered, the remainder
//   below one micro-unit carried to the next minutes, and whether it ran when last looked at
//   (a gap while it did not run is never charged). Idempotent per resource-minute.
// - billing_accruals: metered usage of the hours not yet posted to the ledger, per resource.
// - billing_usage: posted usage per calendar month (UTC) and resource.
// - payments and payment_events: top-ups and the gateway events already acted on.
// - starting_credits: users whose first workspace got the starting credit (once per user).
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('wallets').addColumn('balance_micros', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('wallets').addColumn('empty_since', 'text').execute();
  await db.schema.alterTable('wallets').addColumn('alerts_sent', 'text', (c) => c.notNull().defaultTo('')).execute();
  await sql`update wallets set balance_micros = balance * 10000`.execute(db);
  await db.schema.alterTable('wallets').dropColumn('balance').execute();

  await db.schema.alterTable('wallet_transactions').addColumn('amount_micros', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('wallet_transactions').addColumn('balance_after_micros', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('wallet_transactions').addColumn('reference', 'text').execute();
  await sql`update wallet_transactions set amount_micros = amount * 10000, balance_after_micros = balance_after * 10000`.execute(db);
  await db.schema.alterTable('wallet_transactions').dropColumn('amount').execute();
  await db.schema.alterTable('wallet_transactions').dropColumn('balance_after').execute();
  await db.schema.createIndex('wallet_tx_reference_idx').on('wallet_transactions').columns(['workspace_id', 'reference']).unique().execute();

  await db.schema
    .createTable('billing_meters')
    .addColumn('resource_id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('next_minute', 'bigint', (c) => c.notNull())
    .addColumn('carry', 'bigint', (c) => c.notNull())
    .addColumn('running', 'integer', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('billing_meters_ws_idx').on('billing_meters').column('workspace_id').execute();

  const usageColumns = (name: string) =>
    db.schema
      .createTable(name)
      .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
      .addColumn('resource_id', 'text', (c) => c.notNull())
      .addColumn('resource_kind', 'text', (c) => c.notNull())
      .addColumn('resource_name', 'text', (c) => c.notNull())
      .addColumn('minutes', 'bigint', (c) => c.notNull())
      .addColumn('vcpu_milli_minutes', 'bigint', (c) => c.notNull())
      .addColumn('ram_milli_minutes', 'bigint', (c) => c.notNull())
      .addColumn('db_mib_minutes', 'bigint', (c) => c.notNull())
      .addColumn('amount_micros', 'bigint', (c) => c.notNull());
  await usageColumns('billing_accruals')
    .addColumn('hour', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('billing_accruals_pk', ['workspace_id', 'hour', 'resource_id'])
    .execute();
  await usageColumns('billing_usage')
    .addColumn('period', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('billing_usage_pk', ['workspace_id', 'period', 'resource_id'])
    .execute();

  await db.schema
    .createTable('payments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('gateway', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('reference', 'text')
    .addColumn('amount', 'bigint', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('checkout_url', 'text')
    .addColumn('failure_reason', 'text')
    .addColumn('created_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('completed_at', 'text')
    .addUniqueConstraint('payments_gateway_reference', ['gateway', 'reference'])
    .execute();
  await db.schema.createIndex('payments_ws_idx').on('payments').columns(['workspace_id', 'created_at']).execute();

  await db.schema
    .createTable('payment_events')
    .addColumn('gateway', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('payment_id', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('received_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('payment_events_pk', ['gateway', 'event_id'])
    .execute();

  await db.schema
    .createTable('starting_credits')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('workspace_id', 'text')
    .addColumn('granted_at', 'text', (c) => c.notNull())
    .execute();
  // Every owner so far got a starting credit with each of their workspaces: none gets another.
  await sql`insert into starting_credits (user_id, workspace_id, granted_at)
            select user_id, null, min(joined_at) from members where role = 'owner' group by user_id`.execute(db);
}
