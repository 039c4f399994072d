import type { Insertable } from 'kysely';
import type { Role } from '../../domain/roles.js';
import { lockClause, orDuplicate } from '../dialects.js';
import type { MembersTable, MemberStatus } from '../tables/tenancy.js';
import { Repository } from './repository.js';
import { asAccess, workspacesWithRole, type WorkspaceAccess } from './workspaces.js';

/** A member with the user's e-mail and name. */
export interface MemberDetail {
  user_id: string;
  email: string;
  name: string;
  role: Role;
  status: MemberStatus;
  joined_at: string;
}

/** A membership offered and not yet accepted, with its workspace's id. */
export interface PendingMembership {
  workspaceId: string;
  member: MemberDetail;
}

export class MemberRepository extends Repository {
  /** The members of a workspace, active and pending, in the order they joined (or were offered). */
  list(workspaceId: string): Promise<MemberDetail[]> {
    return this.detail(workspaceId).orderBy('members.joined_at').orderBy('members.user_id').execute();
  }

  find(workspaceId: string, userId: string): Promise<MemberDetail | undefined> {
    return this.detail(workspaceId).where('members.user_id', '=', userId).executeTakeFirst();
  }

  /** Whether a member of the workspace, active or pending, has this e-mail. */
  async hasEmail(workspaceId: string, email: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('members')
      .innerJoin('users', 'users.id', 'members.user_id')
      .select('members.user_id')
      .where('members.workspace_id', '=', workspaceId)
      .where('users.email', '=', email)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * The workspace `slug` and the role `userId` holds in it; undefined for a missing workspace,
   * a non-member and a pending member alike. Every workspace route's admission asks this.
   */
  accessBySlug(slug: string, userId: string): Promise<WorkspaceAccess | undefined> {
    const read = () => this.readAccessBySlug(slug, userId);
    return this.cacheable ? this.cache.memberships.get(`${slug}\u0000${userId}`, read) : read();
  }

  private async readAccessBySlug(slug: string, userId: string): Promise<WorkspaceAccess | undefined> {
    return asAccess(await workspacesWithRole(this.db, userId).where('workspaces.slug', '=', slug).executeTakeFirst());
  }

  /** The same by the workspace's id. */
  async access(workspaceId: string, userId: string): Promise<WorkspaceAccess | undefined> {
    return asAccess(await workspacesWithRole(this.db, userId).where('workspaces.id', '=', workspaceId).executeTakeFirst());
  }

  /** A membership; `status` defaults to `active` (a pending one is offered with `status: 'pending'`). */
  async add(row: Insertable<MembersTable>): Promise<void> {
    await orDuplicate(this.db.insertInto('members').values(row).execute(), () => 'That user is already a member of this workspace.');
    this.cache.invalidate();
  }

  /**
   * Makes `userId`'s pending membership active, joined at `at`; false when there is none (it was
   * cancelled, declined or accepted meanwhile). Guarded, so of two concurrent acceptances one wins.
   */
  async activate(workspaceId: string, userId: string, at: string): Promise<boolean> {
    const r = await this.db
      .updateTable('members')
      .set({ status: 'active', joined_at: at })
      .where('workspace_id', '=', workspaceId)
      .where('user_id', '=', userId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    this.cache.invalidate();
    return Number(r.numUpdatedRows) > 0;
  }

  /** The pending membership of `userId` in the workspace `slug`, with the workspace; undefined when there is none. */
  async pendingBySlug(slug: string, userId: string): Promise<PendingMembership | undefined> {
    const row = await this.db
      .selectFrom('members')
      .innerJoin('workspaces', 'workspaces.id', 'members.workspace_id')
      .innerJoin('users', 'users.id', 'members.user_id')
      .select(['members.workspace_id', 'members.user_id', 'users.email', 'users.name', 'members.role', 'members.status', 'members.joined_at'])
      .where('workspaces.slug', '=', slug)
      .where('members.user_id', '=', userId)
      .where('members.status', '=', 'pending')
      .executeTakeFirst();
    if (row === undefined) return undefined;
    const { workspace_id, ...member } = row;
    return { workspaceId: workspace_id, member };
  }

  /** Deletes `userId`'s pending membership; false when there is none (accepted, cancelled or declined meanwhile). */
  async removePending(workspaceId: string, userId: string): Promise<boolean> {
    const r = await this.db
      .deleteFrom('members')
      .where('workspace_id', '=', workspaceId)
      .where('user_id', '=', userId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    this.cache.invalidate();
    return Number(r.numDeletedRows) > 0;
  }

  async setRole(workspaceId: string, userId: string, role: Role): Promise<void> {
    await this.db.updateTable('members').set({ role }).where('workspace_id', '=', workspaceId).where('user_id', '=', userId).execute();
    this.cache.invalidate();
  }

  async remove(workspaceId: string, userId: string): Promise<void> {
    await this.db.deleteFrom('members').where('workspace_id', '=', workspaceId).where('user_id', '=', userId).execute();
    this.cache.invalidate();
  }

  /** The active owners: a pending owner has not consented, and counts for nothing. */
  async countOwners(workspaceId: string): Promise<number> {
    const owners = await this.db
      .selectFrom('members')
      .select('user_id')
      .where('workspace_id', '=', workspaceId)
      .where('role', '=', 'owner')
      .where('status', '=', 'active')
      .execute();
    return owners.length;
  }

  /**
   * Inside a transaction: serializes membership changes of one workspace, so that two
   * concurrent demotions cannot both see "another owner remains" (dialects.ts, lockClause).
   */
  async lockWorkspace(workspaceId: string): Promise<void> {
    if (lockClause(this.dialect)) await this.db.selectFrom('workspaces').select('id').where('id', '=', workspaceId).forUpdate().execute();
  }

  private detail(workspaceId: string) {
    return this.db
      .selectFrom('members')
      .innerJoin('users', 'users.id', 'members.user_id')
      .select(['members.user_id', 'users.email', 'users.name', 'members.role', 'members.status', 'members.joined_at'])
      .where('members.workspace_id', '=', workspaceId);
  }
}
