import type { GitHubInstallationsTable, GitHubLinkStatesTable } from '../tables/github.js';
import { Repository } from './repository.js';

export type InstallationRow = GitHubInstallationsTable;

/** GitHub App installations linked to workspaces, and the link flow's single-use states. */
export class InstallationRepository extends Repository {
  async isLinked(workspaceId: string, installationId: number): Promise<boolean> {
    const row = await this.db.selectFrom('github_installations').select('installation_id').where('workspace_id', '=', workspaceId).where('installation_id', '=', installationId).executeTakeFirst();
    return row !== undefined;
  }

  find(workspaceId: string, installationId: number): Promise<InstallationRow | undefined> {
    return this.db.selectFrom('github_installations').selectAll().where('workspace_id', '=', workspaceId).where('installation_id', '=', installationId).executeTakeFirst();
  }

  list(workspaceId: string): Promise<InstallationRow[]> {
    return this.db.selectFrom('github_installations').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at').orderBy('installation_id').execute();
  }

  /** Links it (linked again: the account name and the user who proved control are updated). */
  async link(row: InstallationRow): Promise<void> {
    await this.db
      .insertInto('github_installations')
      .values(row)
      .onConflict((oc) => oc.columns(['workspace_id', 'installation_id']).doUpdateSet({ account_login: row.account_login, linked_by: row.linked_by }))
      .execute();
  }

  /** Linked by the operator (`slipway admin link-installation`): linked again, only the account name is updated. */
  async linkByOperator(workspaceId: string, installationId: number, accountLogin: string, at: string): Promise<void> {
    await this.db
      .insertInto('github_installations')
      .values({ workspace_id: workspaceId, installation_id: installationId, account_login: accountLogin, linked_by: null, created_at: at })
      .onConflict((oc) => oc.columns(['workspace_id', 'installation_id']).doUpdateSet({ account_login: accountLogin }))
      .execute();
  }

  async unlink(workspaceId: string, installationId: number): Promise<void> {
    await this.db.deleteFrom('github_installations').where('workspace_id', '=', workspaceId).where('installation_id', '=', installationId).execute();
  }

  /** A new link state; states expired before `now` are removed on the way. */
  async addState(row: GitHubLinkStatesTable, now: string): Promise<void> {
    await this.db.deleteFrom('github_link_states').where('expires_at', '<', now).execute();
    await this.db.insertInto('github_link_states').values(row).execute();
  }

  /** Single use: true for the one caller that gets to delete the state. */
  async consumeState(state: Pick<GitHubLinkStatesTable, 'nonce' | 'workspace_id' | 'user_id'>): Promise<boolean> {
    const consumed = await this.db
      .deleteFrom('github_link_states')
      .where('nonce', '=', state.nonce)
      .where('workspace_id', '=', state.workspace_id)
      .where('user_id', '=', state.user_id)
      .executeTakeFirst();
    return Number(consumed.numDeletedRows) === 1;
  }
}
