import { toNumber } from '../dialects.js';
import { Repository } from './repository.js';

export interface Wallet {
  balance: number;
  currency: string;
  alert_threshold: number;
}

// Money moves only inside one transaction, the ledger row with the balance change; the wallet
// and its starting credit are written by WorkspaceRepository.create.
export class WalletRepository extends Repository {
  async get(workspaceId: string): Promise<Wallet | undefined> {
    const row = await this.db.selectFrom('wallets').selectAll().where('workspace_id', '=', workspaceId).executeTakeFirst();
    return row === undefined ? undefined : { balance: toNumber(row.balance), currency: row.currency, alert_threshold: toNumber(row.alert_threshold) };
  }

  async balance(workspaceId: string): Promise<number | undefined> {
    const row = await this.db.selectFrom('wallets').select('balance').where('workspace_id', '=', workspaceId).executeTakeFirst();
    return row === undefined ? undefined : toNumber(row.balance);
  }

  async setAlertThreshold(workspaceId: string, threshold: number, at: string): Promise<void> {
    await this.db.updateTable('wallets').set({ alert_threshold: threshold, updated_at: at }).where('workspace_id', '=', workspaceId).execute();
  }
}
