import { iso } from '../domain/clock.js';
import { conflict, invalid } from '../domain/errors.js';
import { RESERVED_WORKSPACE_SLUGS } from '../domain/slug.js';
import { openWallet } from '../billing/wallet.service.js';
import { isUniqueViolation } from '../store/dialects.js';
import { holdWorkspaceRoom } from './limits.js';
import type { Access, Caller, WorkspaceRow } from './context.js';
import type { Deps } from '../deps.js';
import { DEFAULT_SETTINGS, parseSettings, workspaceView, type WorkspaceSettings, type WorkspaceView } from './views.js';

export class WorkspaceService {
  constructor(private readonly deps: Deps) {}

  /**
   * The creator becomes the workspace's owner, in the same transaction, unless they already own
   * as many workspaces as `--max-workspaces-per-user` allows (403, and nothing is written: no
   * workspace, no wallet, no credit).
   */
  async create(caller: Caller, input: { name: string; slug: string }): Promise<WorkspaceView> {
    if (RESERVED_WORKSPACE_SLUGS.has(input.slug)) {
      throw invalid(`The slug "${input.slug}" is reserved: /api/workspaces/${input.slug} is another route.`);
    }
    const now = iso(this.deps.clock.now());
    const row: WorkspaceRow = {
      id: this.deps.ids.id(),
      name: input.name,
      slug: input.slug,
      settings: JSON.stringify(DEFAULT_SETTINGS),
      created_at: now,
      updated_at: now,
    };
    try {
      await this.deps.store.db.transaction().execute(async (trx) => {
        await holdWorkspaceRoom(this.deps, trx, caller.user.id);
        await trx.insertInto('workspaces').values(row).execute();
        await trx.insertInto('workspace_creators').values({ workspace_id: row.id, user_id: caller.user.id, created_at: now }).execute();
        await trx
          .insertInto('members')
          .values({ workspace_id: row.id, user_id: caller.user.id, role: 'owner', joined_at: now })
          .execute();
        await openWallet(this.deps, trx, row.id);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`A workspace with slug "${input.slug}" already exists.`);
      throw err;
    }
    return workspaceView(row, 'owner');
  }

  async list(caller: Caller): Promise<WorkspaceView[]> {
    const rows = await this.deps.store.db
      .selectFrom('workspaces')
      .innerJoin('members', 'members.workspace_id', 'workspaces.id')
      .selectAll('workspaces')
      .select('members.role')
      .where('members.user_id', '=', caller.user.id)
      .orderBy('workspaces.created_at')
      .orderBy('workspaces.id')
      .execute();
    return rows.map(({ role, ...row }) => workspaceView(row, role));
  }

  get(access: Access): WorkspaceView {
    return workspaceView(access.workspace, access.role);
  }

  async update(access: Access, input: { name?: string | undefined; settings?: Partial<WorkspaceSettings> | undefined }): Promise<WorkspaceView> {
    const settings = { ...parseSettings(access.workspace.settings), ...(input.settings ?? {}) };
    const patch = {
      name: input.name ?? access.workspace.name,
      settings: JSON.stringify(settings),
      updated_at: iso(this.deps.clock.now()),
    };
    await this.deps.store.db.updateTable('workspaces').set(patch).where('id', '=', access.workspace.id).execute();
    return workspaceView({ ...access.workspace, ...patch }, access.role);
  }

  /**
   * Everything the workspace owns goes with it in one transaction: members, invitations and
   * API keys (and, through the same foreign keys, every later resource) cascade from this row.
   */
  async delete(access: Access): Promise<WorkspaceView> {
    await this.deps.store.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('workspaces').where('id', '=', access.workspace.id).execute();
    });
    return workspaceView(access.workspace, access.role);
  }
}
