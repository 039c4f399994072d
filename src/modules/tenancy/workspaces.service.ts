import { iso, type Clock, type IdSource, type Sources } from '../../domain/clock.js';
import { forbidden, invalid } from '../../domain/errors.js';
import type { LogStore } from '../../domain/logs.js';
import { RESERVED_WORKSPACE_SLUGS } from '../../domain/slug.js';
import type { Repositories } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';
import { holdWorkspaceRoom, type StartingWallet, type TenantLimits } from './policy.js';
import type { Access, Caller, WorkspaceRecord } from '../../domain/access.js';
import { DEFAULT_SETTINGS, parseSettings, workspaceView } from './views.js';
import type { Workspace, WorkspaceSettings } from './workspaces.schema.js';

/**
 * A new workspace, with `ownerId` as its owner and a wallet holding the configured starting
 * credit (when the owner is verified: docs/security.md, "Made-up users"), inside the caller's
 * transaction. The one way a workspace is made: the API, the bootstrap and the test fixtures
 * all come here. `countedFor`: the user whose `--max-workspaces-per-user` counts it (null: the
 * bootstrap, which is not limited). A slug that is taken fails with Duplicate (409).
 */
export async function createWorkspace(
  sources: Pick<Sources, 'clock' | 'ids'>,
  wallet: StartingWallet,
  tx: Pick<Repositories, 'users' | 'workspaces'>,
  input: { name: string; slug: string; ownerId: string; countedFor: string | null },
): Promise<WorkspaceRecord> {
  const now = iso(sources.clock.now());
  // An unverified address earns no credit; the repository grants it once per user.
  const owner = await tx.users.byId(input.ownerId);
  const credit = owner?.verified_at === null || owner === undefined ? 0 : wallet.credit;
  const workspace: WorkspaceRecord = {
    id: sources.ids.id(),
    name: input.name,
    slug: input.slug,
    settings: JSON.stringify(DEFAULT_SETTINGS),
    created_at: now,
    updated_at: now,
  };
  await tx.workspaces.create({
    workspace,
    ownerId: input.ownerId,
    creatorId: input.countedFor,
    wallet: { currency: wallet.currency, credit, ledgerId: sources.ids.id() },
  });
  return workspace;
}

export class WorkspaceService {
  constructor(
    private readonly store: StoreOf<'users' | 'workspaces'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly limits: TenantLimits,
    private readonly wallet: StartingWallet,
    private readonly logs: Pick<LogStore, 'deleteWorkspace'>,
  ) {}

  /**
   * The creator becomes the workspace's owner, in the same transaction, unless their address is
   * not verified, or they already created as many workspaces as `--max-workspaces-per-user`
   * allows (403, and nothing is written: no workspace, no wallet, no credit).
   */
  async create(caller: Caller, input: { name: string; slug: string }): Promise<Workspace> {
    if (RESERVED_WORKSPACE_SLUGS.has(input.slug)) {
      throw invalid(`The slug "${input.slug}" is reserved: /api/workspaces/${input.slug} is another route.`);
    }
    // a slug that is taken: 409 from the repository
    const row = await this.store.transaction(async (tx) => {
      await requireVerified(tx, caller.user.id);
      await holdWorkspaceRoom(this.limits, tx, caller.user.id);
      return createWorkspace({ clock: this.clock, ids: this.ids }, this.wallet, tx, { name: input.name, slug: input.slug, ownerId: caller.user.id, countedFor: caller.user.id });
    });
    return workspaceView(row, 'owner');
  }

  async list(caller: Caller): Promise<Workspace[]> {
    const rows = await this.store.repos.workspaces.ofMember(caller.user.id);
    return rows.map(({ workspace, role }) => workspaceView(workspace, role));
  }

  get(access: Access): Workspace {
    return workspaceView(access.workspace, access.role);
  }

  async update(access: Access, input: { name?: string | undefined; settings?: Partial<WorkspaceSettings> | undefined }): Promise<Workspace> {
    const settings = { ...parseSettings(access.workspace.settings), ...(input.settings ?? {}) };
    const patch = {
      name: input.name ?? access.workspace.name,
      settings: JSON.stringify(settings),
      updated_at: iso(this.clock.now()),
    };
    await this.store.repos.workspaces.update(access.workspace.id, patch);
    return workspaceView({ ...access.workspace, ...patch }, access.role);
  }

  /**
   * Everything the workspace owns goes with it in one transaction: members, invitations and
   * API keys (and, through the same foreign keys, every later resource) cascade from this row.
   * The logs go after it (docs/logs.md#layout); if that fails, `logsLeft` hears of it and the
   * next retention pass removes the logs of a workspace that is gone.
   */
  async delete(access: Access, logsLeft: (err: unknown) => void = () => undefined): Promise<Workspace> {
    await this.store.transaction((tx) => tx.workspaces.delete(access.workspace.id));
    await this.logs.deleteWorkspace(access.workspace.id).catch(logsLeft);
    return workspaceView(access.workspace, access.role);
  }
}

/**
 * A workspace of one's own takes a proven address: otherwise anyone who may invite could make
 * users from invented addresses, each with a workspace and (before) its starting credit. Read in
 * the transaction, not from the caller's cached row, so that a verification counts at once.
 */
async function requireVerified(tx: Pick<Repositories, 'users'>, userId: string): Promise<void> {
  const user = await tx.users.byId(userId);
  if (user === undefined || user.verified_at !== null) return;
  throw forbidden(
    `Your e-mail address ${user.email} is not verified, so you cannot create a workspace yet: redeem an invitation e-mailed to it (on an installation with SMTP), or ask the operator to run \`slipway admin verify-user --email ${user.email}\`.`,
  );
}
