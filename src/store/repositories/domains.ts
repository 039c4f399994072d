import type { DomainsTable } from '../tables/domains.js';
import { orDuplicate } from '../dialects.js';
import { Repository } from './repository.js';

export type DomainRow = DomainsTable;

export class DomainRepository extends Repository {
  /** The project's domains, oldest first. */
  list(projectId: string): Promise<DomainRow[]> {
    return this.db.selectFrom('domains').selectAll().where('project_id', '=', projectId).orderBy('created_at').orderBy('id').execute();
  }

  /** The names the project holds (verified or not). */
  async namesOf(projectId: string): Promise<string[]> {
    return (await this.db.selectFrom('domains').select(['domain']).where('project_id', '=', projectId).execute()).map((d) => d.domain);
  }

  /** The names the project has proven (the ones routed to it). */
  async verifiedNamesOf(projectId: string): Promise<string[]> {
    return (await this.db.selectFrom('domains').select('domain').where('project_id', '=', projectId).where('verified', '=', 1).execute()).map((d) => d.domain);
  }

  /** Every proven name with its project, in no particular order. */
  allVerified(): Promise<Pick<DomainRow, 'project_id' | 'domain'>[]> {
    return this.db.selectFrom('domains').select(['project_id', 'domain']).where('verified', '=', 1).execute();
  }

  find(projectId: string, id: string): Promise<DomainRow | undefined> {
    return this.db.selectFrom('domains').selectAll().where('id', '=', id).where('project_id', '=', projectId).executeTakeFirst();
  }

  /** Every domain still waiting for its proof, oldest first. */
  pending(): Promise<DomainRow[]> {
    return this.db.selectFrom('domains').selectAll().where('verified', '=', 0).orderBy('created_at').orderBy('id').execute();
  }

  /** Whether a project has proven the name; `except` leaves one domain row out. */
  async isVerified(domain: string, except?: string): Promise<boolean> {
    const held = await this.db
      .selectFrom('domains')
      .select('id')
      .where('domain', '=', domain)
      .where('verified', '=', 1)
      .$if(except !== undefined, (q) => q.where('id', '!=', except ?? ''))
      .executeTakeFirst();
    return held !== undefined;
  }

  /** Whether a project other than `projectId` claims the name (verified or not). */
  async claimedByOther(domain: string, projectId: string): Promise<boolean> {
    const other = await this.db.selectFrom('domains').select('id').where('domain', '=', domain).where('project_id', '!=', projectId).executeTakeFirst();
    return other !== undefined;
  }

  /** Fails with Duplicate (409) for a name the project has, or one verified elsewhere. */
  async insert(row: DomainRow): Promise<void> {
    await orDuplicate(this.db.insertInto('domains').values(row).execute(), () => `The domain "${row.domain}" is already in use on this platform.`);
  }

  /**
   * Pending to verified; false when it was not pending. A second verified holder of the name
   * fails with Duplicate (409; a partial unique index).
   */
  async markVerified(id: string, at: string): Promise<boolean> {
    const r = await orDuplicate(
      this.db.updateTable('domains').set({ verified: 1, verified_at: at }).where('id', '=', id).where('verified', '=', 0).executeTakeFirst(),
      () => 'The domain has been verified by another project on this platform; it cannot be verified here.',
    );
    return Number(r.numUpdatedRows) > 0;
  }

  /** One statement, so that of two concurrent removals only one gets the row back. */
  remove(projectId: string, id: string): Promise<DomainRow | undefined> {
    return this.db.deleteFrom('domains').where('id', '=', id).where('project_id', '=', projectId).returningAll().executeTakeFirst();
  }
}
