// Paystack over its REST API with Node's fetch (Paystack publishes no official Node client).
//
// What Paystack documents and this relies on (paystack.com/docs/api/transaction, /docs/payments/webhooks):
// - POST /transaction/initialize, JSON, `Authorization: Bearer <secret key>`. Required: `email`
//   and `amount`, a string or integer in the currency's subunit (kobo, pesewas, cents). Optional:
//   `currency` (the integration's default otherwise), `reference` (unique; letters, digits and
//   - . = only), `callback_url` (overrides the dashboard's), `metadata` (documented as a
//   stringified JSON object; its `cancel_action` is where the page's cancel link goes).
// - It answers `{status: true, message: "Authorization URL created", data: {authorization_url,
//   access_code, reference}}`; a refusal is `{status: false, message}`, e.g. 401 "Invalid key".
// - Webhooks are POSTed as `{event, data}`; `x-paystack-signature` is the hex HMAC-SHA512 of the
//   raw body keyed with the secret key (there is no separate webhook secret). `charge.success`
//   carries the transaction: data.id (numeric), reference, status 'success', amount (subunit),
//   currency. Paystack sends no event for an abandoned or failed checkout, so nothing maps to
//   'failed' here.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
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

export interface PaystackGatewayOptions {
  name: GatewayName;
  /** sk_test_… or sk_live_…: authenticates the API calls and signs the webhooks */
  secretKey: string;
  /** default https://api.paystack.co (an empty string too) */
  apiUrl?: string | undefined;
  /** how long to wait for Paystack's answer; default 10 s */
  timeoutMs?: number | undefined;
}

const DEFAULT_API_URL = 'https://api.paystack.co';
const SIGNATURE_HEADER = 'x-paystack-signature';

/** The Paystack gateway: initialized transactions out, HMAC-signed `charge.success` webhooks in. */
export class PaystackGateway implements PaymentGateway {
  readonly name: GatewayName;
  readonly provider = 'paystack' as const;
  private readonly secretKey: string;
  private readonly apiUrl: string;
  private readonly timeoutMs: number;

  constructor(opts: PaystackGatewayOptions) {
    this.name = opts.name;
    this.secretKey = opts.secretKey;
    this.apiUrl = opts.apiUrl === undefined || opts.apiUrl === '' ? DEFAULT_API_URL : opts.apiUrl.replace(/\/+$/, '');
    if (!/^https?:\/\//.test(this.apiUrl)) throw new GatewayError('The Paystack API URL must be an http(s):// URL.');
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  async createCheckout(request: CheckoutRequest): Promise<Checkout> {
    const metadata = { payment_id: request.paymentId, ...(request.returnUrl === '' ? {} : { cancel_action: request.returnUrl }) };
    const body = {
      email: request.email,
      amount: String(request.amountMinor),
      currency: request.currency,
      reference: request.paymentId,
      ...(request.returnUrl === '' ? {} : { callback_url: request.returnUrl }),
      metadata: JSON.stringify(metadata),
    };
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await fetch(`${this.apiUrl}/transaction/initialize`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.secretKey}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        signal: timeout,
      });
    } catch (err) {
      const why = timeout.aborted ? `no answer within ${String(this.timeoutMs / 1000)} s` : causeOf(err);
      throw new GatewayError(`Paystack could not be reached at ${this.apiUrl} (${why}).`);
    }
    const answer = parseObject(await res.text().catch(() => ''));
    const message = typeof answer?.['message'] === 'string' ? this.redact(answer['message']) : undefined;
    if (!res.ok || answer?.['status'] !== true) {
      const says = message === undefined ? '.' : `: ${message.replace(/\.?$/, '.')}`;
      if (res.status === 401) throw new GatewayError(`Paystack refused the secret key of gateway ${this.name} (401)${says}`);
      throw new GatewayError(`Paystack refused the transaction (${String(res.status)})${says}`);
    }
    const data = answer['data'];
    const url = isObject(data) ? data['authorization_url'] : undefined;
    const reference = isObject(data) ? data['reference'] : undefined;
    if (typeof url !== 'string' || typeof reference !== 'string') throw new GatewayError('Paystack accepted the transaction but answered without an authorization_url and reference.');
    return { reference, checkoutUrl: url, confirmed: false };
  }

  parseWebhook(rawBody: Buffer, headers: WebhookHeaders): GatewayEvent {
    const given = oneHeader(headers, SIGNATURE_HEADER).toLowerCase();
    const expected = createHmac('sha512', this.secretKey).update(rawBody).digest('hex');
    const a = Buffer.from(given, 'utf8');
    const b = Buffer.from(expected, 'utf8');
    // timingSafeEqual throws on unequal lengths; the length of a hex digest is no secret
    if (a.length !== b.length || !timingSafeEqual(a, b)) throw new GatewaySignatureError('The x-paystack-signature header does not match the body (or the secret key is not this integration\'s).');

    const event = parseObject(rawBody.toString('utf8'));
    const data = event?.['data'];
    if (event === undefined || typeof event['event'] !== 'string' || !isObject(data)) throw new GatewayError('The Paystack webhook body is not an event ({event, data}).');
    const name = event['event'];
    // Paystack events carry no id of their own. The transaction id with the event name is stable
    // across redeliveries of the same event (and a transaction succeeds once); an event without
    // a data.id falls back to the body's digest, which a redelivery repeats byte for byte.
    const id = data['id'];
    const eventId = typeof id === 'number' || (typeof id === 'string' && id !== '') ? `${name}:${String(id)}` : `${name}:sha256-${createHash('sha256').update(rawBody).digest('hex')}`;
    if (name !== 'charge.success' || data['status'] !== 'success') return { eventId, kind: 'ignored', reference: null, amountMinor: null, currency: null };
    const { reference, amount, currency } = data;
    if (typeof reference !== 'string' || typeof amount !== 'number' || !Number.isInteger(amount) || typeof currency !== 'string') {
      throw new GatewayError('The Paystack charge.success event lacks its reference, integer amount or currency.');
    }
    return { eventId, kind: 'succeeded', reference, amountMinor: amount, currency: currency.toUpperCase() };
  }

  private redact(text: string): string {
    return text.split(this.secretKey).join('[key]').replace(/\bsk_(?:test|live)_[A-Za-z0-9]+/g, '[key]');
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** fetch's TypeError says only "fetch failed"; the reason is in its cause. */
function causeOf(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  if (cause instanceof Error) return 'code' in cause && typeof cause.code === 'string' ? cause.code : cause.message;
  return String(cause);
}

