// Stripe through its official client: one hosted Checkout Session per top-up, confirmed by the
// `checkout.session.*` webhooks (docs.stripe.com/checkout/fulfillment). The client talks to
// `apiUrl` through its host/port/protocol options, so tests point it at a local fake.
//
// What Stripe documents and this relies on:
// - POST /v1/checkout/sessions (form-encoded) answers a session whose `id` (cs_…) names the
//   payment and whose `url` is the hosted page. Hosted sessions require `success_url`
//   (stripe/stripe-node#1944: it is optional only for embedded ui modes); `cancel_url` is
//   optional and, when set, adds a back link.
// - A webhook delivery carries `Stripe-Signature: t=<unix s>,v1=<HMAC-SHA256 of "t.body">`;
//   `webhooks.constructEvent` checks it and the age of `t`. Events carry an `id` (evt_…) that a
//   redelivery repeats: the ledger dedupes on it.
import Stripe from 'stripe';
import { systemClock, type Clock } from '../../../domain/clock.js';
import {
  GatewayError,
  GatewaySignatureError,
  type Checkout,
  type CheckoutRequest,
  type GatewayEvent,
  type GatewayName,
  type PaymentGateway,
  oneHeader,
  type WebhookHeaders,
} from './gateway.js';

export interface StripeGatewayOptions {
  name: GatewayName;
  /** sk_… or rk_…; never appears in an error message */
  secretKey: string;
  /** whsec_… of the webhook endpoint */
  webhookSecret: string;
  /** default https://api.stripe.com (an empty string too) */
  apiUrl?: string | undefined;
  /** how old a signed delivery may be, in seconds; default 300, Stripe's own */
  toleranceSec?: number | undefined;
  /** the "now" a delivery's age is measured against */
  clock?: Clock | undefined;
}

const DEFAULT_API_URL = 'https://api.stripe.com';
// Hosted Checkout needs some success_url. With no return URL configured the payer lands on
// Stripe's home page after paying; the webhook, not this redirect, credits the wallet.
const FALLBACK_RETURN_URL = 'https://stripe.com/';
const TIMEOUT_MS = 10_000;

/** The Stripe gateway: Checkout Sessions out, signed `checkout.session.*` webhooks in. */
export class StripeGateway implements PaymentGateway {
  readonly name: GatewayName;
  readonly provider = 'stripe' as const;
  private readonly stripe: Stripe;
  private readonly apiUrl: string;
  private readonly secretKey: string;
  private readonly webhookSecret: string;
  private readonly toleranceSec: number;
  private readonly clock: Clock;

  constructor(opts: StripeGatewayOptions) {
    this.name = opts.name;
    this.secretKey = opts.secretKey;
    this.webhookSecret = opts.webhookSecret;
    this.apiUrl = opts.apiUrl === undefined || opts.apiUrl === '' ? DEFAULT_API_URL : opts.apiUrl.replace(/\/+$/, '');
    this.toleranceSec = opts.toleranceSec ?? 300;
    // constructEvent reads a tolerance of 0 as "do not check the age"
    if (!(this.toleranceSec > 0)) throw new GatewayError('The Stripe webhook tolerance must be a positive number of seconds.');
    this.clock = opts.clock ?? systemClock;
    this.stripe = new Stripe(opts.secretKey, { ...endpoint(this.apiUrl), timeout: TIMEOUT_MS, maxNetworkRetries: 1, telemetry: false });
  }

  async createCheckout(request: CheckoutRequest): Promise<Checkout> {
    const returnUrl = request.returnUrl === '' ? FALLBACK_RETURN_URL : request.returnUrl;
    let session: Stripe.Checkout.Session;
    try {
      session = await this.stripe.checkout.sessions.create(
        {
          mode: 'payment',
          line_items: [
            {
              quantity: 1,
              price_data: { currency: request.currency.toLowerCase(), unit_amount: request.amountMinor, product_data: { name: request.description } },
            },
          ],
          client_reference_id: request.paymentId,
          metadata: { payment_id: request.paymentId },
          ...(request.email === '' ? {} : { customer_email: request.email }),
          success_url: returnUrl,
          ...(request.returnUrl === '' ? {} : { cancel_url: request.returnUrl }),
        },
        // a retried create (by the client or by us) returns the same session instead of a second one
        { idempotencyKey: `slipway-checkout-${request.paymentId}` },
      );
    } catch (err) {
      throw new GatewayError(this.describe(err));
    }
    if (session.url === null) throw new GatewayError(`Stripe created Checkout Session ${session.id} without a payment page URL.`);
    return { reference: session.id, checkoutUrl: session.url, confirmed: false };
  }

  parseWebhook(rawBody: Buffer, headers: WebhookHeaders): GatewayEvent {
    const signature = oneHeader(headers, 'stripe-signature');
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(rawBody, signature, this.webhookSecret, this.toleranceSec, undefined, this.clock.now().getTime());
    } catch (err) {
      if (err instanceof Stripe.errors.StripeSignatureVerificationError) throw new GatewaySignatureError(this.signatureProblem(err.message));
      throw new GatewayError('The Stripe webhook body is not a JSON event.');
    }
    if (!isEvent(event)) throw new GatewayError('The Stripe webhook body is not an event (id, type and data.object).');
    return toGatewayEvent(event);
  }

  /** Stripe's own sentences are long and sometimes quote the key (masked); ours are short and never do. */
  private describe(err: unknown): string {
    const { errors } = Stripe;
    if (err instanceof errors.StripeAuthenticationError) return `Stripe refused the secret key of gateway ${this.name} (401): check the configured key.`;
    if (err instanceof errors.StripePermissionError) return `Stripe refused gateway ${this.name} permission to create Checkout Sessions (403): the key is restricted.`;
    if (err instanceof errors.StripeRateLimitError) return 'Stripe is limiting the rate of requests (429); try again shortly.';
    if (err instanceof errors.StripeConnectionError) return `Stripe could not be reached at ${this.apiUrl} (${connectionCause(err)}).`;
    if (err instanceof errors.StripeError) {
      const status = err.statusCode === undefined ? '' : ` (${String(err.statusCode)})`;
      return `Stripe refused the Checkout Session${status}: ${this.redact(err.message)}`;
    }
    return `Stripe's answer could not be read: ${this.redact(err instanceof Error ? err.message : String(err))}`;
  }

  private redact(text: string): string {
    return text.split(this.secretKey).join('[key]').replace(/\b(?:sk|rk)_(?:test|live)_[A-Za-z0-9*]+/g, '[key]');
  }

  private signatureProblem(message: string): string {
    if (message.startsWith('No stripe-signature header')) return 'The Stripe-Signature header is missing.';
    if (message.startsWith('No webhook payload')) return 'The Stripe webhook has an empty body.';
    if (message.startsWith('Timestamp outside the tolerance zone')) return `The Stripe signature is older than ${String(this.toleranceSec)} s.`;
    if (message.startsWith('No signatures found matching')) return 'The Stripe signature does not match the body (or the webhook secret is not this endpoint\'s).';
    return 'The Stripe-Signature header is malformed.';
  }
}

/** host/port/protocol for the Stripe client; it cannot take a path prefix. */
function endpoint(apiUrl: string): { host: string; port: number; protocol: 'http' | 'https' } {
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new GatewayError(`The Stripe API URL is not a URL: ${apiUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new GatewayError('The Stripe API URL must be an http(s):// URL.');
  if (url.pathname !== '/' || url.search !== '') throw new GatewayError('The Stripe API URL must be an origin without a path, e.g. https://api.stripe.com.');
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  return { host: url.hostname, port: url.port === '' ? (protocol === 'http' ? 80 : 443) : Number(url.port), protocol };
}

function connectionCause(err: InstanceType<typeof Stripe.errors.StripeConnectionError>): string {
  const detail = err.detail;
  if (detail instanceof Error) {
    const code = 'code' in detail && typeof detail.code === 'string' ? detail.code : undefined;
    if (code !== undefined && code !== 'ETIMEDOUT') return code;
  }
  return err.message.startsWith('Request aborted due to timeout') ? `no answer within ${String(TIMEOUT_MS / 1000)} s` : 'connection failed';
}

// An if-chain rather than a switch: Event is a union of some 250 types and the others are all
// "ignored" (switch-exhaustiveness-check would ask for every one).
function toGatewayEvent(event: Stripe.Event): GatewayEvent {
  if (event.type === 'checkout.session.completed') {
    const session = event.data.object;
    // a delayed method (bank debit, …) completes the session unpaid; async_payment_* follows
    const paid = session.payment_status === 'paid' || session.payment_status === 'no_payment_required';
    return fromSession(event.id, paid ? 'succeeded' : 'ignored', session);
  }
  if (event.type === 'checkout.session.async_payment_succeeded') return fromSession(event.id, 'succeeded', event.data.object);
  if (event.type === 'checkout.session.async_payment_failed' || event.type === 'checkout.session.expired') return fromSession(event.id, 'failed', event.data.object);
  return { eventId: event.id, kind: 'ignored', reference: null, amountMinor: null, currency: null };
}

/** The signature held, so Stripe wrote the body; this only keeps a malformed one from reading as undefined. */
function isEvent(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { id, type, data } = value as { id?: unknown; type?: unknown; data?: unknown };
  if (typeof id !== 'string' || typeof type !== 'string' || typeof data !== 'object' || data === null) return false;
  const object = (data as { object?: unknown }).object;
  return typeof object === 'object' && object !== null && (!type.startsWith('checkout.session.') || typeof (object as { id?: unknown }).id === 'string');
}

function fromSession(eventId: string, kind: GatewayEvent['kind'], session: Stripe.Checkout.Session): GatewayEvent {
  return { eventId, kind, reference: session.id, amountMinor: session.amount_total, currency: session.currency === null ? null : session.currency.toUpperCase() };
}
