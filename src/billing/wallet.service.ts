import { iso } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import type { Wallet } from '../store/repositories/index.js';
import type { Access } from '../tenancy/context.js';

export type WalletView = Wallet;

// A workspace's wallet and its starting credit are made with the workspace (createWorkspace).
export class WalletService {
  constructor(private readonly deps: Deps) {}

  async get(access: Access): Promise<WalletView> {
    const wallet = await this.deps.store.repos.wallets.get(access.workspace.id);
    if (wallet === undefined) throw new Error(`workspace ${access.workspace.id} has no wallet`);
    return wallet;
  }

  async setAlertThreshold(access: Access, threshold: number): Promise<{ threshold: number }> {
    await this.deps.store.repos.wallets.setAlertThreshold(access.workspace.id, threshold, iso(this.deps.clock.now()));
    return { threshold };
  }

  /** Paid work (deploys, databases) needs a positive balance: 402 otherwise. */
  async requireFunds(workspaceId: string): Promise<void> {
    const balance = await this.deps.store.repos.wallets.balance(workspaceId);
    if (balance === undefined || balance <= 0) {
      throw new AppError('PAYMENT_REQUIRED', 'The workspace wallet has no credit left; top it up to start paid work.');
    }
  }
}
