import { iso } from '../domain/clock.js';
import { conflict, forbidden, notFound } from '../domain/errors.js';
import { atLeast, type Role } from '../domain/roles.js';
import type { Repositories } from '../store/repositories/index.js';
import type { Access } from './context.js';
import type { Deps } from '../deps.js';
import type { MemberView } from './views.js';

export class MemberService {
  constructor(private readonly deps: Deps) {}

  async list(access: Access): Promise<MemberView[]> {
    return this.deps.store.repos.members.list(access.workspace.id);
  }

  async add(access: Access, input: { user_id: string; role: Role }): Promise<MemberView> {
    requireOwnerFor(access, input.role);
    return this.deps.store.transaction(async (tx) => {
      const user = await tx.users.byId(input.user_id);
      if (user === undefined) throw notFound('User');
      if ((await tx.members.find(access.workspace.id, user.id)) !== undefined) {
        throw conflict('That user is already a member of this workspace.');
      }
      const joined_at = iso(this.deps.clock.now());
      await tx.members.add({ workspace_id: access.workspace.id, user_id: user.id, role: input.role, joined_at });
      return { user_id: user.id, email: user.email, name: user.name, role: input.role, joined_at };
    });
  }

  async updateRole(access: Access, userId: string, role: Role): Promise<MemberView> {
    return this.deps.store.transaction(async (tx) => {
      const current = await lockAndRecheck(tx, access);
      const member = await tx.members.find(access.workspace.id, userId);
      if (member === undefined) throw notFound('Member');
      requireOwnerFor(current, member.role);
      requireOwnerFor(current, role);
      if (member.role === 'owner' && role !== 'owner') await keepAnOwner(tx, access.workspace.id);
      await tx.members.setRole(access.workspace.id, userId, role);
      return { ...member, role };
    });
  }

  /**
   * Owners and admins remove members; anyone may leave. The member's API keys listed under
   * this workspace are revoked with the membership.
   */
  async remove(access: Access, userId: string): Promise<MemberView> {
    const self = userId === access.caller.user.id;
    return this.deps.store.transaction(async (tx) => {
      const current = await lockAndRecheck(tx, access);
      if (!self && !atLeast(current.role, 'admin')) throw forbidden('Only an owner or admin can remove another member.');
      const member = await tx.members.find(access.workspace.id, userId);
      if (member === undefined) throw notFound('Member');
      if (!self) requireOwnerFor(current, member.role);
      if (member.role === 'owner') await keepAnOwner(tx, access.workspace.id);
      await tx.members.remove(access.workspace.id, userId);
      await tx.apiKeys.revokeForMember(access.workspace.id, userId, iso(this.deps.clock.now()));
      return member;
    });
  }
}

/**
 * Take the workspace's membership lock, then read the caller's role again: the role the auth
 * hook saw may have changed in a transaction that committed since.
 */
async function lockAndRecheck(tx: Repositories, access: Access): Promise<Access> {
  await tx.members.lockWorkspace(access.workspace.id);
  const me = await tx.members.find(access.workspace.id, access.caller.user.id);
  if (me === undefined) throw notFound('Workspace');
  return { ...access, role: me.role };
}

async function keepAnOwner(tx: Repositories, workspaceId: string): Promise<void> {
  if ((await tx.members.countOwners(workspaceId)) <= 1) throw conflict('The last owner of a workspace cannot be removed or demoted.');
}

/** Granting, changing or removing the `owner` role is the owners' own business. */
function requireOwnerFor(access: Access, role: Role): void {
  if (role === 'owner' && access.role !== 'owner') throw forbidden('Only an owner can grant or remove the owner role.');
}
