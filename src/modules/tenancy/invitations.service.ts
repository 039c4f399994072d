import { addDays, iso, type Clock, type IdSource, type Random } from '../../domain/clock.js';
import { AppError, conflict, Duplicate, forbidden, notFound, unauthorized } from '../../domain/errors.js';
import { INVITATION_TOKEN_PATTERN, newInvitationToken, sha256Hex } from '../../domain/keys.js';
import type { Role } from '../../domain/roles.js';
import { MailSendError, type Mailer, type MailMessage } from '../../adapters/notify/mailer.js';
import type { StoreOf } from '../../store/db.js';
import type { ApiKeyService } from './api-keys.service.js';
import { DEFAULT_KEY_DAYS } from './api-keys.service.js';
import type { Access, Caller, UserRecord, WorkspaceRecord } from '../../domain/access.js';
import type { InvitationPolicy } from './policy.js';
import { createNewUser, normalizeEmail } from './users.js';
import type { AcceptedInvitation, CreatedInvitation, Invitation } from './invitations.schema.js';
import { invitationView, workspaceView } from './views.js';

export const INVITATION_DAYS = 7;

const gone = () => notFound('Invitation');

const UNDELIVERABLE =
  'This installation cannot deliver invitations: it has no SMTP server (--smtp-url) and does not show invitation tokens (--invitation-token-in-response no); add an existing user with POST /api/workspaces/:slug/members, or ask the operator to configure SMTP.';

export class InvitationService {
  constructor(
    private readonly store: StoreOf<'invitations' | 'members' | 'users' | 'workspaces' | 'apiKeys'>,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly ids: IdSource,
    private readonly policy: InvitationPolicy,
    private readonly keys: ApiKeyService,
    /** outgoing e-mail (`--smtp-url`); absent: the token is handed back, or invitations are refused */
    private readonly mailer: Mailer | undefined,
  ) {}

  /**
   * With a mailer the token is e-mailed to the invited address and is not in the answer; if the
   * server does not take the message, the invitation is deleted again and the answer is 502.
   * Without one, the answer carries the token, unless the operator said no: then 409.
   */
  async create(access: Access, input: { email: string; role: Role }): Promise<CreatedInvitation> {
    if (input.role === 'owner' && access.role !== 'owner') throw forbidden('Only an owner can invite an owner.');
    const { mailer } = this;
    if (mailer === undefined && !this.policy.tokenInResponse) throw conflict(UNDELIVERABLE);
    const email = normalizeEmail(input.email);
    const now = this.clock.now();
    const token = newInvitationToken(this.random);
    const row = {
      id: this.ids.id(),
      workspace_id: access.workspace.id,
      email,
      role: input.role,
      token_hash: sha256Hex(token),
      status: 'pending' as const,
      invited_by: access.caller.user.id,
      expires_at: iso(addDays(now, INVITATION_DAYS)),
      created_at: iso(now),
      accepted_at: null,
      // Redeeming an e-mailed token proves the address; one handed back here proves nothing.
      emailed: mailer === undefined ? 0 : 1,
    };
    await this.store.transaction(async (tx) => {
      if (await tx.members.hasEmail(access.workspace.id, email)) throw conflict(`${email} is already a member of this workspace (or has a pending membership of it).`);
      if (await tx.invitations.hasPending(access.workspace.id, email, iso(now))) {
        throw conflict(`${email} already has a pending invitation to this workspace.`);
      }
      await tx.invitations.insert(row);
    });
    const view = invitationView(row, now);
    if (mailer === undefined) return { ...view, token };
    // Sent after the commit, never inside the transaction: SMTP may take seconds, and SQLite's
    // one writer would wait for it. The token is unknown to anyone until the server takes it.
    try {
      await mailer.send(invitationMail({ to: email, token, role: input.role, workspace: access.workspace, inviter: access.caller.user, expiresAt: row.expires_at, apiUrl: this.policy.publicUrl }));
    } catch (err) {
      await this.store.repos.invitations.delete(row.id);
      if (!(err instanceof MailSendError)) throw err;
      throw new AppError(
        'BAD_GATEWAY',
        `The invitation e-mail could not be sent: ${err.message}. Nothing was saved; try again later, or ask the operator to check the SMTP settings.`,
      );
    }
    return view;
  }

  async list(access: Access): Promise<Invitation[]> {
    const rows = await this.store.repos.invitations.list(access.workspace.id);
    const now = this.clock.now();
    return rows.map((r) => invitationView(r, now));
  }

  async revoke(access: Access, id: string): Promise<Invitation> {
    const { invitations } = this.store.repos;
    const row = await invitations.find(access.workspace.id, id);
    if (row === undefined) throw gone();
    await invitations.delete(row.id);
    return invitationView(row, this.clock.now());
  }

  /**
   * Redeem a token. For an address without an account, the user is created, joins with the
   * invited role and receives a first API key. For an address that has an account, the request
   * must carry that account's own key (`presentedKey`, from X-API-Key): the user joins and no key
   * is minted, so a token alone never lets anyone act as an existing user. Used, revoked,
   * expired and unknown tokens all look the same (404).
   */
  async accept(input: { token: string; name?: string | undefined }, presentedKey?: string): Promise<AcceptedInvitation> {
    if (!INVITATION_TOKEN_PATTERN.test(input.token)) throw gone();
    // Authenticated before the transaction (it records last_used_at), consulted only when the
    // invited address already has an account: a stale key sent along never blocks a new user.
    const caller = presentedKey === undefined || presentedKey === '' ? null : await this.keys.authenticate(presentedKey).catch(refusal);
    const digest = sha256Hex(input.token);
    const now = this.clock.now();
    try {
      return await this.store.transaction(async (tx) => {
        // Concurrent redemptions of one token queue on its row.
        const inv = await tx.invitations.lockByDigest(digest);
        if (inv?.status !== 'pending' || inv.expires_at <= iso(now)) throw gone();
        const workspace = await tx.workspaces.byId(inv.workspace_id);
        if (workspace === undefined) throw new Error(`invitation ${inv.id} has no workspace`);
        const existing = await tx.users.byEmail(inv.email);
        if (existing !== undefined) requireOwnKey(caller, existing);
        // A token that travelled only by e-mail proves the address it was sent to; one handed
        // back in the inviter's response proves nothing (docs/security.md, "Made-up users").
        const proven = inv.emailed === 1;
        const user = existing ?? (await createNewUser({ clock: this.clock, ids: this.ids }, tx, { email: inv.email, name: input.name, verified: proven }));
        const membership = await tx.members.find(inv.workspace_id, user.id);
        if (membership?.status === 'pending') {
          throw conflict(`You already have a pending membership of this workspace: accept it with POST /api/workspaces/${workspace.slug}/members/${user.id}/accept.`);
        }
        if (membership !== undefined) throw conflict('You are already a member of this workspace.');
        // Guarded update: of two concurrent redemptions, only one flips the row.
        if (!(await tx.invitations.markAccepted(inv.id, iso(now)))) throw gone();
        if (existing !== undefined && proven) await tx.users.verify(user.id, iso(now));
        await tx.members.add({ workspace_id: inv.workspace_id, user_id: user.id, role: inv.role, status: 'active', joined_at: iso(now) });
        const joined = { user_id: user.id, workspace: workspaceView(workspace, inv.role), role: inv.role };
        // An existing user keeps the keys they have: none is minted for them.
        if (existing !== undefined) return joined;
        const key = await this.keys.issue(tx, {
          userId: user.id,
          workspaceId: inv.workspace_id,
          name: 'invitation',
          expiresInDays: DEFAULT_KEY_DAYS,
        });
        return { ...joined, key: key.key, key_prefix: key.key_prefix, expires_at: key.expires_at };
      });
    } catch (err) {
      // The invited address got an account, or the user a membership, in a concurrent
      // transaction (PostgreSQL reports it when this one writes): the repository says which, this says what to do.
      if (err instanceof Duplicate) throw conflict('The account or membership of this invitation changed at the same moment; send the request again.');
      throw err;
    }
  }
}

/** A failed authentication, kept to be reported only if the key turns out to be needed. */
function refusal(err: unknown): AppError {
  if (err instanceof AppError) return err;
  throw err;
}

/** Accepting for an existing account takes that account's own, live key. */
function requireOwnKey(caller: Caller | AppError | null, user: UserRecord): void {
  const how = `accept it with that account's own API key in the X-API-Key header (no new key is made for an existing account)`;
  if (caller === null) throw unauthorized(`This invitation is for ${user.email}, which already has an account: ${how}.`);
  if (caller instanceof AppError) throw unauthorized(`${caller.message.replace(/\.$/, '')}; this invitation is for an existing account: ${how}.`);
  if (caller.user.id !== user.id) throw unauthorized(`The API key belongs to another account than ${user.email}, the invited address: ${how}.`);
}

/** The e-mail that carries an invitation's token to the invited address. */
export function invitationMail(o: {
  to: string;
  token: string;
  role: Role;
  workspace: WorkspaceRecord;
  inviter: UserRecord;
  expiresAt: string;
  apiUrl?: string | undefined;
}): MailMessage {
  const api = o.apiUrl === undefined || o.apiUrl === '' ? 'https://SLIPWAY-API' : o.apiUrl.replace(/\/+$/, '');
  const text = [
    `${o.inviter.name} (${o.inviter.email}) invites you to join the workspace "${o.workspace.name}" (${o.workspace.slug}) on Slipway as ${o.role === 'admin' || o.role === 'owner' ? 'an' : 'a'} ${o.role}.`,
    '',
    `Your invitation token (single use, valid until ${o.expiresAt}):`,
    '',
    `    ${o.token}`,
    '',
    `To accept, send it to POST /api/invitations/accept on the Slipway API${o.apiUrl === undefined || o.apiUrl === '' ? ` (ask ${o.inviter.email} for its address)` : ''}:`,
    '',
    `    curl -X POST ${api}/api/invitations/accept \\`,
    `      -H 'Content-Type: application/json' \\`,
    `      -d '{"token": "${o.token}", "name": "Your Name"}'`,
    '',
    `- If ${o.to} has no Slipway account yet, the answer carries your first API key. It is shown only once: keep it safe.`,
    `- If ${o.to} already has an account, add your own API key to the request (-H 'X-API-Key: svc_sk_...'): you join the workspace with the keys you have, and no new key is made.`,
    '',
    'If you did not expect this invitation, ignore this e-mail: nothing happens unless the token is sent.',
    '',
  ].join('\n');
  return { to: o.to, subject: `Invitation to the Slipway workspace "${o.workspace.name}"`, text };
}
