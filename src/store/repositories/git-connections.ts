import type { GitConnectionsTable } from '../tables/projects.js';
import { orDuplicate } from '../dialects.js';
import { Repository } from './repository.js';

export type GitConnectionRow = GitConnectionsTable;

/** What an update may change: everything but the project, the creation time and the webhook. */
export type GitConnectionChanges = Omit<GitConnectionRow, 'project_id' | 'created_at' | 'webhook_id' | 'webhook_secret'>;

export class GitConnectionRepository extends Repository {
  of(projectId: string): Promise<GitConnectionRow | undefined> {
    return this.db.selectFrom('git_connections').selectAll().where('project_id', '=', projectId).executeTakeFirst();
  }

  /** The connections of these projects (any order). */
  async ofProjects(projectIds: readonly string[]): Promise<GitConnectionRow[]> {
    if (projectIds.length === 0) return [];
    return this.db.selectFrom('git_connections').selectAll().where('project_id', 'in', projectIds).execute();
  }

  /**
   * The projects a GitHub App push to `repoFullName@branch` through `installationId` is for:
   * connected to it with auto_deploy on. `linked` says whether the installation is linked to the
   * project's own workspace (only then does the push deploy it).
   */
  async appPushTargets(installationId: number, repoFullName: string, branch: string): Promise<{ id: string; workspace_id: string; linked: boolean }[]> {
    const rows = await this.db
      .selectFrom('git_connections')
      .innerJoin('projects', 'projects.id', 'git_connections.project_id')
      .leftJoin('github_installations', (j) =>
        j.onRef('github_installations.workspace_id', '=', 'projects.workspace_id').onRef('github_installations.installation_id', '=', 'git_connections.installation_id'),
      )
      .select(['projects.id', 'projects.workspace_id', 'github_installations.installation_id as linked_installation'])
      .where('git_connections.installation_id', '=', installationId)
      // GitHub names are case-insensitive: Acme/Web and acme/web are one repository.
      .where((eb) => eb(eb.fn('lower', ['git_connections.repo_full_name']), '=', repoFullName.toLowerCase()))
      .where('git_connections.branch', '=', branch)
      .where('git_connections.auto_deploy', '=', 1)
      .execute();
    return rows.map((r) => ({ id: r.id, workspace_id: r.workspace_id, linked: r.linked_installation !== null }));
  }

  byWebhookId(webhookId: string): Promise<GitConnectionRow | undefined> {
    return this.db.selectFrom('git_connections').selectAll().where('webhook_id', '=', webhookId).executeTakeFirst();
  }

  /** Fails with Duplicate (409) when the project has a connection already. */
  async insert(row: GitConnectionRow): Promise<void> {
    await orDuplicate(this.db.insertInto('git_connections').values(row).execute(), () => 'This project is already connected to a repository; update or remove that connection first.');
  }

  async update(projectId: string, changes: GitConnectionChanges): Promise<void> {
    await this.db.updateTable('git_connections').set(changes).where('project_id', '=', projectId).execute();
  }

  /** false when the project has no connection (any more). */
  async setWebhook(projectId: string, webhook: { id: string; sealedSecret: string; at: string }): Promise<boolean> {
    const updated = await this.db
      .updateTable('git_connections')
      .set({ webhook_id: webhook.id, webhook_secret: webhook.sealedSecret, updated_at: webhook.at })
      .where('project_id', '=', projectId)
      .executeTakeFirst();
    return updated.numUpdatedRows !== 0n;
  }

  async delete(projectId: string): Promise<void> {
    await this.db.deleteFrom('git_connections').where('project_id', '=', projectId).execute();
  }
}
