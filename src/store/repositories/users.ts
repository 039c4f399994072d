import type { Selectable } from 'kysely';
import type { UsersTable } from '../tables/tenancy.js';
import { orDuplicate } from '../dialects.js';
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

  /** Fails with Duplicate (409) when the e-mail is taken. */
  async insert(row: UserRow): Promise<void> {
    await orDuplicate(this.db.insertInto('users').values(row).execute(), () => `A user with e-mail ${row.email} already exists.`);
  }

  /** Inserts the row unless its e-mail is taken; either way nothing fails. */
  async insertUnlessEmailTaken(row: UserRow): Promise<void> {
    await this.db
      .insertInto('users')
      .values(row)
      .onConflict((oc) => oc.column('email').doNothing())
      .execute();
  }

  /**
   * Marks the user's address proven at `at`, unless it already was (the first proof is kept).
   * The user row travels with their key in the access cache: invalidated here.
   */
  async verify(id: string, at: string): Promise<void> {
    await this.db.updateTable('users').set({ verified_at: at }).where('id', '=', id).where('verified_at', 'is', null).execute();
    this.cache.invalidate();
  }
}
