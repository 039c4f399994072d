// The production gateway clients against local servers that speak Stripe's and Paystack's
// documented endpoints, and the webhook deliveries those servers sign the way each provider does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError, GatewaySignatureError, type CheckoutRequest, type PaymentGateway } from '../../src/modules/billing/gateways/gateway.js';
import { PaystackGateway } from '../../src/modules/billing/gateways/paystack.js';
import { paymentGateways, SandboxGateway, sandboxPaths } from '../../src/modules/billing/gateways/sandbox.js';
import { StripeGateway } from '../../src/modules/billing/gateways/stripe.js';
import { startFakePaystack, type FakePaystack } from '../factories/fake-paystack.js';
import { startFakeStripe, type FakeStripe, type WebhookDelivery } from '../factories/fake-stripe.js';
import { closedPort, startSilentServer } from '../factories/git-server.js';

let stripe: FakeStripe;
let paystack: FakePaystack;
let paymentNo = 0;

beforeAll(async () => {
  [stripe, paystack] = await Promise.all([startFakeStripe(), startFakePaystack()]);
});

afterAll(async () => {
  await Promise.all([stripe.close(), paystack.close()]);
});

/** A fresh payment id per request (UUID-like, as the ledger makes them). */
const request = (over: Partial<CheckoutRequest> = {}): CheckoutRequest => ({
  paymentId: `0193a7c2-0000-7000-8000-${String(++paymentNo).padStart(12, '0')}`,
  amountMinor: 1000,
  currency: 'USD',
  email: 'payer@example.com',
  description: 'Slipway credit',
  returnUrl: 'https://slipway.example.com/billing',
  ...over,
});

const makeStripe = (over: { secretKey?: string; webhookSecret?: string; apiUrl?: string } = {}) =>
  new StripeGateway({ name: 'gatewaya', secretKey: over.secretKey ?? stripe.secretKey, webhookSecret: over.webhookSecret ?? stripe.webhookSecret, apiUrl: over.apiUrl ?? stripe.url });

const makePaystack = (over: { secretKey?: string; apiUrl?: string; timeoutMs?: number } = {}) =>
  new PaystackGateway({ name: 'gatewayb', secretKey: over.secretKey ?? paystack.secretKey, apiUrl: over.apiUrl ?? paystack.url, ...(over.timeoutMs === undefined ? {} : { timeoutMs: over.timeoutMs }) });

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    if (err instanceof Error) return err;
    throw err;
  }
  throw new Error('expected a rejection');
}

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    if (err instanceof Error) return err;
    throw err;
  }
  throw new Error('expected a throw');
}

const parse = (gateway: PaymentGateway, d: WebhookDelivery) => gateway.parseWebhook(Buffer.from(d.body), d.headers);

/** The same delivery with one byte of the body changed and the signature kept. */
const tampered = (d: WebhookDelivery): WebhookDelivery => ({ ...d, body: d.body.replace(/"amount(_total)?": ?(\d)/, (_m, t: string | undefined, n: string) => `"amount${t ?? ''}": ${String((Number(n) + 1) % 10)}`) });

describe('StripeGateway.createCheckout', () => {
  it('creates a hosted Checkout Session for the amount, currency and payment, and returns its id and URL', async () => {
    const req = request({ amountMinor: 2550, currency: 'EUR' });
    const checkout = await makeStripe().createCheckout(req);
    expect(checkout.reference).toMatch(/^cs_test_/);
    expect(checkout.checkoutUrl).toBe(`${stripe.url}/c/pay/${checkout.reference}`);
    expect(checkout.confirmed).toBe(false);

    const call = stripe.calls.at(-1);
    expect(call).toMatchObject({ method: 'POST', path: '/v1/checkout/sessions', status: 200, authorization: `Bearer ${stripe.secretKey}` });
    expect(call?.idempotencyKey).toContain(req.paymentId);
    expect(call?.params).toEqual({
      mode: 'payment',
      line_items: [{ quantity: '1', price_data: { currency: 'eur', unit_amount: '2550', product_data: { name: 'Slipway credit' } } }],
      client_reference_id: req.paymentId,
      metadata: { payment_id: req.paymentId },
      customer_email: 'payer@example.com',
      success_url: req.returnUrl,
      cancel_url: req.returnUrl,
    });
    expect(stripe.sessions.get(checkout.reference)).toMatchObject({ amount_total: 2550, currency: 'eur', client_reference_id: req.paymentId });
  });

  it('without a return URL still sends the success_url Stripe requires, and no cancel_url', async () => {
    const checkout = await makeStripe().createCheckout(request({ returnUrl: '' }));
    const session = stripe.sessions.get(checkout.reference);
    expect(session?.success_url).toMatch(/^https:\/\//);
    expect(session?.cancel_url).toBeNull();
  });

  it('a wrong key is a GatewayError that names neither the key nor its masked form', async () => {
    const wrongKey = 'sk_test_wrongwrongwrongwrong1234';
    const err = await rejection(makeStripe({ secretKey: wrongKey }).createCheckout(request()));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.message).toMatch(/refused the secret key.*401/);
    expect(err.message).not.toContain(wrongKey);
    expect(err.message).not.toContain('sk_test');
    expect(err.message).not.toContain('1234');
    expect(stripe.calls.at(-1)?.status).toBe(401);
  });

  it("quotes Stripe's reason for a refused session", async () => {
    const err = await rejection(makeStripe().createCheckout(request({ currency: 'US' })));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.message).toMatch(/^Stripe refused the Checkout Session \(400\): Invalid currency: us/);
  });

  it('an unreachable API is a GatewayError naming the address', async () => {
    const apiUrl = `http://127.0.0.1:${String(await closedPort())}`;
    const err = await rejection(makeStripe({ apiUrl }).createCheckout(request()));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.message).toBe(`Stripe could not be reached at ${apiUrl} (ECONNREFUSED).`);
  });

  it('refuses an API URL with a path, which the client cannot honour', () => {
    expect(() => makeStripe({ apiUrl: 'https://proxy.example.com/stripe' })).toThrow(GatewayError);
  });
});

describe('StripeGateway.parseWebhook', () => {
  let sessionId: string;
  beforeAll(async () => {
    sessionId = (await makeStripe().createCheckout(request({ amountMinor: 4200, currency: 'USD' }))).reference;
  });

  it('reads a paid checkout.session.completed as succeeded, with the event id, session, amount and currency', () => {
    const delivery = stripe.completedEvent(sessionId, { eventId: 'evt_paid_1' });
    expect(parse(makeStripe(), delivery)).toEqual({ eventId: 'evt_paid_1', kind: 'succeeded', reference: sessionId, amountMinor: 4200, currency: 'USD' });
  });

  it('reports the amount and currency the event carries, and the same id for a replay', () => {
    const gateway = makeStripe();
    const first = parse(gateway, stripe.completedEvent(sessionId, { eventId: 'evt_replayed', amountMinor: 99, currency: 'gbp' }));
    const again = parse(gateway, stripe.completedEvent(sessionId, { eventId: 'evt_replayed', amountMinor: 99, currency: 'gbp' }));
    expect(first).toMatchObject({ eventId: 'evt_replayed', amountMinor: 99, currency: 'GBP' });
    expect(again).toEqual(first);
  });

  it('maps the other checkout events: unpaid completion ignored, async success, async failure and expiry', () => {
    const gateway = makeStripe();
    expect(parse(gateway, stripe.completedEvent(sessionId, { paymentStatus: 'unpaid' }))).toMatchObject({ kind: 'ignored', reference: sessionId });
    expect(parse(gateway, stripe.completedEvent(sessionId, { paymentStatus: 'no_payment_required' }))).toMatchObject({ kind: 'succeeded' });
    expect(parse(gateway, stripe.event('checkout.session.async_payment_succeeded', sessionId))).toMatchObject({ kind: 'succeeded', reference: sessionId, amountMinor: 4200 });
    expect(parse(gateway, stripe.event('checkout.session.async_payment_failed', sessionId))).toMatchObject({ kind: 'failed', reference: sessionId });
    expect(parse(gateway, stripe.event('checkout.session.expired', sessionId))).toMatchObject({ kind: 'failed', reference: sessionId });
    const other = stripe.event('payment_intent.succeeded', sessionId, { eventId: 'evt_other' });
    expect(parse(gateway, other)).toEqual({ eventId: 'evt_other', kind: 'ignored', reference: null, amountMinor: null, currency: null });
  });

  it('a tampered body, a wrong secret, a stale or missing signature are GatewaySignatureErrors', () => {
    const gateway = makeStripe();
    const delivery = stripe.completedEvent(sessionId);
    const cases: [string, WebhookDelivery, RegExp][] = [
      ['tampered', tampered(delivery), /does not match/],
      ['wrong secret', stripe.completedEvent(sessionId, { secret: 'whsec_someoneelse' }), /does not match/],
      ['301 s old', stripe.completedEvent(sessionId, { timestamp: Math.floor(Date.now() / 1000) - 301 }), /older than 300 s/],
      ['no header', { body: delivery.body, headers: { 'content-type': 'application/json' } }, /no stripe-signature header/],
      ['garbage header', { body: delivery.body, headers: { 'stripe-signature': 'nonsense' } }, /malformed/],
    ];
    for (const [what, d, message] of cases) {
      const err = thrown(() => parse(gateway, d));
      expect(err, what).toBeInstanceOf(GatewaySignatureError);
      expect(err.message, what).toMatch(message);
      expect(err.message, what).not.toContain(stripe.webhookSecret);
    }
    // the same endpoint secret on another gateway instance still verifies (no per-instance state)
    expect(parse(makeStripe(), delivery).kind).toBe('succeeded');
  });

  it('a delivery 299 s old still holds', () => {
    const d = stripe.completedEvent(sessionId, { timestamp: Math.floor(Date.now() / 1000) - 299 });
    expect(parse(makeStripe(), d).kind).toBe('succeeded');
  });
});

describe('PaystackGateway.createCheckout', () => {
  it('initializes a transaction with the amount in subunits, currency and our reference', async () => {
    const req = request({ amountMinor: 500_000, currency: 'NGN' });
    const checkout = await makePaystack().createCheckout(req);
    const t = paystack.transactions.get(req.paymentId);
    expect(checkout).toEqual({ reference: req.paymentId, checkoutUrl: `${paystack.url}/checkout/${t?.access_code ?? '?'}`, confirmed: false });

    const call = paystack.calls.at(-1);
    expect(call).toMatchObject({ method: 'POST', path: '/transaction/initialize', status: 200, authorization: `Bearer ${paystack.secretKey}` });
    expect(call?.contentType).toMatch(/^application\/json/);
    expect(call?.body).toEqual({
      email: 'payer@example.com',
      amount: '500000',
      currency: 'NGN',
      reference: req.paymentId,
      callback_url: req.returnUrl,
      metadata: JSON.stringify({ payment_id: req.paymentId, cancel_action: req.returnUrl }),
    });
    expect(t).toMatchObject({ amount: 500_000, currency: 'NGN', metadata: { payment_id: req.paymentId } });
  });

  it('without a return URL sends no callback_url (the dashboard one applies)', async () => {
    const req = request({ returnUrl: '' });
    await makePaystack().createCheckout(req);
    expect(paystack.calls.at(-1)?.body).not.toHaveProperty('callback_url');
    expect(paystack.transactions.get(req.paymentId)?.callback_url).toBeNull();
  });

  it("a wrong key is a GatewayError quoting Paystack's message, never the key", async () => {
    const wrongKey = 'sk_test_0000000000000000000000000000000000000000';
    const err = await rejection(makePaystack({ secretKey: wrongKey }).createCheckout(request()));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.message).toBe('Paystack refused the secret key of gateway gatewayb (401): Invalid key.');
    expect(err.message).not.toContain(wrongKey);
  });

  it('a status:false answer is a GatewayError with its message', async () => {
    const req = request();
    await makePaystack().createCheckout(req);
    const err = await rejection(makePaystack().createCheckout(req));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.message).toBe('Paystack refused the transaction (400): Duplicate Transaction Reference.');
  });

  it('an unreachable API or one that never answers is a GatewayError', async () => {
    const apiUrl = `http://127.0.0.1:${String(await closedPort())}`;
    const refused = await rejection(makePaystack({ apiUrl }).createCheckout(request()));
    expect(refused).toBeInstanceOf(GatewayError);
    expect(refused.message).toBe(`Paystack could not be reached at ${apiUrl} (ECONNREFUSED).`);

    const silent = await startSilentServer();
    try {
      const started = Date.now();
      const err = await rejection(makePaystack({ apiUrl: silent.url, timeoutMs: 300 }).createCheckout(request()));
      expect(err).toBeInstanceOf(GatewayError);
      expect(err.message).toBe(`Paystack could not be reached at ${silent.url} (no answer within 0.3 s).`);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await silent.close();
    }
  });
});

describe('PaystackGateway.parseWebhook', () => {
  let reference: string;
  beforeAll(async () => {
    reference = (await makePaystack().createCheckout(request({ amountMinor: 750_000, currency: 'NGN' }))).reference;
  });

  it('reads charge.success as succeeded; the event id derives from the transaction id', () => {
    const id = paystack.transactions.get(reference)?.id;
    expect(parse(makePaystack(), paystack.completedEvent(reference))).toEqual({ eventId: `charge.success:${String(id)}`, kind: 'succeeded', reference, amountMinor: 750_000, currency: 'NGN' });
  });

  it('reports the amount and currency the event carries, and the same id for a replay', () => {
    const gateway = makePaystack();
    const first = parse(gateway, paystack.completedEvent(reference, { transactionId: 77, amountMinor: 1, currency: 'ghs' }));
    expect(first).toEqual({ eventId: 'charge.success:77', kind: 'succeeded', reference, amountMinor: 1, currency: 'GHS' });
    expect(parse(gateway, paystack.completedEvent(reference, { transactionId: 77, amountMinor: 1, currency: 'ghs' }))).toEqual(first);
  });

  it('ignores other events and a charge.success whose status is not success, still with an event id', () => {
    const gateway = makePaystack();
    expect(parse(gateway, paystack.event('transfer.success', reference, { transactionId: 5 }))).toEqual({ eventId: 'transfer.success:5', kind: 'ignored', reference: null, amountMinor: null, currency: null });
    expect(parse(gateway, paystack.completedEvent(reference, { status: 'failed' }))).toMatchObject({ kind: 'ignored' });
  });

  it('a tampered body, a wrong key, a wrong or missing signature are GatewaySignatureErrors', () => {
    const gateway = makePaystack();
    const delivery = paystack.completedEvent(reference);
    const cases: [string, WebhookDelivery, RegExp][] = [
      ['tampered', tampered(delivery), /does not match/],
      ['other key', paystack.completedEvent(reference, { secret: 'sk_test_someoneelse' }), /does not match/],
      ['short signature', { body: delivery.body, headers: { 'x-paystack-signature': 'abc123' } }, /does not match/],
      ['no header', { body: delivery.body, headers: { 'content-type': 'application/json' } }, /no x-paystack-signature header/],
    ];
    for (const [what, d, message] of cases) {
      const err = thrown(() => parse(gateway, d));
      expect(err, what).toBeInstanceOf(GatewaySignatureError);
      expect(err.message, what).toMatch(message);
      expect(err.message, what).not.toContain(paystack.secretKey);
    }
    const twice = thrown(() => gateway.parseWebhook(Buffer.from(delivery.body), { 'x-paystack-signature': [delivery.headers['x-paystack-signature'] ?? '', 'x'] }));
    expect(twice).toBeInstanceOf(GatewaySignatureError);
  });

  it('a correctly signed body that is not an event is a GatewayError, not a signature error', async () => {
    const { createHmac } = await import('node:crypto');
    const body = 'not json';
    const err = thrown(() => makePaystack().parseWebhook(Buffer.from(body), { 'x-paystack-signature': createHmac('sha512', paystack.secretKey).update(body).digest('hex') }));
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).not.toBeInstanceOf(GatewaySignatureError);
  });
});

describe('SandboxGateway', () => {
  it('confirms a checkout at once, without a payment page', async () => {
    const gateway = new SandboxGateway({ name: 'gatewaya' });
    const req = request();
    expect(gateway.provider).toBe('sandbox');
    expect(await gateway.createCheckout(req)).toEqual({ reference: `sandbox_${req.paymentId}`, checkoutUrl: null, confirmed: true });
  });

  it('takes no webhooks', () => {
    const err = thrown(() => new SandboxGateway({ name: 'gatewayb' }).parseWebhook());
    expect(err).toBeInstanceOf(GatewaySignatureError);
    expect(err.message).toBe('The sandbox gateway confirms payments at once and takes no webhooks.');
  });
});

// Issue 26 item 4: the sandbox exists only when the operator turns it on, and never replaces a configured gateway.
describe('paymentGateways (--payments)', () => {
  const stripeGateway = () => new StripeGateway({ name: 'gatewaya', secretKey: 'sk_test_x', webhookSecret: 'whsec_x', apiUrl: 'http://127.0.0.1:1' });

  it('off: only the configured gateways, no sandbox anywhere', () => {
    expect(paymentGateways({}, 'off')).toEqual({});
    const configured = paymentGateways({ gatewaya: stripeGateway() }, 'off');
    expect(Object.keys(configured)).toEqual(['gatewaya']);
    expect(sandboxPaths(configured)).toEqual([]);
  });

  it('sandbox: every path without keys is the sandbox, a path with keys keeps its gateway', () => {
    const all = paymentGateways({}, 'sandbox');
    expect(sandboxPaths(all)).toEqual(['gatewaya', 'gatewayb']);
    expect(all.gatewayb).toBeInstanceOf(SandboxGateway);
    expect(all.gatewayb?.name).toBe('gatewayb');
    const mixed = paymentGateways({ gatewaya: stripeGateway() }, 'sandbox');
    expect(mixed.gatewaya?.provider).toBe('stripe');
    expect(sandboxPaths(mixed)).toEqual(['gatewayb']);
  });
});
