import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
// A rolling restart asked of a process that does not run the deploy engine (a standby): the
// engine's reconciler finds the request on the running deployment, clears it and restarts.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('deployments').addColumn('restart_requested_at', 'text').execute();
}
