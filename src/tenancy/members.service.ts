import type { Kysely } from 'kysely';
import { iso } from '../domain/clock.js';
import { conflict, forbidden, notFound } from '../domain/errors.js';
import { atLeast, type Role } from '../domain/roles.js';
import { lockClause } from '../store/dialects.js';
import type { DB } from '../store/schema.js';
import type { Access } from './context.js';
import type { Deps } from '../deps.js';
import type { MemberView } from './views.js';

export class MemberService {
  constructor(private readonly deps: Deps) {}

  async list(access: Access): Promise<MemberView[]> {
    return this.members(this.deps.store.db, access.workspace.id);
  }

  async add(access: Access, input: { user_id: string; role: Role }): Promise<MemberView> {
    requireOwnerFor(access, input.role);
    return this.deps.store.db.transaction().execute(async (trx) => {
      const user = await trx.selectFrom('users').selectAll().where('id', '=', input.user_id).executeTakeFirst();
      if (user === undefined) throw notFound('User');
      if ((await this.find(trx, access.workspace.id, user.id)) !== undefined) {
        throw conflict('That user is already a member of this workspace.');
      }
      const joined_at = iso(this.deps.clock.now());
      await trx
        .insertInto('members')
        .values({ workspace_id: access.workspace.id, user_id: user.id, role: input.role, joined_at })
        .execute();
      return { user_id: user.id, email: user.email, name: user.name, role: input.role, joined_at };
    });
  }

  async updateRole(access: Access, userId: string, role: Role): Promise<MemberView> {
    return this.deps.store.db.transaction().execute(async (trx) => {
      const current = await this.lockAndRecheck(trx, access);
      const member = await this.find(trx, access.workspace.id, userId);
      if (member === undefined) throw notFound('Member');
      requireOwnerFor(current, member.role);
      requireOwnerFor(current, role);
      if (member.role === 'owner' && role !== 'owner') await this.keepAnOwner(trx, access.workspace.id);
      await trx
        .updateTable('members')
        .set({ role })
        .where('workspace_id', '=', access.workspace.id)
        .where('user_id', '=', userId)
        .execute();
      return { ...member, role };
    });
  }

  /**
   * Owners and admins remove members; anyone may leave. The member's API keys listed under
   * this workspace are revoked with the membership.
   */
  async remove(access: Access, userId: string): Promise<MemberView> {
    const self = userId === access.caller.user.id;
    return this.deps.store.db.transaction().execute(async (trx) => {
      const current = await this.lockAndRecheck(trx, access);
      if (!self && !atLeast(current.role, 'admin')) throw forbidden('Only an owner or admin can remove another member.');
      const member = await this.find(trx, access.workspace.id, userId);
      if (member === undefined) throw notFound('Member');
      if (!self) requireOwnerFor(current, member.role);
      if (member.role === 'owner') await this.keepAnOwner(trx, access.workspace.id);
      await trx.deleteFrom('members').where('workspace_id', '=', access.workspace.id).where('user_id', '=', userId).execute();
      await trx
        .updateTable('api_keys')
        .set({ revoked_at: iso(this.deps.clock.now()) })
        .where('workspace_id', '=', access.workspace.id)
        .where('user_id', '=', userId)
        .where('revoked_at', 'is', null)
        .execute();
      return member;
    });
  }

  private members(db: Kysely<DB>, workspaceId: string): Promise<MemberView[]> {
    return memberQuery(db, workspaceId).orderBy('members.joined_at').orderBy('members.user_id').execute();
  }

  private find(db: Kysely<DB>, workspaceId: string, userId: string): Promise<MemberView | undefined> {
    return memberQuery(db, workspaceId).where('members.user_id', '=', userId).executeTakeFirst();
  }

  /**
   * Take the workspace's membership lock, then read the caller's role again: the role the auth
   * hook saw may have changed in a transaction that committed since.
   */
  private async lockAndRecheck(db: Kysely<DB>, access: Access): Promise<Access> {
    if (lockClause(this.deps.store.dialect)) {
      await db.selectFrom('workspaces').select('id').where('id', '=', access.workspace.id).forUpdate().execute();
    }
    const me = await this.find(db, access.workspace.id, access.caller.user.id);
    if (me === undefined) throw notFound('Workspace');
    return { ...access, role: me.role };
  }

  private async keepAnOwner(db: Kysely<DB>, workspaceId: string): Promise<void> {
    const owners = await db
      .selectFrom('members')
      .select('user_id')
      .where('workspace_id', '=', workspaceId)
      .where('role', '=', 'owner')
      .execute();
    if (owners.length <= 1) throw conflict('The last owner of a workspace cannot be removed or demoted.');
  }
}

const memberQuery = (db: Kysely<DB>, workspaceId: string) =>
  db
    .selectFrom('members')
    .innerJoin('users', 'users.id', 'members.user_id')
    .select(['members.user_id', 'users.email', 'users.name', 'members.role', 'members.joined_at'])
    .where('members.workspace_id', '=', workspaceId);

/** Granting, changing or removing the `owner` role is the owners' own business. */
function requireOwnerFor(access: Access, role: Role): void {
  if (role === 'owner' && access.role !== 'owner') throw forbidden('Only an owner can grant or remove the owner role.');
}
