import type { Kysely } from 'kysely';
import type { DB } from '../store/schema.js';
import { iso } from '../domain/clock.js';
import type { TenancyDeps, UserRow } from './context.js';

export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** The user with that e-mail, created when there is none yet. */
export async function findOrCreateUser(
  deps: TenancyDeps,
  db: Kysely<DB>,
  email: string,
  name?: string,
): Promise<UserRow> {
  const normalized = normalizeEmail(email);
  const existing = await db.selectFrom('users').selectAll().where('email', '=', normalized).executeTakeFirst();
  if (existing !== undefined) return existing;
  const user: UserRow = {
    id: deps.ids.id(),
    email: normalized,
    name: name ?? normalized.split('@')[0] ?? normalized,
    created_at: iso(deps.clock.now()),
  };
  await db.insertInto('users').values(user).execute();
  return user;
}
