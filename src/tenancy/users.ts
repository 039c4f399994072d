import type { Kysely } from 'kysely';
import type { DB } from '../store/schema.js';
import { iso } from '../domain/clock.js';
import type { UserRow } from './context.js';
import type { Deps } from '../deps.js';

export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** The user with that e-mail, created when there is none yet. */
export async function findOrCreateUser(
  deps: Deps,
  db: Kysely<DB>,
  email: string,
  name?: string,
): Promise<UserRow> {
  const normalized = normalizeEmail(email);
  // Insert-or-nothing, then read: two concurrent creations of one e-mail both end with the same
  // row instead of one failing on the unique index.
  await db
    .insertInto('users')
    .values({
      id: deps.ids.id(),
      email: normalized,
      name: name ?? normalized.split('@')[0] ?? normalized,
      created_at: iso(deps.clock.now()),
    })
    .onConflict((oc) => oc.column('email').doNothing())
    .execute();
  return db.selectFrom('users').selectAll().where('email', '=', normalized).executeTakeFirstOrThrow();
}
