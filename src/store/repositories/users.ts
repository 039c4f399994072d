import type { Selectable } from 'kysely';
import type { UsersTable } from '../schema.js';
import { Repository } from './repository.js';

export type UserRow = Selectable<UsersTable>;

export class UserRepository extends Repository {
  /** Whether the store has any user at all (the bootstrap runs on a store without). */
  async any(): Promise<boolean> {
    return (await this.db.selectFrom('users').select('id').limit(1).executeTakeFirst()) !== undefined;
  }

  byId(id: string): Promise<UserRow | undefined> {
    return this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
  }

  byEmail(email: string): Promise<UserRow | undefined> {
    return this.db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
  }

  /** Fails with the store's unique violation when the e-mail is taken. */
  async insert(row: UserRow): Promise<void> {
    await this.db.insertInto('users').values(row).execute();
  }

  /** Inserts the row unless its e-mail is taken; either way nothing fails. */
  async insertUnlessEmailTaken(row: UserRow): Promise<void> {
    await this.db
      .insertInto('users')
      .values(row)
      .onConflict((oc) => oc.column('email').doNothing())
      .execute();
  }
}
