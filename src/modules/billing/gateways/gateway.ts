/**
 * The payment gateways a wallet is topped up through (docs/billing.md). Each of the two top-up
 * paths (`gatewaya`, `gatewayb`) has a real provider when its keys are configured, the sandbox
 * when the operator turned it on (`--payments sandbox`), and none otherwise: it answers 503. The
 * ledger code sees only this port.
 */

export const GATEWAYS = ['gatewaya', 'gatewayb'] as const;
export type GatewayName = (typeof GATEWAYS)[number];

/** The settings that give a top-up path its provider: named when the path is off. */
export const GATEWAY_SETTINGS: Record<GatewayName, string> = {
  gatewaya: '--stripe-secret-key with --stripe-webhook-secret (Stripe)',
  gatewayb: '--paystack-secret-key (Paystack)',
};

export type Provider = 'stripe' | 'paystack' | 'sandbox';

export interface CheckoutRequest {
  /** our payment id: carried to the gateway (metadata / reference) */
  paymentId: string;
  /** integer minor units (1000 = 10.00 USD) */
  amountMinor: number;
  /** ISO 4217, upper case */
  currency: string;
  /** the payer (Paystack requires an e-mail address) */
  email: string;
  /** shown on the gateway's payment page */
  description: string;
  /** where the gateway sends the payer back after paying or cancelling; empty: the gateway's default */
  returnUrl: string;
}

export interface Checkout {
  /** the gateway's identifier of this payment (Stripe: the Checkout Session id; Paystack: the transaction reference) */
  reference: string;
  /** the page the payer completes the payment on; null for the sandbox */
  checkoutUrl: string | null;
  /** true: the payment is already confirmed (the sandbox): credit it at once */
  confirmed: boolean;
}

/** A webhook event whose signature held, reduced to what the ledger needs. */
export interface GatewayEvent {
  /** unique per gateway: a replay carries the same id */
  eventId: string;
  /** succeeded: money received; failed: the payment will not complete; ignored: an event the ledger does not act on */
  kind: 'succeeded' | 'failed' | 'ignored';
  /** the payment's reference at the gateway (Checkout.reference); null when the event names none */
  reference: string | null;
  /** integer minor units the gateway says were paid; null when the event carries none */
  amountMinor: number | null;
  /** ISO 4217, upper case; null when the event carries none */
  currency: string | null;
}

export type WebhookHeaders = Record<string, string | string[] | undefined>;

export interface PaymentGateway {
  readonly name: GatewayName;
  readonly provider: Provider;
  /** Creates the payment at the gateway; rejects with GatewayError when the gateway refuses or cannot be reached. */
  createCheckout(request: CheckoutRequest): Promise<Checkout>;
  /**
   * Verifies the delivery's signature against the raw body and reads the event; throws
   * GatewaySignatureError when the signature is missing, malformed, stale or wrong, and
   * GatewayError when the body cannot be read.
   */
  parseWebhook(rawBody: Buffer, headers: WebhookHeaders): GatewayEvent;
}

/** The gateway refused or could not be reached. The message is readable and carries no secret. */
export class GatewayError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GatewayError';
  }
}

/** A webhook whose signature does not hold. The message says why, without the signature or secret. */
export class GatewaySignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GatewaySignatureError';
  }
}

/** The one value of a header; several values or none are a signature problem. */
export function oneHeader(headers: WebhookHeaders, name: string): string {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : headers[key];
  if (Array.isArray(value)) throw new GatewaySignatureError(`The webhook carries ${String(value.length)} ${name} headers; exactly one is expected.`);
  if (value === undefined || value === '') throw new GatewaySignatureError(`The webhook carries no ${name} header.`);
  return value;
}
