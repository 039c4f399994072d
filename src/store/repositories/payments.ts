import { toNumber } from '../dialects.js';
import type { PaymentStatus, PaymentsTable } from '../tables/billing.js';
import { Repository } from './repository.js';

export interface PaymentRow extends Omit<PaymentsTable, 'amount'> {
  /** minor units */
  amount: number;
}

const paymentOf = (r: PaymentsTable): PaymentRow => ({ ...r, amount: toNumber(r.amount) });

/** Top-ups and the gateway events acted on (docs/billing.md#top-ups). */
export class PaymentRepository extends Repository {
  async insert(row: PaymentRow): Promise<void> {
    await this.db.insertInto('payments').values(row).execute();
  }

  async byId(id: string): Promise<PaymentRow | undefined> {
    const r = await this.db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirst();
    return r === undefined ? undefined : paymentOf(r);
  }

  async byReference(gateway: string, reference: string): Promise<PaymentRow | undefined> {
    const r = await this.db.selectFrom('payments').selectAll().where('gateway', '=', gateway).where('reference', '=', reference).executeTakeFirst();
    return r === undefined ? undefined : paymentOf(r);
  }

  /** Records the gateway's answer to a new payment. */
  async opened(id: string, reference: string, checkoutUrl: string | null, at: string): Promise<void> {
    await this.db.updateTable('payments').set({ reference, checkout_url: checkoutUrl, updated_at: at }).where('id', '=', id).execute();
  }

  /**
   * Moves a pending payment to its outcome; false when it is no longer pending (another delivery
   * settled it first). Inside the crediting transaction, this is what makes a credit happen once.
   */
  async settle(id: string, status: Exclude<PaymentStatus, 'pending'>, at: string, failureReason: string | null = null): Promise<boolean> {
    const r = await this.db
      .updateTable('payments')
      .set({ status, updated_at: at, completed_at: at, failure_reason: failureReason })
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  async page(workspaceId: string, limit: number, offset: number): Promise<{ rows: PaymentRow[]; total: number }> {
    const rows = await this.db.selectFrom('payments').selectAll().where('workspace_id', '=', workspaceId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).offset(offset).execute();
    const count = await this.db.selectFrom('payments').select((eb) => eb.fn.countAll<string | number>().as('n')).where('workspace_id', '=', workspaceId).executeTakeFirstOrThrow();
    return { rows: rows.map(paymentOf), total: toNumber(count.n) };
  }

  /** Claims a gateway event: false when the same event id was claimed before (a replay). */
  async claimEvent(gateway: string, eventId: string, at: string): Promise<boolean> {
    const r = await this.db
      .insertInto('payment_events')
      .values({ gateway, event_id: eventId, payment_id: null, outcome: 'received', received_at: at })
      .onConflict((oc) => oc.columns(['gateway', 'event_id']).doNothing())
      .executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  async eventOutcome(gateway: string, eventId: string, paymentId: string | null, outcome: string): Promise<void> {
    await this.db.updateTable('payment_events').set({ payment_id: paymentId, outcome }).where('gateway', '=', gateway).where('event_id', '=', eventId).execute();
  }
}
