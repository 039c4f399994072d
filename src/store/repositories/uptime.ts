import { toNumber } from '../dialects.js';
import type { ProjectStatus } from '../tables/projects.js';
import type { UptimeChecksTable, UptimeIncidentsTable, UptimeMonitorsTable, UptimeNotificationsTable, UptimeStatus } from '../tables/uptime.js';
import { Repository } from './repository.js';

export type UptimeMonitorRow = UptimeMonitorsTable;
export type UptimeCheckRow = UptimeChecksTable;
export type UptimeIncidentRow = UptimeIncidentsTable;
export type UptimeNotificationRow = UptimeNotificationsTable;

/** An enabled monitor with what the checker needs of its project. */
export interface MonitorTarget {
  project_id: string;
  workspace_id: string;
  workspace_slug: string;
  name: string;
  slug: string;
  host_label: string;
  project_status: ProjectStatus;
  check_interval_sec: number;
  check_path: string;
  chat_webhook_url: string | null;
  notify_email: string | null;
  status: UptimeStatus;
  failures: number;
  successes: number;
  incident_id: string | null;
}

/** The running state of a monitor that a check moves (conditionally on the state it read). */
export type MonitorState = Pick<UptimeMonitorRow, 'status' | 'failures' | 'successes' | 'incident_id'>;

export interface Rollup {
  hour: string;
  checks: number;
  failures: number;
  sum_ms: number;
  histogram: number[];
}

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

  /** Every enabled monitor, with its project (the checker's schedule). */
  enabled(): Promise<MonitorTarget[]> {
    return this.db
      .selectFrom('uptime_monitors as m')
      .innerJoin('projects as p', 'p.id', 'm.project_id')
      .innerJoin('workspaces as w', 'w.id', 'p.workspace_id')
      .select([
        'm.project_id',
        'p.workspace_id',
        'w.slug as workspace_slug',
        'p.name',
        'p.slug',
        'p.host_label',
        'p.status as project_status',
        'm.check_interval_sec',
        'm.check_path',
        'm.chat_webhook_url',
        'm.notify_email',
        'm.status',
        'm.failures',
        'm.successes',
        'm.incident_id',
      ])
      .where('m.enabled', '=', 1)
      .execute();
  }

  /**
   * Moves the monitor from `from` to `to` after a check, only if no other check moved it
   * meanwhile: true when it did. The last check's time, response time and error go with it.
   */
  async move(projectId: string, from: MonitorState, to: MonitorState & Pick<UptimeMonitorRow, 'last_checked_at' | 'last_response_ms' | 'last_error'>): Promise<boolean> {
    let q = this.db
      .updateTable('uptime_monitors')
      .set(to)
      .where('project_id', '=', projectId)
      .where('status', '=', from.status)
      .where('failures', '=', from.failures)
      .where('successes', '=', from.successes);
    q = from.incident_id === null ? q.where('incident_id', 'is', null) : q.where('incident_id', '=', from.incident_id);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  async addCheck(row: UptimeCheckRow): Promise<void> {
    await this.db.insertInto('uptime_checks').values(row).execute();
  }

  async rollup(projectId: string, hour: string): Promise<Rollup | undefined> {
    const r = await this.db.selectFrom('uptime_rollups').selectAll().where('project_id', '=', projectId).where('hour', '=', hour).executeTakeFirst();
    return r === undefined ? undefined : { hour: r.hour, checks: r.checks, failures: r.failures, sum_ms: toNumber(r.sum_ms), histogram: JSON.parse(r.histogram) as number[] };
  }

  async putRollup(projectId: string, r: Rollup): Promise<void> {
    const values = { checks: r.checks, failures: r.failures, sum_ms: r.sum_ms, histogram: JSON.stringify(r.histogram) };
    await this.db
      .insertInto('uptime_rollups')
      .values({ project_id: projectId, hour: r.hour, ...values })
      .onConflict((oc) => oc.columns(['project_id', 'hour']).doUpdateSet(values))
      .execute();
  }

  checksSince(projectId: string, since: string): Promise<UptimeCheckRow[]> {
    return this.db.selectFrom('uptime_checks').selectAll().where('project_id', '=', projectId).where('at', '>=', since).orderBy('at').execute();
  }

  async rollupsSince(projectId: string, since: string): Promise<Rollup[]> {
    const rows = await this.db.selectFrom('uptime_rollups').selectAll().where('project_id', '=', projectId).where('hour', '>=', since).orderBy('hour').execute();
    return rows.map((r) => ({ hour: r.hour, checks: r.checks, failures: r.failures, sum_ms: toNumber(r.sum_ms), histogram: JSON.parse(r.histogram) as number[] }));
  }

  async openIncident(row: UptimeIncidentRow): Promise<void> {
    await this.db.insertInto('uptime_incidents').values(row).execute();
  }

  async closeIncident(id: string, at: string): Promise<void> {
    await this.db.updateTable('uptime_incidents').set({ ended_at: at }).where('id', '=', id).where('ended_at', 'is', null).execute();
  }

  incident(id: string): Promise<UptimeIncidentRow | undefined> {
    return this.db.selectFrom('uptime_incidents').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Incidents that overlap [since, now]: started after it, or still open then. */
  incidentsSince(projectId: string, since: string): Promise<UptimeIncidentRow[]> {
    return this.db
      .selectFrom('uptime_incidents')
      .selectAll()
      .where('project_id', '=', projectId)
      .where((eb) => eb.or([eb('started_at', '>=', since), eb('ended_at', 'is', null), eb('ended_at', '>=', since)]))
      .orderBy('started_at')
      .execute();
  }

  /** Queues a delivery; false when this transition already has one for this channel (never twice). */
  async addNotification(row: UptimeNotificationRow): Promise<boolean> {
    const r = await this.db.insertInto('uptime_notifications').values(row).onConflict((oc) => oc.columns(['project_id', 'transition', 'channel']).doNothing()).executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  pendingNotifications(): Promise<UptimeNotificationRow[]> {
    return this.db.selectFrom('uptime_notifications').selectAll().where('status', '=', 'pending').orderBy('created_at').execute();
  }

  async settleNotification(id: string, patch: Pick<UptimeNotificationRow, 'status' | 'attempts' | 'response_status' | 'error' | 'sent_at'>): Promise<void> {
    await this.db.updateTable('uptime_notifications').set(patch).where('id', '=', id).execute();
  }

  async notifications(projectId: string, limit: number, offset: number): Promise<{ rows: UptimeNotificationRow[]; total: number }> {
    const rows = await this.db.selectFrom('uptime_notifications').selectAll().where('project_id', '=', projectId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(offset).execute();
    const n = await this.db.selectFrom('uptime_notifications').select((eb) => eb.fn.countAll<string | number>().as('n')).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return { rows, total: toNumber(n.n) };
  }

  /** Drops checks before `checksBefore` and hourly sums before `rollupsBefore`. */
  async prune(checksBefore: string, rollupsBefore: string): Promise<void> {
    await this.db.deleteFrom('uptime_checks').where('at', '<', checksBefore).execute();
    await this.db.deleteFrom('uptime_rollups').where('hour', '<', rollupsBefore).execute();
  }
}
