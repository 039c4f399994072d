import type { Selectable } from 'kysely';
import { lockClause } from '../dialects.js';
import type { InvitationsTable } from '../tables/tenancy.js';
import { Repository } from './repository.js';

export type InvitationRow = Selectable<InvitationsTable>;

export class InvitationRepository extends Repository {
  async insert(row: InvitationRow): Promise<void> {
    await this.db.insertInto('invitations').values(row).execute();
  }

  /** Whether `email` has a pending invitation to the workspace that has not expired at `now`. */
  async hasPending(workspaceId: string, email: string, now: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('invitations')
      .select('id')
      .where('workspace_id', '=', workspaceId)
      .where('email', '=', email)
      .where('status', '=', 'pending')
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return row !== undefined;
  }

  list(workspaceId: string): Promise<InvitationRow[]> {
    return this.db.selectFrom('invitations').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('id').execute();
  }

  find(workspaceId: string, id: string): Promise<InvitationRow | undefined> {
    return this.db.selectFrom('invitations').selectAll().where('id', '=', id).where('workspace_id', '=', workspaceId).executeTakeFirst();
  }

  /**
   * Inside a transaction: the invitation with this token digest, its row locked, so that
   * concurrent redemptions of one token queue on it (PostgreSQL; SQLite has one writer anyway).
   */
  lockByDigest(digest: string): Promise<InvitationRow | undefined> {
    return this.db
      .selectFrom('invitations')
      .selectAll()
      .where('token_hash', '=', digest)
      .$if(lockClause(this.dialect), (q) => q.forUpdate())
      .executeTakeFirst();
  }

  /** Pending to accepted; false when it was no longer pending (a concurrent redemption won). */
  async markAccepted(id: string, at: string): Promise<boolean> {
    const flipped = await this.db
      .updateTable('invitations')
      .set({ status: 'accepted', accepted_at: at })
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return flipped.numUpdatedRows === 1n;
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('invitations').where('id', '=', id).execute();
  }
}
