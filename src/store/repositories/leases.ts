import type { LeasesTable } from '../tables/deployments.js';
import { Repository } from './repository.js';

/** Named leases: at most one holder of each at a time (src/modules/deployments/engine/leadership.ts). */
export class LeaseRepository extends Repository {
  /**
   * Takes `name` for `holder` until `expiresAt` if it is free, expired before `now`, or already
   * `holder`'s (a renewal, which keeps acquired_at). One statement, so two racing holders cannot
   * both win. False while another holder's lease runs.
   */
  async acquire(name: string, holder: string, now: string, expiresAt: string): Promise<boolean> {
    const row = await this.db
      .insertInto('leases')
      .values({ name, holder, expires_at: expiresAt, acquired_at: now })
      .onConflict((oc) =>
        oc
          .column('name')
          .doUpdateSet((eb) => ({
            holder: eb.ref('excluded.holder'),
            expires_at: eb.ref('excluded.expires_at'),
            acquired_at: eb.case().when('leases.holder', '=', holder).then(eb.ref('leases.acquired_at')).else(eb.ref('excluded.acquired_at')).end(),
          }))
          .where((eb) => eb.or([eb('leases.holder', '=', holder), eb('leases.expires_at', '<', now)])),
      )
      .returning('holder')
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Takes `name` from `from` for `holder`, only while `from` still holds it (expired or not); one statement. */
  async takeOver(name: string, from: string, holder: string, now: string, expiresAt: string): Promise<boolean> {
    const rows = await this.db
      .updateTable('leases')
      .set({ holder, expires_at: expiresAt, acquired_at: now })
      .where('name', '=', name)
      .where('holder', '=', from)
      .returning('holder')
      .execute();
    return rows.length > 0;
  }

  /** Gives `name` up, if `holder` holds it. */
  async release(name: string, holder: string): Promise<void> {
    await this.db.deleteFrom('leases').where('name', '=', name).where('holder', '=', holder).execute();
  }

  /** Who holds `name` at `now`; undefined when nobody does (never taken, released or expired). */
  holderAt(name: string, now: string): Promise<Pick<LeasesTable, 'holder' | 'expires_at'> | undefined> {
    return this.db.selectFrom('leases').select(['holder', 'expires_at']).where('name', '=', name).where('expires_at', '>=', now).executeTakeFirst();
  }
}
