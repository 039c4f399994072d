import type { EnvVarsTable } from '../tables/env.js';
import { orDuplicate } from '../dialects.js';
import { Repository } from './repository.js';

export type EnvVarRow = EnvVarsTable;

export class EnvRepository extends Repository {
  /** The project's variables, in no particular order (collations differ: the caller sorts). */
  list(projectId: string): Promise<EnvVarRow[]> {
    return this.db.selectFrom('env_vars').selectAll().where('project_id', '=', projectId).execute();
  }

  find(projectId: string, id: string): Promise<EnvVarRow | undefined> {
    return this.db.selectFrom('env_vars').selectAll().where('id', '=', id).where('project_id', '=', projectId).executeTakeFirst();
  }

  /** Fails for a key the project has already: one row with Duplicate (409), several with the store's unique violation. */
  async insert(rows: EnvVarRow | EnvVarRow[]): Promise<void> {
    const write = this.db.insertInto('env_vars').values(rows).execute();
    await (Array.isArray(rows) ? write : orDuplicate(write, () => `A variable named "${rows.key}" already exists in this project.`));
  }

  async update(id: string, patch: Partial<Pick<EnvVarRow, 'value' | 'is_secret' | 'updated_at'>>): Promise<void> {
    await this.db.updateTable('env_vars').set(patch).where('id', '=', id).execute();
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('env_vars').where('id', '=', id).execute();
  }

  /** Deletes every variable of the project whose key is not in `keep`. */
  async deleteAllBut(projectId: string, keep: readonly string[]): Promise<void> {
    // `not in ()` is not SQL; with nothing to keep, everything goes.
    await this.db
      .deleteFrom('env_vars')
      .where('project_id', '=', projectId)
      .$if(keep.length > 0, (q) => q.where('key', 'not in', [...keep]))
      .execute();
  }
}
