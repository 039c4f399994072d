import type { Repositories } from '../../store/repositories/index.js';
import { iso, type Sources } from '../../domain/clock.js';
import type { UserRecord } from '../../domain/access.js';

export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/**
 * The user with that e-mail, created when there is none yet. Only for code that mints no key
 * (tests' fixtures): a key for the user this returns could be a key for someone's existing
 * account. Code that hands out a key uses createNewUser. A user it creates is verified, as the
 * operator's are, unless `verified` is false.
 */
export async function findOrCreateUser(
  sources: Pick<Sources, 'ids' | 'clock'>,
  repos: Pick<Repositories, 'users'>,
  email: string,
  name?: string,
  verified = true,
): Promise<UserRecord> {
  const normalized = normalizeEmail(email);
  const now = iso(sources.clock.now());
  // Insert-or-nothing, then read: two concurrent creations of one e-mail both end with the same
  // row instead of one failing on the unique index.
  await repos.users.insertUnlessEmailTaken({
    id: sources.ids.id(),
    email: normalized,
    name: name ?? normalized.split('@')[0] ?? normalized,
    created_at: now,
    verified_at: verified ? now : null,
  });
  const user = await repos.users.byEmail(normalized);
  if (user === undefined) throw new Error(`no user ${normalized} after inserting it`);
  return user;
}

/**
 * A new user for an e-mail that has none. Never returns an existing user: whoever creates an
 * account here may be handed its first key, so an address that is taken (even by a concurrent
 * transaction) fails with Duplicate (409) instead.
 * `verified`: the address is proven (an e-mailed token) or the operator made the user; false for
 * a user made from a token that was handed back in an API response (docs/security.md, "Made-up users").
 */
export async function createNewUser(
  sources: Pick<Sources, 'ids' | 'clock'>,
  repos: Pick<Repositories, 'users'>,
  input: { email: string; name?: string | undefined; verified: boolean },
): Promise<UserRecord> {
  const normalized = normalizeEmail(input.email);
  const now = iso(sources.clock.now());
  const row: UserRecord = {
    id: sources.ids.id(),
    email: normalized,
    name: input.name ?? normalized.split('@')[0] ?? normalized,
    created_at: now,
    verified_at: input.verified ? now : null,
  };
  await repos.users.insert(row);
  return row;
}
