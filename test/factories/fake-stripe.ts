// A local stand-in for the one Stripe endpoint Slipway calls, with Stripe's documented shapes:
// - POST /v1/checkout/sessions: form-encoded with bracketed nested keys
//   (`line_items[0][price_data][currency]=usd`), `Authorization: Bearer <secret key>`; answers a
//   `checkout.session` object; a wrong key gets 401 and a missing required parameter 400, both
//   in Stripe's `{error: {type, code?, param?, message}}` shape.
// It also writes signed webhook deliveries for the sessions it made, offline, with the stripe
// package's own test signer, so a test can POST them anywhere or hand them to parseWebhook.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import Stripe from 'stripe';
import { systemClock, type Clock } from '../../src/domain/clock.js';
import { closeServer, listen } from './git-server.js';

export interface StripeCall {
  method: string;
  path: string;
  status: number;
  /** the Authorization header as received */
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  /** the form body with its bracketed keys nested (numeric keys become arrays); values stay strings */
  params: Record<string, unknown>;
}

export interface FakeCheckoutSession {
  id: string;
  object: 'checkout.session';
  mode: string;
  url: string;
  amount_total: number;
  currency: string;
  payment_status: 'paid' | 'unpaid' | 'no_payment_required';
  status: 'open' | 'complete' | 'expired';
  client_reference_id: string | null;
  customer_email: string | null;
  metadata: Record<string, string>;
  success_url: string | null;
  cancel_url: string | null;
  created: number;
}

/** A webhook POST as Stripe would send it: the exact body bytes and the headers. */
export interface WebhookDelivery {
  body: string;
  headers: Record<string, string>;
}

export interface StripeEventOverrides {
  /** default a fresh evt_…; repeat one to build a replay */
  eventId?: string;
  amountMinor?: number;
  /** as Stripe writes it, lower case */
  currency?: string;
  paymentStatus?: FakeCheckoutSession['payment_status'];
  /** sign with this instead of the endpoint's secret */
  secret?: string;
  /** the signature's `t`, unix seconds; default the fake's clock */
  timestamp?: number;
}

export interface FakeStripe {
  /** `http://127.0.0.1:<port>`: the gateway's apiUrl */
  url: string;
  secretKey: string;
  webhookSecret: string;
  /** every request, in order */
  calls: StripeCall[];
  sessions: Map<string, FakeCheckoutSession>;
  /** a signed delivery of any event `type` about a session this fake created */
  event(type: string, sessionId: string, overrides?: StripeEventOverrides): WebhookDelivery;
  /** `checkout.session.completed`, paid (unless overridden) */
  completedEvent(sessionId: string, overrides?: StripeEventOverrides): WebhookDelivery;
  close(): Promise<void>;
}

export interface FakeStripeOptions {
  secretKey?: string;
  webhookSecret?: string;
  clock?: Clock;
}

const COMPLETE: Record<string, FakeCheckoutSession['status']> = {
  'checkout.session.completed': 'complete',
  'checkout.session.async_payment_succeeded': 'complete',
  'checkout.session.async_payment_failed': 'complete',
  'checkout.session.expired': 'expired',
};

export async function startFakeStripe(opts: FakeStripeOptions = {}): Promise<FakeStripe> {
  const secretKey = opts.secretKey ?? `sk_test_${randomBytes(12).toString('hex')}`;
  const webhookSecret = opts.webhookSecret ?? `whsec_${randomBytes(16).toString('hex')}`;
  const clock = opts.clock ?? systemClock;
  const calls: StripeCall[] = [];
  const sessions = new Map<string, FakeCheckoutSession>();
  let url = '';

  const server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const params = parseForm(await readBody(req));
      const call: StripeCall = { method: req.method ?? '', path, status: 0, authorization: req.headers.authorization, idempotencyKey: header(req, 'idempotency-key'), params };
      calls.push(call);
      const send = (status: number, payload: unknown) => {
        call.status = status;
        res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${randomBytes(7).toString('hex')}` }).end(JSON.stringify(payload));
      };
      const invalid = (message: string, param?: string) => {
        send(400, { error: { type: 'invalid_request_error', ...(param === undefined ? {} : { code: 'parameter_missing', param }), message } });
      };

      const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (key !== secretKey) {
        // Stripe masks all but the last four characters of the key it was given
        const masked = key === undefined ? '' : `${key.slice(0, 8)}${'*'.repeat(Math.max(0, key.length - 12))}${key.slice(-4)}`;
        send(401, { error: { type: 'invalid_request_error', message: key === undefined ? 'You did not provide an API key.' : `Invalid API Key provided: ${masked}` } });
        return;
      }
      if (req.method !== 'POST' || path !== '/v1/checkout/sessions') {
        send(404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method ?? ''}: ${path}).` } });
        return;
      }

      const mode = params['mode'];
      if (typeof mode !== 'string') {
        invalid('Missing required param: mode.', 'mode');
        return;
      }
      const successUrl = params['success_url'];
      if (typeof successUrl !== 'string') {
        invalid('Missing required param: success_url.', 'success_url');
        return;
      }
      const items = params['line_items'];
      if (!Array.isArray(items) || items.length === 0) {
        invalid('Missing required param: line_items.', 'line_items');
        return;
      }
      let total = 0;
      let currency: string | undefined;
      for (const item of items as Record<string, unknown>[]) {
        const price = item['price_data'] as Record<string, unknown> | undefined;
        const amount = stringOrNull(price?.['unit_amount']) ?? '';
        if (!/^[0-9]+$/.test(amount)) {
          invalid(`Invalid integer: ${amount}`);
          return;
        }
        const cur = stringOrNull(price?.['currency']) ?? '';
        if (!/^[a-z]{3}$/.test(cur)) {
          invalid(`Invalid currency: ${cur}. Stripe currently supports these currencies: usd, eur, …`);
          return;
        }
        currency = cur;
        total += Number(amount) * Number(stringOrNull(item['quantity']) ?? '1');
      }
      const id = `cs_test_${randomBytes(24).toString('base64url')}`;
      const session: FakeCheckoutSession = {
        id,
        object: 'checkout.session',
        mode,
        url: `${url}/c/pay/${id}`,
        amount_total: total,
        currency: currency ?? 'usd',
        payment_status: 'unpaid',
        status: 'open',
        client_reference_id: stringOrNull(params['client_reference_id']),
        customer_email: stringOrNull(params['customer_email']),
        metadata: { ...(params['metadata'] as Record<string, string> | undefined) },
        success_url: successUrl,
        cancel_url: stringOrNull(params['cancel_url']),
        created: Math.floor(clock.now().getTime() / 1000),
      };
      sessions.set(id, session);
      send(200, session);
    })();
  });
  url = await listen(server);

  const event = (type: string, sessionId: string, o: StripeEventOverrides = {}): WebhookDelivery => {
    const session = sessions.get(sessionId);
    if (session === undefined) throw new Error(`the fake Stripe made no session ${sessionId}`);
    const paid = type === 'checkout.session.completed' || type === 'checkout.session.async_payment_succeeded';
    const object: FakeCheckoutSession = {
      ...session,
      status: COMPLETE[type] ?? session.status,
      payment_status: o.paymentStatus ?? (paid ? 'paid' : session.payment_status),
      amount_total: o.amountMinor ?? session.amount_total,
      currency: o.currency ?? session.currency,
    };
    const created = o.timestamp ?? Math.floor(clock.now().getTime() / 1000);
    const body = JSON.stringify(
      {
        id: o.eventId ?? `evt_${randomBytes(12).toString('hex')}`,
        object: 'event',
        api_version: Stripe.API_VERSION,
        created,
        data: { object },
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type,
      },
      null,
      2,
    );
    const signature = Stripe.webhooks.generateTestHeaderString({ payload: body, secret: o.secret ?? webhookSecret, timestamp: created });
    return { body, headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature } };
  };

  return {
    url,
    secretKey,
    webhookSecret,
    calls,
    sessions,
    event,
    completedEvent: (sessionId, overrides) => event('checkout.session.completed', sessionId, overrides),
    close: () => closeServer(server),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

const stringOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** `a[b][0][c]=v` pairs into nested objects; a numeric segment makes an array. */
export function parseForm(body: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const segments = key.split(/\[|\]\[|\]/).filter((s) => s !== '');
    let node: Record<string, unknown> | unknown[] = root;
    segments.forEach((segment, i) => {
      const last = i === segments.length - 1;
      const slot = node as Record<string, unknown>;
      if (last) {
        slot[segment] = value;
        return;
      }
      const next = segments[i + 1] ?? '';
      slot[segment] ??= /^[0-9]+$/.test(next) ? [] : {};
      node = slot[segment] as Record<string, unknown> | unknown[];
    });
  }
  return root;
}
