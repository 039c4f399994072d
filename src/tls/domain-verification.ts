import type { Kysely } from 'kysely';
import type { DB } from '../store/schema.js';

/**
 * Our meaning of a custom domain's `verified` (docs/router.md "TLS"): Slipway obtained a
 * certificate for it, so the CA reached this router under that name over HTTP. Default domains
 * are not in the table, so for them this changes nothing. True when a row changed.
 */
export async function markDomainVerified(db: Kysely<DB>, host: string): Promise<boolean> {
  const r = await db.updateTable('domains').set({ verified: 1 }).where('domain', '=', host).where('verified', '=', 0).executeTakeFirst();
  return Number(r.numUpdatedRows) > 0;
}
