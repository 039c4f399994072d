import { isUniqueViolation } from '../dialects.js';
import type { WebhookDeliveriesTable } from '../tables/webhooks.js';
import { Repository } from './repository.js';

/** The GitHub deliveries acted on, per receiver (src/modules/deployments/deploy.service.ts claimDelivery). */
export class WebhookDeliveryRepository extends Repository {
  /** Removes the claims received before `before`. */
  async prune(before: string): Promise<void> {
    await this.db.deleteFrom('webhook_deliveries').where('received_at', '<', before).execute();
  }

  /**
   * Records the delivery; false when the receiver has one with the same id or the same body
   * already (the unique keys decide, so of two concurrent claims one wins). Not inside a
   * transaction: on PostgreSQL the violation would abort it.
   */
  async claim(row: WebhookDeliveriesTable): Promise<boolean> {
    try {
      await this.db.insertInto('webhook_deliveries').values(row).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async release(receiver: string, deliveryId: string): Promise<void> {
    await this.db.deleteFrom('webhook_deliveries').where('receiver', '=', receiver).where('delivery_id', '=', deliveryId).execute();
  }
}
