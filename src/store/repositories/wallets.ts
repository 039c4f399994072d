import { sql } from 'kysely';
import { toNumber } from '../dialects.js';
import type { TransactionType, WalletsTable } from '../tables/billing.js';
import { Repository } from './repository.js';

export interface Wallet {
  workspace_id: string;
  /** micro-units */
  balance_micros: number;
  currency: string;
  /** minor units */
  alert_threshold: number;
  empty_since: string | null;
  /** the notices sent for the current crossing */
  alerts_sent: Set<string>;
}

export interface LedgerRow {
  id: string;
  type: TransactionType;
  amount_micros: number;
  balance_after_micros: number;
  description: string;
  reference: string | null;
  created_at: string;
}

export interface LedgerEntry {
  id: string;
  workspaceId: string;
  type: TransactionType;
  /** signed micro-units */
  amountMicros: number;
  description: string;
  reference: string | null;
  at: string;
}

const walletOf = (row: WalletsTable): Wallet => ({
  workspace_id: row.workspace_id,
  balance_micros: toNumber(row.balance_micros),
  currency: row.currency,
  alert_threshold: toNumber(row.alert_threshold),
  empty_since: row.empty_since,
  alerts_sent: new Set(row.alerts_sent.split(',').filter((a) => a !== '')),
});

/**
 * Wallets and their ledger. Money moves only through `post`: the balance change and its ledger
 * row in one statement pair, inside the caller's transaction (docs/billing.md#ledger); the
 * wallet and its starting credit are written by WorkspaceRepository.create.
 */
export class WalletRepository extends Repository {
  async get(workspaceId: string): Promise<Wallet | undefined> {
    const row = await this.db.selectFrom('wallets').selectAll().where('workspace_id', '=', workspaceId).executeTakeFirst();
    return row === undefined ? undefined : walletOf(row);
  }

  /** Every wallet (the billing worker's pass). */
  async all(): Promise<Wallet[]> {
    return (await this.db.selectFrom('wallets').selectAll().execute()).map(walletOf);
  }

  async setAlertThreshold(workspaceId: string, threshold: number, at: string): Promise<void> {
    await this.db.updateTable('wallets').set({ alert_threshold: threshold, updated_at: at }).where('workspace_id', '=', workspaceId).execute();
  }

  /**
   * Changes the balance by `entry.amountMicros` and writes its ledger row with the balance after
   * it. Run it inside a transaction. Returns the row; a reference already in the ledger is a
   * unique violation (the caller's transaction fails, nothing moved).
   */
  async post(entry: LedgerEntry): Promise<LedgerRow> {
    const updated = await this.db
      .updateTable('wallets')
      .set({ balance_micros: sql`balance_micros + ${entry.amountMicros}`, updated_at: entry.at })
      .where('workspace_id', '=', entry.workspaceId)
      .returning('balance_micros')
      .executeTakeFirst();
    if (updated === undefined) throw new Error(`workspace ${entry.workspaceId} has no wallet`);
    const row: LedgerRow = {
      id: entry.id,
      type: entry.type,
      amount_micros: entry.amountMicros,
      balance_after_micros: toNumber(updated.balance_micros),
      description: entry.description,
      reference: entry.reference,
      created_at: entry.at,
    };
    await this.db.insertInto('wallet_transactions').values({ ...row, workspace_id: entry.workspaceId }).execute();
    return row;
  }

  /** The workspace's ledger, newest first, paged. */
  async ledger(workspaceId: string, limit: number, offset: number): Promise<{ rows: LedgerRow[]; total: number }> {
    const rows = await this.db
      .selectFrom('wallet_transactions')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
    const count = await this.db.selectFrom('wallet_transactions').select((eb) => eb.fn.countAll<string | number>().as('n')).where('workspace_id', '=', workspaceId).executeTakeFirstOrThrow();
    return {
      rows: rows.map((r) => ({ id: r.id, type: r.type, amount_micros: toNumber(r.amount_micros), balance_after_micros: toNumber(r.balance_after_micros), description: r.description, reference: r.reference, created_at: r.created_at })),
      total: toNumber(count.n),
    };
  }

  /** The sum of the workspace's ledger, micro-units (equal to its balance, always). */
  async ledgerSum(workspaceId: string): Promise<number> {
    const row = await this.db.selectFrom('wallet_transactions').select((eb) => eb.fn.sum<string | number | null>('amount_micros').as('total')).where('workspace_id', '=', workspaceId).executeTakeFirst();
    return toNumber(row?.total ?? 0);
  }

  /**
   * Records the wallet's crossing state, only if it is still `from` (another process may have
   * moved it): true when it did. `alerts` are the notices sent for this crossing.
   */
  async setState(workspaceId: string, from: Pick<Wallet, 'empty_since' | 'alerts_sent'>, to: { empty_since: string | null; alerts: Set<string> }, at: string): Promise<boolean> {
    let q = this.db
      .updateTable('wallets')
      .set({ empty_since: to.empty_since, alerts_sent: [...to.alerts].sort().join(','), updated_at: at })
      .where('workspace_id', '=', workspaceId)
      .where('alerts_sent', '=', [...from.alerts_sent].sort().join(','));
    q = from.empty_since === null ? q.where('empty_since', 'is', null) : q.where('empty_since', '=', from.empty_since);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  /** Whether the user's first workspace got the starting credit already; marks it granted when not (inside the creating transaction). */
  async claimStartingCredit(userId: string, workspaceId: string, at: string): Promise<boolean> {
    const r = await this.db
      .insertInto('starting_credits')
      .values({ user_id: userId, workspace_id: workspaceId, granted_at: at })
      .onConflict((oc) => oc.column('user_id').doNothing())
      .executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
  }
}
