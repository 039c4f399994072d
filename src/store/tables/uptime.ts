import type { UptimeStatus } from '../../domain/uptime.js';

export type { UptimeStatus } from '../../domain/uptime.js';

export interface UptimeMonitorsTable {
  project_id: string;
  enabled: number;
  check_interval_sec: number;
  check_path: string;
  /** sealed */
  chat_webhook_url: string | null;
  notify_email: string | null;
  status: UptimeStatus;
  last_checked_at: string | null;
  last_response_ms: number | null;
  updated_at: string;
  /** consecutive failed checks (counted ones: not during the project's own rollouts) */
  failures: number;
  /** consecutive successful checks */
  successes: number;
  /** the open incident while down */
  incident_id: string | null;
  /** why the last failed check failed */
  last_error: string | null;
}

export interface UptimeChecksTable {
  project_id: string;
  at: string;
  ok: number;
  status_code: number | null;
  response_ms: number | null;
  error: string | null;
}

/** A project's checks of one hour: counts, the sum of response times and their histogram (JSON array of counts per UPTIME_BUCKETS_MS). */
export interface UptimeRollupsTable {
  project_id: string;
  hour: string;
  checks: number;
  failures: number;
  sum_ms: string | number;
  histogram: string;
}

export interface UptimeIncidentsTable {
  id: string;
  project_id: string;
  started_at: string;
  ended_at: string | null;
  cause: string;
}

/** One delivery of one transition (or test) to one channel. */
export interface UptimeNotificationsTable {
  id: string;
  project_id: string;
  /** down | up | test | crash */
  event: string;
  /** what the delivery is for, unique per channel: `down:<incident>`, `up:<incident>`, `test:<id>`, `crash:<kind>:<deployment>` */
  transition: string;
  /** webhook | email */
  channel: string;
  /** what a crash alert says happened; null for the others (their incident says it) */
  cause: string | null;
  /** pending (the notifier's queue) | sending (a test, delivered by the request) | sent | failed */
  status: string;
  attempts: number;
  response_status: number | null;
  error: string | null;
  created_at: string;
  sent_at: string | null;
}

export interface UptimeTables {
  uptime_monitors: UptimeMonitorsTable;
  uptime_checks: UptimeChecksTable;
  uptime_rollups: UptimeRollupsTable;
  uptime_incidents: UptimeIncidentsTable;
  uptime_notifications: UptimeNotificationsTable;
}
