// Issue 14 item 3: top-ups through the two real gateways' protocols. Local servers speak Stripe's
// Checkout Sessions endpoint and Paystack's transaction initialize endpoint and sign webhook
// deliveries as those gateways do; the production clients (the official `stripe` package and
// our Paystack client) are the code under test, and the deliveries go through the public route.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PaystackGateway } from '../../src/modules/billing/gateways/paystack.js';
import { StripeGateway } from '../../src/modules/billing/gateways/stripe.js';
import { money } from '../factories/billing.js';
import { startFakePaystack, type FakePaystack } from '../factories/fake-paystack.js';
import { startFakeStripe, type FakeStripe, type WebhookDelivery } from '../factories/fake-stripe.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

interface Topup {
  payment_id: string;
  status: string;
  checkout_url: string | null;
  amount: number;
  currency: string;
  provider: string;
}

interface Payment {
  id: string;
  status: string;
  amount: number;
  failure_reason: string | null;
}

describe.each(STORE_KINDS)('top-ups through Stripe and Paystack on %s', (kind) => {
  let stripe: FakeStripe;
  let paystack: FakePaystack;
  let s: TestServer;
  let w: TestWorkspace;
  beforeAll(async () => {
    stripe = await startFakeStripe();
    paystack = await startFakePaystack();
    s = await startTestServer(kind, {
      gateways: {
        gatewaya: new StripeGateway({ name: 'gatewaya', secretKey: stripe.secretKey, webhookSecret: stripe.webhookSecret, apiUrl: stripe.url }),
        gatewayb: new PaystackGateway({ name: 'gatewayb', secretKey: paystack.secretKey, apiUrl: paystack.url }),
      },
      platform: { publicUrl: 'https://slipway.example.com' },
    });
    w = await makeWorkspace(s);
  });
  afterAll(async () => {
    await s.close();
    await stripe.close();
    await paystack.close();
  });

  const deliver = (gateway: string, d: WebhookDelivery) => s.request<{ outcome: string }>('POST', `/api/webhooks/payments/${gateway}`, { raw: d.body, headers: d.headers });
  const balance = async () => (await s.request<{ balance: number }>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key })).body.data?.balance;
  const payment = async (id: string) => (await s.request<{ payments: Payment[] }>('GET', `/api/workspaces/${w.slug}/wallet/payments?limit=50`, { key: w.admin.key })).body.data?.payments.find((p) => p.id === id);

  it('gatewaya: a Stripe Checkout Session in minor units, credited once by the signed completed event', async () => {
    const start = await balance();
    const r = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body: { amount: 12.5 } });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ status: 'pending', amount: 12.5, currency: 'USD', provider: 'stripe' });
    const call = stripe.calls.at(-1);
    expect(call?.authorization).toBe(`Bearer ${stripe.secretKey}`);
    expect(call?.params).toMatchObject({ mode: 'payment', client_reference_id: r.body.data?.payment_id, line_items: [{ price_data: { currency: 'usd', unit_amount: '1250' }, quantity: '1' }] });
    const session = [...stripe.sessions.values()].find((x) => x.client_reference_id === r.body.data?.payment_id);
    expect(r.body.data?.checkout_url).toBe(session?.url);
    expect(await balance()).toBe(start);
    expect((await payment(r.body.data?.payment_id ?? ''))?.status).toBe('pending');

    const completed = stripe.completedEvent(session?.id ?? '');
    expect((await deliver('gatewaya', completed)).body).toEqual({ success: true, data: { outcome: 'credited' } });
    expect(await balance()).toBe((start ?? 0) + 1250);
    // the same delivery again, and the same payment confirmed by another event: nothing more
    expect((await deliver('gatewaya', completed)).body.data?.outcome).toBe('duplicate');
    expect((await deliver('gatewaya', stripe.event('checkout.session.async_payment_succeeded', session?.id ?? ''))).body.data?.outcome).toBe('settled');
    expect((await deliver('gatewaya', stripe.event('checkout.session.expired', session?.id ?? ''))).body.data?.outcome).toBe('settled');
    expect(await balance()).toBe((start ?? 0) + 1250);
    expect((await payment(r.body.data?.payment_id ?? ''))?.status).toBe('succeeded');
    const ledger = await s.request<{ transactions: { type: string; amount: number }[] }>('GET', `/api/workspaces/${w.slug}/wallet/transactions`, { key: w.admin.key });
    expect(ledger.body.data?.transactions.filter((t) => t.type === 'topup').map((t) => t.amount)).toEqual([1250]);
  });

  it('credits once when the same event arrives many times at once', async () => {
    const start = (await balance()) ?? 0;
    const r = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.owner.key, body: { amount: 3 } });
    const session = [...stripe.sessions.values()].find((x) => x.client_reference_id === r.body.data?.payment_id);
    const completed = stripe.completedEvent(session?.id ?? '');
    const other = stripe.completedEvent(session?.id ?? '');
    const outcomes = await Promise.all([...Array.from({ length: 6 }, () => deliver('gatewaya', completed)), deliver('gatewaya', other), deliver('gatewaya', other)]);
    expect(outcomes.map((o) => o.status)).toEqual(Array(8).fill(200));
    expect(outcomes.filter((o) => o.body.data?.outcome === 'credited')).toHaveLength(1);
    expect(await balance()).toBe(start + 300);
    const m = await money(s, w.id);
    expect(m.ledger).toBe(m.balance);
  });

  it('refuses a bad signature with 401 and credits nothing', async () => {
    const start = await balance();
    const r = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body: { amount: 5 } });
    const session = [...stripe.sessions.values()].find((x) => x.client_reference_id === r.body.data?.payment_id);
    const forged = stripe.completedEvent(session?.id ?? '', { secret: 'whsec_not_the_endpoint_secret' });
    const refused = await deliver('gatewaya', forged);
    expect(refused.status).toBe(401);
    expect(refused.body.error).toMatch(/^The webhook signature does not hold/);
    // a genuine body with its signature header dropped, or altered after signing
    const genuine = stripe.completedEvent(session?.id ?? '');
    expect((await deliver('gatewaya', { body: genuine.body, headers: { 'content-type': 'application/json' } })).status).toBe(401);
    const altered = JSON.parse(genuine.body) as { data: { object: { amount_total: number } } };
    altered.data.object.amount_total = 500_000;
    expect((await deliver('gatewaya', { body: JSON.stringify(altered), headers: genuine.headers })).status).toBe(401);
    // signed too long ago
    const stale = stripe.completedEvent(session?.id ?? '', { timestamp: Math.floor(Date.now() / 1000) - 400 });
    expect((await deliver('gatewaya', stale)).status).toBe(401);
    expect(await balance()).toBe(start);
    expect((await payment(r.body.data?.payment_id ?? ''))?.status).toBe('pending');
    expect(s.logs.join('\n')).not.toContain(stripe.webhookSecret);
    expect(s.logs.join('\n')).not.toContain(stripe.secretKey);
  });

  it('marks a payment failed, without credit, when the confirmed amount or currency differs', async () => {
    const start = await balance();
    for (const overrides of [{ amountMinor: 100 }, { currency: 'eur' }]) {
      const r = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body: { amount: 20 } });
      const session = [...stripe.sessions.values()].find((x) => x.client_reference_id === r.body.data?.payment_id);
      expect((await deliver('gatewaya', stripe.completedEvent(session?.id ?? '', overrides))).body.data?.outcome).toBe('mismatch');
      const p = await payment(r.body.data?.payment_id ?? '');
      expect(p?.status).toBe('failed');
      expect(p?.failure_reason).toMatch(/not credited/);
    }
    expect(await balance()).toBe(start);
  });

  it('marks an expired Checkout Session failed; ignores events about no payment of ours', async () => {
    const r = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body: { amount: 7 } });
    const session = [...stripe.sessions.values()].find((x) => x.client_reference_id === r.body.data?.payment_id);
    expect((await deliver('gatewaya', stripe.event('checkout.session.expired', session?.id ?? ''))).body.data?.outcome).toBe('failed');
    expect((await payment(r.body.data?.payment_id ?? ''))?.status).toBe('failed');
    // completed after it expired: too late, nothing credited
    const start = await balance();
    expect((await deliver('gatewaya', stripe.completedEvent(session?.id ?? ''))).body.data?.outcome).toBe('settled');
    expect(await balance()).toBe(start);
    const stranger = await startFakeStripe({ secretKey: stripe.secretKey, webhookSecret: stripe.webhookSecret });
    try {
      const checkout = await new StripeGateway({ name: 'gatewaya', secretKey: stripe.secretKey, webhookSecret: stripe.webhookSecret, apiUrl: stranger.url }).createCheckout({ paymentId: 'not-ours', amountMinor: 100, currency: 'USD', email: 'x@example.com', description: 'x', returnUrl: '' });
      expect((await deliver('gatewaya', stranger.completedEvent(checkout.reference))).body.data?.outcome).toBe('unknown');
    } finally {
      await stranger.close();
    }
  });

  it('gatewayb: a Paystack transaction in minor units, credited once by the signed charge.success event', async () => {
    const start = (await balance()) ?? 0;
    const r = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewayb`, { key: w.admin.key, body: { amount: 2500 } });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ status: 'pending', amount: 2500, currency: 'USD', provider: 'paystack' });
    const t = paystack.transactions.get(r.body.data?.payment_id ?? '');
    expect(t).toMatchObject({ amount: 2500, currency: 'USD', email: w.admin.email });
    expect(r.body.data?.checkout_url).toMatch(/^https?:\/\//);
    const call = paystack.calls.at(-1);
    expect(call?.authorization).toBe(`Bearer ${paystack.secretKey}`);
    const success = paystack.completedEvent(t?.reference ?? '');
    expect((await deliver('gatewayb', success)).body.data?.outcome).toBe('credited');
    expect((await deliver('gatewayb', success)).body.data?.outcome).toBe('duplicate');
    expect(await balance()).toBe(start + 2500);
    // a forged signature, a missing one, and an amount that differs
    const forged = paystack.completedEvent(t?.reference ?? '', { secret: 'sk_test_forged' });
    expect((await deliver('gatewayb', forged)).status).toBe(401);
    expect((await deliver('gatewayb', { body: success.body, headers: { 'content-type': 'application/json' } })).status).toBe(401);
    const r2 = await s.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewayb`, { key: w.admin.key, body: { amount: 1000 } });
    expect((await deliver('gatewayb', paystack.completedEvent(r2.body.data?.payment_id ?? '', { amountMinor: 10 }))).body.data?.outcome).toBe('mismatch');
    expect(await balance()).toBe(start + 2500);
    const m = await money(s, w.id);
    expect(m.ledger).toBe(m.balance);
  });

  it('answers 502 when the gateway refuses, records the payment failed, and never echoes the key', async () => {
    const broken = await startTestServer(kind, {
      replicaOf: s,
      gateways: { gatewaya: new StripeGateway({ name: 'gatewaya', secretKey: 'sk_test_wrong_key_0123456789', webhookSecret: stripe.webhookSecret, apiUrl: stripe.url }) },
    });
    try {
      const r = await broken.request<Topup>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body: { amount: 10 } });
      expect(r.status).toBe(502);
      expect(r.body.error).toMatch(/^The payment could not be started: /);
      expect(r.text).not.toContain('wrong_key');
      const failed = (await s.request<{ payments: Payment[] }>('GET', `/api/workspaces/${w.slug}/wallet/payments`, { key: w.admin.key })).body.data?.payments[0];
      expect(failed).toMatchObject({ status: 'failed', amount: 1000 });
    } finally {
      await broken.close();
    }
  });

  it('refuses deliveries for an unknown gateway name and bodies that are not JSON', async () => {
    expect((await s.request('POST', '/api/webhooks/payments/gatewayc', { body: {} })).status).toBe(400);
    expect((await s.request('POST', '/api/webhooks/payments/gatewaya', { raw: 'x=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status).toBe(415);
  });
});
