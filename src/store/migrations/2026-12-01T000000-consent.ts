import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';

// Frozen: never edit a migration that has shipped; add a new one instead.
//
// Consent and proven addresses (docs/security.md, "Made-up users"). `users.verified_at`: when
// the user's address was proven (an e-mailed invitation redeemed) or the operator vouched for
// it; null for a user made from a token handed back in an API response, who gets no starting
// credit and may create no workspace until then. Users that exist already were made before the
// rule and are taken as verified. `members.status`: `pending` for a membership offered through
// `POST …/members` and not yet accepted by its user (it grants nothing); every existing
// membership is `active`. `invitations.emailed`: 1 when the token travelled only by e-mail, so
// that redeeming it proves the address; invitations made before are taken as not e-mailed
// (which of them were cannot be known), and an address redeemed from one stays unverified
// until the operator verifies it.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('users').addColumn('verified_at', 'text').execute();
  await sql`update users set verified_at = created_at`.execute(db);
  await db.schema.alterTable('members').addColumn('status', 'text', (c) => c.notNull().defaultTo('active')).execute();
  await db.schema.alterTable('invitations').addColumn('emailed', 'integer', (c) => c.notNull().defaultTo(0)).execute();
}
