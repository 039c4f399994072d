import type { UptimeMonitorsTable } from '../schema.js';
import { Repository } from './repository.js';

export type UptimeMonitorRow = UptimeMonitorsTable;

export class UptimeRepository extends Repository {
  find(projectId: string): Promise<UptimeMonitorRow | undefined> {
    return this.db.selectFrom('uptime_monitors').selectAll().where('project_id', '=', projectId).executeTakeFirst();
  }

  /**
   * One statement: writes `row` when the project has no monitor yet, otherwise changes only
   * the fields of `patch`, so two concurrent writes of different fields both take effect.
   */
  upsert(row: UptimeMonitorRow, patch: Partial<Omit<UptimeMonitorRow, 'project_id'>>): Promise<UptimeMonitorRow> {
    return this.db
      .insertInto('uptime_monitors')
      .values(row)
      .onConflict((oc) => oc.column('project_id').doUpdateSet(patch))
      .returningAll()
      .executeTakeFirstOrThrow();
  }
}
