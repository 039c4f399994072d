/** A GitHub delivery acted on: a second one with the same id, or the same body, to one receiver is not. */
export interface WebhookDeliveriesTable {
  /** `app` (POST /api/webhooks/github) or a Git connection's webhook_id */
  receiver: string;
  /** X-GitHub-Delivery */
  delivery_id: string;
  /** SHA-256 of the raw body, hex */
  payload_digest: string;
  received_at: string;
}

export interface WebhooksTables {
  webhook_deliveries: WebhookDeliveriesTable;
}
