import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Uptime checks (docs/uptime.md). The monitor row keeps its running state: consecutive failures
// and successes (a transition needs a confirmation), the open incident, the last error. Every
// check is one `uptime_checks` row, kept for a day (the minute series and exact percentiles of
// the last 24 h); `uptime_rollups` sums them per hour with a histogram of response times (7 and
// 30 days, and the day series), kept 90 days. An incident is a down period with its cause. A
// notification is one delivery to one channel for one transition, a test or a crash (with its
// cause), keyed so that it never notifies a channel twice, with its attempts and outcome.
// `resource_metrics` is the resource sampler's history: per project or database and minute, the
// average CPU and memory of its containers and the bytes they received and sent (kept 8 days).
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('uptime_monitors').addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('uptime_monitors').addColumn('successes', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('uptime_monitors').addColumn('incident_id', 'text').execute();
  await db.schema.alterTable('uptime_monitors').addColumn('last_error', 'text').execute();

  await db.schema
    .createTable('uptime_checks')
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('ok', 'integer', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('response_ms', 'integer')
    .addColumn('error', 'text')
    .execute();
  await db.schema.createIndex('uptime_checks_project_at_idx').on('uptime_checks').columns(['project_id', 'at']).execute();
  await db.schema.createIndex('uptime_checks_at_idx').on('uptime_checks').column('at').execute();

  await db.schema
    .createTable('uptime_rollups')
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('hour', 'text', (c) => c.notNull())
    .addColumn('checks', 'integer', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('sum_ms', 'bigint', (c) => c.notNull())
    .addColumn('histogram', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('uptime_rollups_pk', ['project_id', 'hour'])
    .execute();

  await db.schema
    .createTable('uptime_incidents')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('ended_at', 'text')
    .addColumn('cause', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('uptime_incidents_project_idx').on('uptime_incidents').columns(['project_id', 'started_at']).execute();

  await db.schema
    .createTable('uptime_notifications')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('transition', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('cause', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'text')
    .addUniqueConstraint('uptime_notifications_once', ['project_id', 'transition', 'channel'])
    .execute();
  await db.schema.createIndex('uptime_notifications_project_idx').on('uptime_notifications').columns(['project_id', 'created_at']).execute();
  await db.schema.createIndex('uptime_notifications_status_idx').on('uptime_notifications').column('status').execute();

  await db.schema
    .createTable('resource_metrics')
    .addColumn('resource_id', 'text', (c) => c.notNull())
    .addColumn('minute', 'text', (c) => c.notNull())
    .addColumn('cpu_millicores', 'integer', (c) => c.notNull())
    .addColumn('memory_bytes', 'bigint', (c) => c.notNull())
    .addColumn('memory_limit_bytes', 'bigint')
    .addColumn('rx_bytes', 'bigint', (c) => c.notNull())
    .addColumn('tx_bytes', 'bigint', (c) => c.notNull())
    .addColumn('samples', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('resource_metrics_pk', ['resource_id', 'minute'])
    .execute();
  await db.schema.createIndex('resource_metrics_minute_idx').on('resource_metrics').column('minute').execute();
}
