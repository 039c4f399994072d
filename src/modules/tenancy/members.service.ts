import { iso, type Clock } from '../../domain/clock.js';
import { conflict, forbidden, notFound } from '../../domain/errors.js';
import { atLeast, type Role } from '../../domain/roles.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import type { PendingMembership } from '../../store/repositories/members.js';
import type { Access, Caller } from '../../domain/access.js';
import type { Member } from './members.schema.js';

export class MemberService {
  constructor(
    private readonly store: StoreOf<'users' | 'members' | 'apiKeys'>,
    private readonly clock: Clock,
  ) {}

  async list(access: Access): Promise<Member[]> {
    return this.store.repos.members.list(access.workspace.id);
  }

  /**
   * Offers the workspace to an existing user: the membership is `pending` and grants nothing
   * until that user accepts it with their own key (`accept`). Nobody becomes a member, or an
   * owner, without consenting (docs/security.md, "Made-up users").
   */
  async add(access: Access, input: { user_id: string; role: Role }): Promise<Member> {
    requireOwnerFor(access, input.role);
    return this.store.transaction(async (tx) => {
      const user = await tx.users.byId(input.user_id);
      if (user === undefined) throw notFound('User');
      const found = await tx.members.find(access.workspace.id, user.id);
      if (found?.status === 'pending') throw conflict('That user already has a pending membership of this workspace.');
      if (found !== undefined) throw conflict('That user is already a member of this workspace.');
      const joined_at = iso(this.clock.now());
      await tx.members.add({ workspace_id: access.workspace.id, user_id: user.id, role: input.role, status: 'pending', joined_at });
      return { user_id: user.id, email: user.email, name: user.name, role: input.role, status: 'pending', joined_at };
    });
  }

  /** The user of a pending membership takes it: from now on it grants its role. */
  async accept(caller: Caller, slug: string, userId: string): Promise<Member> {
    return this.store.transaction(async (tx) => {
      const { workspaceId, member } = await ownPending(tx, caller, slug, userId);
      await tx.members.lockWorkspace(workspaceId);
      const joined_at = iso(this.clock.now());
      // Guarded: a cancellation or a second acceptance that committed first leaves nothing to take.
      if (!(await tx.members.activate(workspaceId, userId, joined_at))) throw notFound('Workspace');
      return { ...member, status: 'active', joined_at };
    });
  }

  /** The user of a pending membership refuses it: it is gone, as if never offered. */
  async decline(caller: Caller, slug: string, userId: string): Promise<Member> {
    return this.store.transaction(async (tx) => {
      const { workspaceId, member } = await ownPending(tx, caller, slug, userId);
      await tx.members.lockWorkspace(workspaceId);
      // Guarded like `accept`: an acceptance or cancellation that committed first wins.
      if (!(await tx.members.removePending(workspaceId, userId))) throw notFound('Workspace');
      return member;
    });
  }

  async updateRole(access: Access, userId: string, role: Role): Promise<Member> {
    return this.store.transaction(async (tx) => {
      const current = await lockAndRecheck(tx, access);
      const member = await tx.members.find(access.workspace.id, userId);
      if (member === undefined) throw notFound('Member');
      // The user consents to the role that was offered; another one is another offer.
      if (member.status === 'pending') {
        throw conflict('That membership is pending: the user has not accepted it yet. Cancel it (DELETE) and add the user again with the new role.');
      }
      requireOwnerFor(current, member.role);
      requireOwnerFor(current, role);
      if (member.role === 'owner' && role !== 'owner') await keepAnOwner(tx, access.workspace.id);
      await tx.members.setRole(access.workspace.id, userId, role);
      return { ...member, role };
    });
  }

  /**
   * Owners and admins remove members and cancel pending memberships; anyone may leave. The
   * member's API keys listed under this workspace are revoked with the membership.
   */
  async remove(access: Access, userId: string): Promise<Member> {
    const self = userId === access.caller.user.id;
    return this.store.transaction(async (tx) => {
      const current = await lockAndRecheck(tx, access);
      if (!self && !atLeast(current.role, 'admin')) throw forbidden('Only an owner or admin can remove another member.');
      const member = await tx.members.find(access.workspace.id, userId);
      if (member === undefined) throw notFound('Member');
      if (!self) requireOwnerFor(current, member.role);
      // a pending owner is no owner yet: cancelling them leaves the owners as they were
      if (member.role === 'owner' && member.status === 'active') await keepAnOwner(tx, access.workspace.id);
      await tx.members.remove(access.workspace.id, userId);
      await tx.apiKeys.revokeForMember(access.workspace.id, userId, iso(this.clock.now()));
      return member;
    });
  }
}

/**
 * The pending membership of `userId` in `slug`, for `caller` to accept or decline: only its own
 * user may. Anyone else gets what a non-member gets (404), or, as an active member of the
 * workspace who can see the offer listed, 403; a caller who is already an active member 409.
 */
async function ownPending(tx: Pick<Repositories, 'members'>, caller: Caller, slug: string, userId: string): Promise<PendingMembership> {
  const pending = await tx.members.pendingBySlug(slug, userId);
  if (userId !== caller.user.id) {
    const mine = await tx.members.accessBySlug(slug, caller.user.id);
    if (mine === undefined) throw notFound('Workspace');
    if (pending === undefined) throw notFound('Member');
    throw forbidden('Only the user a membership is offered to can accept or decline it, with their own API key.');
  }
  if (pending !== undefined) return pending;
  if ((await tx.members.accessBySlug(slug, caller.user.id)) !== undefined) throw conflict('You are already a member of this workspace.');
  throw notFound('Workspace');
}

/**
 * Take the workspace's membership lock, then read the caller's role again: the role the auth
 * hook saw may have changed in a transaction that committed since.
 */
async function lockAndRecheck(tx: Pick<Repositories, 'members'>, access: Access): Promise<Access> {
  await tx.members.lockWorkspace(access.workspace.id);
  const me = await tx.members.find(access.workspace.id, access.caller.user.id);
  if (me?.status !== 'active') throw notFound('Workspace');
  return { ...access, role: me.role };
}

/** Counts the active owners only: a pending owner has not consented to anything yet. */
async function keepAnOwner(tx: Pick<Repositories, 'members'>, workspaceId: string): Promise<void> {
  if ((await tx.members.countOwners(workspaceId)) <= 1) throw conflict('The last owner of a workspace cannot be removed or demoted.');
}

/** Granting, changing or removing the `owner` role is the owners' own business. */
function requireOwnerFor(access: Access, role: Role): void {
  if (role === 'owner' && access.role !== 'owner') throw forbidden('Only an owner can grant or remove the owner role.');
}
