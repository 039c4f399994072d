import { addDays, iso } from '../domain/clock.js';
import { conflict, forbidden, notFound } from '../domain/errors.js';
import { INVITATION_TOKEN_PATTERN, newInvitationToken, sha256Hex } from '../domain/keys.js';
import type { Role } from '../domain/roles.js';
import { lockClause } from '../store/dialects.js';
import type { ApiKeyService } from './api-keys.service.js';
import { DEFAULT_KEY_DAYS } from './api-keys.service.js';
import type { Access } from './context.js';
import type { Deps } from '../deps.js';
import { findOrCreateUser, normalizeEmail } from './users.js';
import { invitationView, workspaceView, type InvitationView, type WorkspaceView } from './views.js';

export const INVITATION_DAYS = 7;

export interface CreatedInvitation extends InvitationView {
  /** Single-use; shown only here (and sent by e-mail when SMTP is configured). */
  token: string;
}

export interface AcceptedInvitation {
  user_id: string;
  workspace: WorkspaceView;
  role: Role;
  key: string;
  key_prefix: string;
  expires_at: string;
}

const gone = () => notFound('Invitation');

export class InvitationService {
  constructor(
    private readonly deps: Deps,
    private readonly keys: ApiKeyService,
  ) {}

  async create(access: Access, input: { email: string; role: Role }): Promise<CreatedInvitation> {
    if (input.role === 'owner' && access.role !== 'owner') throw forbidden('Only an owner can invite an owner.');
    const email = normalizeEmail(input.email);
    const now = this.deps.clock.now();
    const token = newInvitationToken(this.deps.random);
    const row = {
      id: this.deps.ids.id(),
      workspace_id: access.workspace.id,
      email,
      role: input.role,
      token_hash: sha256Hex(token),
      status: 'pending' as const,
      invited_by: access.caller.user.id,
      expires_at: iso(addDays(now, INVITATION_DAYS)),
      created_at: iso(now),
      accepted_at: null,
    };
    await this.deps.store.db.transaction().execute(async (trx) => {
      const member = await trx
        .selectFrom('members')
        .innerJoin('users', 'users.id', 'members.user_id')
        .select('members.user_id')
        .where('members.workspace_id', '=', access.workspace.id)
        .where('users.email', '=', email)
        .executeTakeFirst();
      if (member !== undefined) throw conflict(`${email} is already a member of this workspace.`);
      const pending = await trx
        .selectFrom('invitations')
        .select('id')
        .where('workspace_id', '=', access.workspace.id)
        .where('email', '=', email)
        .where('status', '=', 'pending')
        .where('expires_at', '>', iso(now))
        .executeTakeFirst();
      if (pending !== undefined) throw conflict(`${email} already has a pending invitation to this workspace.`);
      await trx.insertInto('invitations').values(row).execute();
    });
    return { ...invitationView(row, now), token };
  }

  async list(access: Access): Promise<InvitationView[]> {
    const rows = await this.deps.store.db
      .selectFrom('invitations')
      .selectAll()
      .where('workspace_id', '=', access.workspace.id)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    const now = this.deps.clock.now();
    return rows.map((r) => invitationView(r, now));
  }

  async revoke(access: Access, id: string): Promise<InvitationView> {
    const { db } = this.deps.store;
    const row = await db
      .selectFrom('invitations')
      .selectAll()
      .where('id', '=', id)
      .where('workspace_id', '=', access.workspace.id)
      .executeTakeFirst();
    if (row === undefined) throw gone();
    await db.deleteFrom('invitations').where('id', '=', row.id).execute();
    return invitationView(row, this.deps.clock.now());
  }

  /**
   * Redeem a token: the user is created if needed, joins with the invited role and receives a
   * first API key. Used, revoked, expired and unknown tokens all look the same (404).
   */
  async accept(input: { token: string; name?: string | undefined }): Promise<AcceptedInvitation> {
    if (!INVITATION_TOKEN_PATTERN.test(input.token)) throw gone();
    const digest = sha256Hex(input.token);
    const now = this.deps.clock.now();
    return this.deps.store.db.transaction().execute(async (trx) => {
      // Concurrent redemptions of one token queue on its row (PostgreSQL); SQLite runs one
      // writing transaction at a time anyway.
      const inv = await trx
        .selectFrom('invitations')
        .selectAll()
        .where('token_hash', '=', digest)
        .$if(lockClause(this.deps.store.dialect), (q) => q.forUpdate())
        .executeTakeFirst();
      if (inv?.status !== 'pending' || inv.expires_at <= iso(now)) throw gone();
      const workspace = await trx.selectFrom('workspaces').selectAll().where('id', '=', inv.workspace_id).executeTakeFirstOrThrow();
      const user = await findOrCreateUser(this.deps, trx, inv.email, input.name);
      const already = await trx
        .selectFrom('members')
        .select('role')
        .where('workspace_id', '=', inv.workspace_id)
        .where('user_id', '=', user.id)
        .executeTakeFirst();
      if (already !== undefined) throw conflict('You are already a member of this workspace.');
      // Guarded update: of two concurrent redemptions, only one flips the row.
      const flipped = await trx
        .updateTable('invitations')
        .set({ status: 'accepted', accepted_at: iso(now) })
        .where('id', '=', inv.id)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      if (flipped.numUpdatedRows !== 1n) throw gone();
      await trx
        .insertInto('members')
        .values({ workspace_id: inv.workspace_id, user_id: user.id, role: inv.role, joined_at: iso(now) })
        .execute();
      const key = await this.keys.issue(trx, {
        userId: user.id,
        workspaceId: inv.workspace_id,
        name: 'invitation',
        expiresInDays: DEFAULT_KEY_DAYS,
      });
      return {
        user_id: user.id,
        workspace: workspaceView(workspace, inv.role),
        role: inv.role,
        key: key.key,
        key_prefix: key.key_prefix,
        expires_at: key.expires_at,
      };
    });
  }
}
