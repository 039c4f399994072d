import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// The runtime logs of PostgreSQL installs (src/logs/postgres.log-store.ts; layout and
// measurements in docs/logs.md). SQLite installs keep them in a database file of their own
// (`logs.db`, src/logs/sqlite.log-store.ts), so this migration has nothing to do there.
//
// No foreign keys to projects: deleting a project or a workspace must not delete a million rows
// inside the request's transaction; the log store deletes them in chunks instead. A project gets
// an integer key and its (deployment, pod) pairs one each, so a line carries small integers
// rather than three UUIDs. `last_id` hands out the project's line ids under the row's lock, so
// ids become visible in the order they were given (a sequence would not guarantee that across
// replicas); `lines`, `bytes` and `dropped` are the exact usage, kept in the same transactions.
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`create table log_projects (
    key serial primary key,
    project_id text not null unique,
    workspace_id text not null,
    last_id bigint not null default 0,
    lines bigint not null default 0,
    bytes bigint not null default 0,
    dropped bigint not null default 0
  )`.execute(db);
  await sql`create index log_projects_workspace on log_projects (workspace_id)`.execute(db);
  await sql`create table log_sources (
    key serial primary key,
    project_key integer not null,
    deployment_id text not null,
    pod text not null,
    unique (project_key, deployment_id, pod)
  )`.execute(db);
  await sql`create table log_lines (
    project_key integer not null,
    id bigint not null,
    ts bigint not null,
    source_key integer not null,
    stream smallint not null,
    level text,
    message text not null,
    primary key (project_key, id)
  )`.execute(db);
  await sql`create index log_lines_ts on log_lines (project_key, ts)`.execute(db);
  await sql`create table log_cursors (
    container_id text primary key,
    project_id text not null,
    workspace_id text not null,
    timestamp text not null,
    at_timestamp integer not null
  )`.execute(db);
  await sql`create index log_cursors_project on log_cursors (project_id)`.execute(db);
  await sql`create index log_cursors_workspace on log_cursors (workspace_id)`.execute(db);
}
