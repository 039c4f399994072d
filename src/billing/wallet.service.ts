import type { Kysely } from 'kysely';
import { iso } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import { toNumber } from '../store/dialects.js';
import type { DB } from '../store/schema.js';
import type { Access } from '../tenancy/context.js';

export interface WalletView {
  balance: number;
  currency: string;
  alert_threshold: number;
}

/**
 * Create a workspace's wallet with the configured starting credit, inside the caller's
 * transaction. The credit is a ledger row like every other balance change.
 */
export async function openWallet(deps: Deps, db: Kysely<DB>, workspaceId: string): Promise<void> {
  const now = iso(deps.clock.now());
  const credit = deps.platform.startingCredit;
  await db
    .insertInto('wallets')
    .values({ workspace_id: workspaceId, balance: credit, currency: deps.platform.currency, alert_threshold: 0, created_at: now, updated_at: now })
    .execute();
  if (credit > 0) {
    await db
      .insertInto('wallet_transactions')
      .values({ id: deps.ids.id(), workspace_id: workspaceId, type: 'adjustment', amount: credit, balance_after: credit, description: 'Starting credit', created_at: now })
      .execute();
  }
}

export class WalletService {
  constructor(private readonly deps: Deps) {}

  async get(access: Access): Promise<WalletView> {
    const row = await this.deps.store.db.selectFrom('wallets').selectAll().where('workspace_id', '=', access.workspace.id).executeTakeFirstOrThrow();
    return { balance: toNumber(row.balance), currency: row.currency, alert_threshold: toNumber(row.alert_threshold) };
  }

  async setAlertThreshold(access: Access, threshold: number): Promise<{ threshold: number }> {
    await this.deps.store.db
      .updateTable('wallets')
      .set({ alert_threshold: threshold, updated_at: iso(this.deps.clock.now()) })
      .where('workspace_id', '=', access.workspace.id)
      .execute();
    return { threshold };
  }

  /** Paid work (deploys, databases) needs a positive balance: 402 otherwise. */
  async requireFunds(workspaceId: string): Promise<void> {
    const row = await this.deps.store.db.selectFrom('wallets').select('balance').where('workspace_id', '=', workspaceId).executeTakeFirst();
    if (row === undefined || toNumber(row.balance) <= 0) {
      throw new AppError('PAYMENT_REQUIRED', 'The workspace wallet has no credit left; top it up to start paid work.');
    }
  }
}
