import type { Kysely, Selectable } from 'kysely';
import type { Role } from '../../domain/roles.js';
import { lockClause, orDuplicate, toNumber } from '../dialects.js';
import type { DB } from '../schema.js';
import type { WorkspacesTable } from '../tables/tenancy.js';
import { microsPerMinor } from '../../domain/money.js';
import { Repository } from './repository.js';
import { WalletRepository } from './wallets.js';

export type WorkspaceRow = Selectable<WorkspacesTable>;

/** A workspace with the role a user holds in it. */
export interface WorkspaceAccess {
  workspace: WorkspaceRow;
  role: Role;
}

/** Everything a new workspace starts with (docs/decisions.md#workspaces). */
export interface NewWorkspace {
  workspace: WorkspaceRow;
  /** becomes its owner */
  ownerId: string;
  /** recorded in workspace_creators (counted by `--max-workspaces-per-user`); null: not counted (bootstrap) */
  creatorId: string | null;
  /** the wallet and, when `credit` (minor units) > 0 and it is the owner's first workspace, its first ledger row, with the id `ledgerId` */
  wallet: { currency: string; credit: number; ledgerId: string };
}

export class WorkspaceRepository extends Repository {
  /**
   * The workspace, its owner's membership and its wallet with the starting credit (a ledger row
   * like every other balance change). Run it inside a transaction: the rows stand or fall together.
   */
  async create(input: NewWorkspace): Promise<void> {
    await orDuplicate(this.insertAll(input), () => `A workspace with slug "${input.workspace.slug}" already exists.`);
  }

  private async insertAll(input: NewWorkspace): Promise<void> {
    const { workspace, wallet } = input;
    const now = workspace.created_at;
    await this.db.insertInto('workspaces').values(workspace).execute();
    if (input.creatorId !== null) {
      await this.db.insertInto('workspace_creators').values({ workspace_id: workspace.id, user_id: input.creatorId, created_at: now }).execute();
    }
    await this.db.insertInto('members').values({ workspace_id: workspace.id, user_id: input.ownerId, role: 'owner', status: 'active', joined_at: now }).execute();
    await this.db
      .insertInto('wallets')
      .values({ workspace_id: workspace.id, balance_micros: 0, currency: wallet.currency, alert_threshold: 0, empty_since: null, alerts_sent: '', created_at: now, updated_at: now })
      .execute();
    // The starting credit goes to a user's first workspace only (docs/billing.md#starting-credit).
    const wallets = new WalletRepository(this.db, this.dialect, this.cache);
    if (wallet.credit > 0 && (await wallets.claimStartingCredit(input.ownerId, workspace.id, now))) {
      await wallets.post({
        id: wallet.ledgerId,
        workspaceId: workspace.id,
        type: 'adjustment',
        amountMicros: wallet.credit * microsPerMinor(wallet.currency),
        description: 'Starting credit',
        reference: 'starting-credit',
        at: now,
      });
    }
  }

  byId(id: string): Promise<WorkspaceRow | undefined> {
    return this.db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The id of every workspace. */
  async ids(): Promise<Set<string>> {
    return new Set((await this.db.selectFrom('workspaces').select('id').execute()).map((w) => w.id));
  }

  bySlug(slug: string): Promise<WorkspaceRow | undefined> {
    return this.db.selectFrom('workspaces').selectAll().where('slug', '=', slug).executeTakeFirst();
  }

  /** The settings (JSON text) of the workspace, or undefined when it is gone: log retention reads them. */
  async settingsOf(id: string): Promise<string | undefined> {
    return (await this.db.selectFrom('workspaces').select('settings').where('id', '=', id).executeTakeFirst())?.settings;
  }

  /** The workspaces `userId` is a member of, oldest first. */
  async ofMember(userId: string): Promise<WorkspaceAccess[]> {
    const rows = await workspacesWithRole(this.db, userId).orderBy('workspaces.created_at').orderBy('workspaces.id').execute();
    return rows.map((row) => asAccess(row));
  }

  async update(id: string, patch: Pick<WorkspaceRow, 'name' | 'settings' | 'updated_at'>): Promise<void> {
    await this.db.updateTable('workspaces').set(patch).where('id', '=', id).execute();
    this.cache.invalidate();
  }

  /** Members, invitations, keys, projects and everything below them cascade from the row. */
  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('workspaces').where('id', '=', id).execute();
    this.cache.invalidate();
  }

  /**
   * Inside the transaction that creates a workspace: how many (still existing) workspaces
   * `userId` has created. The user's row is locked first on PostgreSQL, so that concurrent
   * creations by one user count one after the other (SQLite has one writer anyway).
   */
  async lockAndCountCreatedBy(userId: string): Promise<number> {
    if (lockClause(this.dialect)) await this.db.selectFrom('users').select('id').where('id', '=', userId).forNoKeyUpdate().execute();
    const { n } = await this.db
      .selectFrom('workspace_creators')
      .select((eb) => eb.fn.countAll<string | number>().as('n'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    return toNumber(n);
  }
}

/** The workspaces `userId` is an active member of, each with the user's role: the base of every access read. */
export const workspacesWithRole = (db: Kysely<DB>, userId: string) =>
  db
    .selectFrom('workspaces')
    .innerJoin('members', 'members.workspace_id', 'workspaces.id')
    .selectAll('workspaces')
    .select('members.role')
    .where('members.user_id', '=', userId)
    // a pending membership grants nothing: not even the workspace's existence
    .where('members.status', '=', 'active');

export function asAccess(row: WorkspaceRow & { role: Role }): WorkspaceAccess;
export function asAccess(row: (WorkspaceRow & { role: Role }) | undefined): WorkspaceAccess | undefined;
export function asAccess(row: (WorkspaceRow & { role: Role }) | undefined): WorkspaceAccess | undefined {
  if (row === undefined) return undefined;
  const { role, ...workspace } = row;
  return { workspace, role };
}
