import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Template instances (docs/templates.md) are projects of another kind: `kind` is `project` or
// `template`, `template_name` the catalog key it was made from, `volumes` the JSON array of the
// container paths that keep its data (a named volume each), `command` the JSON argument vector
// that replaces its image's command (null: the image's own), `health_path` the path a new
// container must answer below 400 on before it takes traffic (null: any answer on `/`). Project routes show only projects,
// template routes only instances; both share one slug space per workspace, so their host names
// never clash. A database an instance provisioned names it in `owner_project_id` and goes with it.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('projects').addColumn('kind', 'text', (c) => c.notNull().defaultTo('project')).execute();
  await db.schema.alterTable('projects').addColumn('template_name', 'text').execute();
  await db.schema.alterTable('projects').addColumn('volumes', 'text').execute();
  await db.schema.alterTable('projects').addColumn('command', 'text').execute();
  await db.schema.alterTable('projects').addColumn('health_path', 'text').execute();
  await db.schema.alterTable('databases').addColumn('owner_project_id', 'text').execute();
  await db.schema.createIndex('databases_owner_project_idx').on('databases').column('owner_project_id').execute();
}
