// Issue 14: the ledger under 10,000 random operations from concurrent clients, on both stores:
// usage charges, refunds, top-ups started through a gateway, and its signed webhook deliveries
// (replays of the same event, other events for the same payment, all at once). At every check
// the ledger sums exactly to the balance, and no payment is ever credited twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PaystackGateway } from '../../src/modules/billing/gateways/paystack.js';
import { iso } from '../../src/domain/clock.js';
import { startFakePaystack, type FakePaystack } from '../factories/fake-paystack.js';
import type { WebhookDelivery } from '../factories/fake-stripe.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

const OPERATIONS = 10_000;
const CLIENTS = 4;
const SEED = 0x5eed14;

/** mulberry32: a small seeded generator, so a failure can be replayed */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe.each(STORE_KINDS)('the ledger under random concurrent operations on %s', (kind) => {
  let paystack: FakePaystack;
  let s: TestServer;
  let workspaces: TestWorkspace[];
  beforeAll(async () => {
    paystack = await startFakePaystack();
    s = await startTestServer(kind, { gateways: { gatewayb: new PaystackGateway({ name: 'gatewayb', secretKey: paystack.secretKey, apiUrl: paystack.url }) } });
    workspaces = [await makeWorkspace(s), await makeWorkspace(s), await makeWorkspace(s)];
  });
  afterAll(async () => {
    await s.close();
    await paystack.close();
  });

  it(`keeps the ledger equal to the balance through ${OPERATIONS.toString()} operations, crediting each payment once`, async () => {
    const rand = random(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
    const references: { workspace: TestWorkspace; reference: string }[] = [];
    const deliveries: WebhookDelivery[] = [];
    /** what charges and refunds moved, per workspace: the credits come from the payments */
    const moved = new Map<string, number>(workspaces.map((w) => [w.id, 0]));
    const counts: Record<string, number> = {};

    const access = (w: TestWorkspace) => ({ caller: { user: { id: w.admin.id, email: w.admin.email, name: '', created_at: '', verified_at: '' }, keyId: w.admin.keyId }, workspace: { id: w.id, slug: w.slug, name: w.slug, settings: '{}', created_at: '', updated_at: '' }, role: 'admin' as const });

    async function operation(): Promise<void> {
      const w = pick(workspaces);
      const r = rand();
      const op = r < 0.3 ? 'charge' : r < 0.4 ? 'refund' : r < 0.6 ? 'topup' : r < 0.85 ? 'deliver' : 'replay';
      counts[op] = (counts[op] ?? 0) + 1;
      switch (op) {
        case 'charge':
        case 'refund': {
          const micros = 1 + Math.floor(rand() * 50_000);
          const amount = op === 'charge' ? -micros : micros;
          await s.store.transaction((tx) => tx.wallets.post({ id: s.deps.ids.id(), workspaceId: w.id, type: op === 'charge' ? 'usage' : 'refund', amountMicros: amount, description: op, reference: null, at: iso(s.clock.now()) }));
          moved.set(w.id, (moved.get(w.id) ?? 0) + amount);
          return;
        }
        case 'topup': {
          const t = await s.services.wallets.topup(access(w), 'gatewayb', { amount: 100 + Math.floor(rand() * 5_000) });
          references.push({ workspace: w, reference: t.payment_id });
          return;
        }
        case 'deliver': {
          if (references.length === 0) return;
          const { reference } = pick(references);
          // mostly the amount asked; now and then another one (the payment then fails)
          const d = rand() < 0.9 ? paystack.completedEvent(reference) : paystack.completedEvent(reference, { amountMinor: 1 });
          deliveries.push(d);
          await s.services.wallets.receiveWebhook('gatewayb', Buffer.from(d.body), d.headers);
          return;
        }
        case 'replay': {
          if (deliveries.length === 0) return;
          const d = pick(deliveries);
          // the same delivery several times at once
          await Promise.all([1, 2, 3].map(() => s.services.wallets.receiveWebhook('gatewayb', Buffer.from(d.body), d.headers)));
          return;
        }
      }
    }

    async function check(): Promise<void> {
      for (const w of workspaces) {
        const wallet = await s.store.repos.wallets.get(w.id);
        expect(await s.store.repos.wallets.ledgerSum(w.id)).toBe(wallet?.balance_micros);
        const payments = await s.store.db.selectFrom('payments').select(['id', 'status', 'amount']).where('workspace_id', '=', w.id).execute();
        const credits = await s.store.db.selectFrom('wallet_transactions').select(['reference', 'amount_micros']).where('workspace_id', '=', w.id).where('type', '=', 'topup').execute();
        const creditedOnce = new Map(credits.map((c) => [c.reference, Number(c.amount_micros)]));
        expect(creditedOnce.size).toBe(credits.length);
        let credited = 0;
        for (const p of payments) {
          const amount = creditedOnce.get(`payment:${p.id}`);
          if (p.status === 'succeeded') {
            expect(amount).toBe(Number(p.amount) * 10_000);
            credited += amount ?? 0;
          } else expect(amount).toBeUndefined();
        }
        // starting credit + charges and refunds + every succeeded payment, once
        expect(wallet?.balance_micros).toBe(5_000_000 + (moved.get(w.id) ?? 0) + credited);
      }
    }

    const perClient = OPERATIONS / CLIENTS;
    for (let round = 0; round < 10; round++) {
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          for (let i = 0; i < perClient / 10; i++) await operation();
        }),
      );
      await check();
    }
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(OPERATIONS);
    // every kind of operation happened, and some payments were credited and some refused
    expect(Object.keys(counts).sort()).toEqual(['charge', 'deliver', 'refund', 'replay', 'topup']);
    const statuses = await s.store.db.selectFrom('payments').select('status').distinct().execute();
    expect(statuses.map((x) => x.status).sort()).toEqual(['failed', 'pending', 'succeeded']);
  }, 300_000);
});
