// Issue 14: metering, the ledger, the wallet routes, top-ups (sandbox), 402, alerts, suspension
// (issue 26: the gateways off by default with 503, the sandbox only when turned on, exact decimals)
// and resumption, through the real API on both stores. Resources "run" as the store says (a
// running deployment, a running database row): the engine is not needed to meter them. The real
// engine's side is test/e2e/billing-engine.test.ts; the real gateways' is billing-gateways.test.ts.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BillingRepository } from '../../src/store/repositories/billing.js';
import { DEFAULT_BILLING_POLICY } from '../../src/modules/billing/policy.js';
import type { EngineContainer } from '../../src/modules/billing/meter.js';
import { billingWorker, money, runningDatabase, runningProject, setClock } from '../factories/billing.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { mailerFor, parseMail, startSmtp } from '../factories/smtp.js';
import { STORE_KINDS } from '../factories/stores.js';

const MINUTE = 60_000;
/** 2 replicas × (0.5 vCPU × 0.000463 + 1 GiB × 0.000231) per minute = 925 micro-units */
const PROJECT_SIZE = { replicas: 2, cpu: '0.5', ram: '1' };
const PROJECT_PER_MINUTE = 925;
/** what n minutes of PROJECT_SIZE cost: each replica's container has its own meter, whose remainder carries on its own */
const projectMinutes = (n: number) => PROJECT_SIZE.replicas * Math.floor((n * PROJECT_PER_MINUTE) / PROJECT_SIZE.replicas);
/** 512 MiB × 0.000231 per GiB-minute = 115.5 micro-units per minute: the half carries */
const DATABASE_MB = 512;

interface Wallet {
  balance: number;
  currency: string;
  alert_threshold: number;
  unbilled: number;
  available: number;
  state: string;
  suspends_at: string | null;
}

interface Transaction {
  id: string;
  type: string;
  amount: number;
  balance_after: number;
  description: string;
  created_at: string;
}

interface Usage {
  period: string;
  currency: string;
  unit_prices: { vcpu_minute: number; gib_minute: number; database_gib_minute: number };
  resources: { resource_id: string; resource_kind: string; minutes: number; quantities: { vcpu_minutes: number; gib_minutes: number; database_gib_minutes: number }; cost: number }[];
  total: number;
  projected_total: number;
}

describe.each(STORE_KINDS)('billing on %s', (kind) => {
  describe('metering and the ledger', () => {
    let s: TestServer;
    let w: TestWorkspace;
    let projectId: string;
    let databaseId: string;
    beforeAll(async () => {
      s = await startTestServer(kind);
      setClock(s, '2027-03-10T10:00:30.000Z');
      w = await makeWorkspace(s);
      projectId = (await runningProject(s, w.id, PROJECT_SIZE)).id;
      databaseId = await runningDatabase(s, w.id, DATABASE_MB);
      const { worker } = billingWorker(s);
      // 150 passes a minute apart: minutes 10:00 to 12:29 are metered
      for (let i = 0; i < 150; i++) {
        if (i > 0) s.clock.advance(MINUTE);
        await worker.pass();
      }
    }, 120_000);
    afterAll(async () => s.close());

    it('charges every minute at the configured prices, exactly, and posts one ledger row per finished hour', async () => {
      const m = await money(s, w.id);
      // hours 10 and 11 posted: 60 × 925 + 60 × 115.5 = 62,430 each; 30 minutes of hour 12 unbilled
      expect(m.balance).toBe(5_000_000 - 2 * 62_430);
      expect(m.unbilled).toBe(30 * PROJECT_PER_MINUTE + 3_465);
      expect(m.ledger).toBe(m.balance);
      const tx = await s.request<{ transactions: Transaction[]; total: number }>('GET', `/api/workspaces/${w.slug}/wallet/transactions?page=1&limit=50`, { key: w.admin.key });
      expect(tx.status).toBe(200);
      expect(tx.body.data?.total).toBe(3);
      expect(tx.body.data?.transactions.map((t) => [t.type, t.amount, t.balance_after, t.description])).toEqual([
        ['usage', -6.243, 487.514, 'Usage 2027-03-10 11:00 to 12:00 UTC, 2 resources'],
        ['usage', -6.243, 493.757, 'Usage 2027-03-10 10:00 to 11:00 UTC, 2 resources'],
        ['adjustment', 500, 500, 'Starting credit'],
      ]);
    });

    it('shows the balance, the unbilled usage and what is available', async () => {
      const r = await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key });
      expect(r.body.data).toEqual({ balance: 487, currency: 'USD', alert_threshold: 0, unbilled: 3.1215, available: 484, state: 'active', suspends_at: null });
    });

    it('answers the usage of the month by resource, with unit prices, total and projection', async () => {
      const r = await s.request<Usage>('GET', `/api/workspaces/${w.slug}/wallet/usage`, { key: w.member.key });
      expect(r.status).toBe(200);
      const u = r.body.data;
      expect(u?.period).toBe('2027-03');
      expect(u?.unit_prices).toEqual({ vcpu_minute: 0.0463, gib_minute: 0.0231, database_gib_minute: 0.0231 });
      const project = u?.resources.find((x) => x.resource_id === projectId);
      // minutes are container-minutes: 2 replicas for 150 minutes
      expect(project).toMatchObject({ resource_kind: 'project', minutes: 300, quantities: { vcpu_minutes: 150, gib_minutes: 300, database_gib_minutes: 0 }, cost: 13.875 });
      const database = u?.resources.find((x) => x.resource_id === databaseId);
      expect(database).toMatchObject({ resource_kind: 'database', minutes: 150, quantities: { vcpu_minutes: 0, gib_minutes: 0, database_gib_minutes: 75 }, cost: 1.7325 });
      expect(u?.total).toBe(15.6075);
      // what runs now (1,040.5 micro-units a minute) until 2027-04-01T00:00Z
      const minutesLeft = Math.floor((Date.parse('2027-04-01T00:00:00Z') - s.clock.now().getTime()) / MINUTE);
      expect(u?.projected_total).toBeCloseTo(15.6075 + (minutesLeft * 1040.5) / 10_000, 3);
    });

    it('pages the ledger and refuses bad paging', async () => {
      const page2 = await s.request<{ transactions: Transaction[]; total: number; page: number; limit: number }>('GET', `/api/workspaces/${w.slug}/wallet/transactions?page=2&limit=2`, { key: w.owner.key });
      expect(page2.body.data).toMatchObject({ total: 3, page: 2, limit: 2 });
      expect(page2.body.data?.transactions.map((t) => t.type)).toEqual(['adjustment']);
      for (const q of ['limit=0', 'limit=51', 'page=0', 'page=x']) {
        const bad = await s.request('GET', `/api/workspaces/${w.slug}/wallet/transactions?${q}`, { key: w.owner.key });
        expect(bad.status, q).toBe(400);
      }
    });
  });

  describe('stored backups', () => {
    let s: TestServer;
    let w: TestWorkspace;
    let databaseId: string;
    const MIB = 1024 * 1024;
    beforeAll(async () => {
      // 43.2 a GiB-month: 1,000 micro-units a GiB-minute (43.2 / 43,200 minutes of a 30-day month)
      s = await startTestServer(kind, { platform: { billing: { prices: { ...DEFAULT_BILLING_POLICY.prices, backupGibMonth: 43_200_000_000n } } } });
      setClock(s, '2027-03-10T10:00:30.000Z');
      w = await makeWorkspace(s);
      databaseId = await runningDatabase(s, w.id, DATABASE_MB);
      // stopped: its server costs nothing, its backups are still kept
      await s.store.db.updateTable('databases').set({ status: 'stopped' }).where('id', '=', databaseId).execute();
      const at = s.clock.now().toISOString();
      for (const [status, size] of [['succeeded', 512 * MIB], ['succeeded', 512 * MIB], ['failed', null]] as const) {
        const id = s.deps.ids.id();
        await s.store.repos.backups.insert({
          id, workspace_id: w.id, database_id: databaseId, status, trigger: 'manual', destination: 'local', object_key: `${w.id}/${databaseId}/${id}.slwb`,
          size, checksum: null, manifest: null, started_at: at, finished_at: at, verified_at: null, restore_seconds: null, verify_status: null, verify_error: null, error: null, requested_by: null, created_at: at,
        });
      }
    });
    afterAll(async () => s.close());

    it('charges the bytes of succeeded backups by the minute at the GiB-month price, in the usage and the ledger, and stops when they are deleted', async () => {
      const { worker } = billingWorker(s);
      // 61 passes a minute apart: 10:00 to 11:00 metered, hour 10 posted
      for (let i = 0; i < 61; i++) {
        if (i > 0) s.clock.advance(MINUTE);
        await worker.pass();
      }
      const m = await money(s, w.id);
      expect(m.balance).toBe(5_000_000 - 60 * 1_000);
      expect(m.unbilled).toBe(1_000);
      const tx = await s.request<{ transactions: Transaction[] }>('GET', `/api/workspaces/${w.slug}/wallet/transactions?page=1&limit=10`, { key: w.admin.key });
      expect(tx.body.data?.transactions.map((t) => [t.type, t.amount, t.description])[0]).toEqual(['usage', -6, 'Usage 2027-03-10 10:00 to 11:00 UTC, 1 resource']);
      const usage = await s.request<Usage>('GET', `/api/workspaces/${w.slug}/wallet/usage`, { key: w.member.key });
      expect(usage.body.data?.resources).toEqual([expect.objectContaining({ resource_id: `backups:${databaseId}`, resource_kind: 'backups', minutes: 61, cost: 6.1 })]);

      // deleted: nothing more is charged
      await s.store.db.deleteFrom('backups').where('database_id', '=', databaseId).execute();
      for (let i = 0; i < 10; i++) {
        s.clock.advance(MINUTE);
        await worker.pass();
      }
      expect((await money(s, w.id)).unbilled).toBe(1_000);
    });
  });

  describe('exactly once per resource-minute', () => {
    let s: TestServer;
    let replica: TestServer;
    let w: TestWorkspace;
    beforeAll(async () => {
      s = await startTestServer(kind);
      setClock(s, '2027-03-10T10:00:05.000Z');
      w = await makeWorkspace(s);
      replica = await startTestServer(kind, { replicaOf: s });
      setClock(replica, '2027-03-10T10:00:05.000Z');
    });
    afterAll(async () => {
      await replica.close();
      await s.close();
    });

    const charged = async () => {
      const m = await money(s, w.id);
      return 5_000_000 - m.balance + m.unbilled;
    };
    const step = (ms: number) => {
      s.clock.advance(ms);
      replica.clock.advance(ms);
    };

    it('charges a minute once across repeated passes, a clock stepped back, a second process and a pass that died half-way', async () => {
      const p = await runningProject(s, w.id, PROJECT_SIZE);
      const a = billingWorker(s).worker;
      const b = billingWorker(replica).worker;
      await a.pass();
      expect(await charged()).toBe(projectMinutes(1));
      await a.pass();
      step(20_000);
      await a.pass();
      expect(await charged()).toBe(projectMinutes(1));
      // the clock steps back ten minutes: nothing is charged until it passes the meter again
      step(-10 * MINUTE);
      await a.pass();
      await b.pass();
      expect(await charged()).toBe(projectMinutes(1));
      step(10 * MINUTE + MINUTE);
      await b.pass();
      expect(await charged()).toBe(projectMinutes(2));
      // two processes metering the same minute at the same moment (PostgreSQL: SQLite serves one process)
      step(MINUTE);
      if (kind === 'postgres') await Promise.all([a.pass(), b.pass(), a.pass(), b.pass()]);
      else for (const w of [a, b, a, b]) await w.pass();
      expect(await charged()).toBe(projectMinutes(3));
      // a pass that dies after the first statement of its workspace's transaction leaves no trace
      step(MINUTE);
      const killed = vi.spyOn(BillingRepository.prototype, 'accrue').mockRejectedValue(new Error('killed mid-pass'));
      try {
        await expect(a.pass()).rejects.toThrow('killed mid-pass');
      } finally {
        killed.mockRestore();
      }
      expect(await charged()).toBe(projectMinutes(3));
      await a.pass();
      expect(await charged()).toBe(projectMinutes(4));
      // a restart of the metering after five minutes away: the minutes it ran meanwhile are charged
      step(5 * MINUTE);
      await b.pass();
      expect(await charged()).toBe(projectMinutes(9));
      const m = await money(s, w.id);
      expect(m.ledger).toBe(m.balance);
      await s.store.db.deleteFrom('projects').where('id', '=', p.id).execute();
    });

    it('charges every minute exactly once with two processes metering three workspaces for two hours', async () => {
      const more = [await makeWorkspace(s), await makeWorkspace(s), await makeWorkspace(s)];
      const sizes = [
        { replicas: 1, cpu: '0.1', ram: '0.125' },
        { replicas: 3, cpu: '0.25', ram: '0.5' },
        { replicas: 2, cpu: '1.5', ram: '2' },
      ];
      // per minute, in micro-units: 1 × (100 × 463 + 125 × 231) / 1000 … kept exact by the carry
      const perMinute = sizes.map((x) => (x.replicas * (Number(x.cpu) * 1000 * 463_000 + Number(x.ram) * 1000 * 231_000)) / 1_000_000);
      for (const [i, w2] of more.entries()) {
        await runningProject(s, w2.id, sizes[i] ?? PROJECT_SIZE);
        await runningDatabase(s, w2.id, 256);
      }
      const a = billingWorker(s).worker;
      const b = billingWorker(replica).worker;
      const start = await Promise.all(more.map((w2) => money(s, w2.id)));
      const minutes = 120;
      for (let i = 0; i < minutes; i++) {
        step(MINUTE);
        if (kind === 'postgres') await Promise.all([a.pass(), b.pass()]);
        else await (i % 3 === 0 ? b : a).pass();
      }
      for (const [i, w2] of more.entries()) {
        const m = await money(s, w2.id);
        const used = (start[i]?.balance ?? 0) - (start[i]?.unbilled ?? 0) - (m.balance - m.unbilled);
        // each resource's remainder carries on its own meter; 256 MiB × 0.000231 = 57.75 a minute
        expect(used, `workspace ${i.toString()}`).toBe(Math.floor(minutes * (perMinute[i] ?? 0)) + Math.floor(minutes * 57.75));
        expect(m.ledger).toBe(m.balance);
        const rows = await s.store.db.selectFrom('wallet_transactions').select('id').where('workspace_id', '=', w2.id).where('type', '=', 'usage').execute();
        expect(rows.length).toBeLessThanOrEqual(3);
      }
    });

    it('charges a container that stopped between two passes up to its exit, and a container back in a minute already charged not again', async () => {
      const p = await runningProject(s, w.id, { replicas: 1, cpu: '1', ram: '1' });
      await s.store.db.updateTable('deployments').set({ status: 'stopped' }).where('id', '=', p.deploymentId).execute();
      // the engine's answer, as the test sets it: one container of p
      let container: EngineContainer = { id: `crash-${p.id}`, resource: p.id, running: true, finishedAt: null, cpu: 1, memoryBytes: 1024 ** 3 };
      const worker = billingWorker(s, () => Promise.resolve([container])).worker;
      const before = await charged();
      step(MINUTE);
      await worker.pass();
      expect((await charged()) - before).toBe(694);
      // it exits 30 s into the next minute; the pass after sees it stopped: that minute is charged, no later one
      const exit = new Date(Math.floor(s.clock.now().getTime() / MINUTE) * MINUTE + MINUTE + 30_000);
      container = { ...container, running: false, finishedAt: exit };
      step(2 * MINUTE);
      await worker.pass();
      expect((await charged()) - before).toBe(2 * 694);
      step(MINUTE);
      await worker.pass();
      expect((await charged()) - before).toBe(2 * 694);
      // it runs again, is charged for this minute, stops and runs again within it: charged once
      container = { ...container, running: true, finishedAt: exit };
      await worker.pass();
      container = { ...container, running: false, finishedAt: s.clock.now() };
      await worker.pass();
      container = { ...container, running: true };
      await worker.pass();
      expect((await charged()) - before).toBe(3 * 694);
      container = { ...container, running: false };
      await worker.pass();
      await s.store.db.deleteFrom('projects').where('id', '=', p.id).execute();
    });

    it('never charges the minutes a resource did not run', async () => {
      const before = await charged();
      const p = await runningProject(s, w.id, { replicas: 1, cpu: '1', ram: '1' });
      const worker = billingWorker(s).worker;
      step(MINUTE);
      await worker.pass();
      // 1 × (1000 × 463000 + 1000 × 231000) pico = 694 micro-units
      expect((await charged()) - before).toBe(694);
      await s.store.db.updateTable('deployments').set({ status: 'stopped' }).where('id', '=', p.deploymentId).execute();
      for (let i = 0; i < 10; i++) {
        step(MINUTE);
        await worker.pass();
      }
      expect((await charged()) - before).toBe(694);
      await s.store.db.updateTable('deployments').set({ status: 'running' }).where('id', '=', p.deploymentId).execute();
      step(MINUTE);
      await worker.pass();
      expect((await charged()) - before).toBe(2 * 694);
      // a project scaled to zero runs no container and is not charged; the status alone changes nothing:
      // one marked crashed, stopped or suspended whose containers still run pays for them (issue 26)
      await s.store.db.updateTable('projects').set({ replicas: 0 }).where('id', '=', p.id).execute();
      step(MINUTE);
      await worker.pass();
      expect((await charged()) - before).toBe(2 * 694);
      let paid = 2 * 694;
      for (const status of ['crashed', 'stopped', 'suspended'] as const) {
        await s.store.db.updateTable('projects').set({ replicas: 1, status }).where('id', '=', p.id).execute();
        step(MINUTE);
        await worker.pass();
        paid += 694;
        expect((await charged()) - before, status).toBe(paid);
      }
      // a deleted resource's containers are no longer metered, and their idle meters go after an hour
      const meterOf = () => s.store.db.selectFrom('billing_meters').select(['resource_id', 'running']).where('resource_id', 'like', `${p.deploymentId}-%`).execute();
      expect(await meterOf()).toEqual([{ resource_id: `${p.deploymentId}-r0`, running: 1 }]);
      await s.store.db.deleteFrom('projects').where('id', '=', p.id).execute();
      step(MINUTE);
      await worker.pass();
      expect(await meterOf()).toEqual([{ resource_id: `${p.deploymentId}-r0`, running: 0 }]);
      step(61 * MINUTE);
      await worker.pass();
      expect(await meterOf()).toEqual([]);
    });
  });

  describe('top-ups with no gateway configured and the sandbox off (the default)', () => {
    let s: TestServer;
    let w: TestWorkspace;
    beforeAll(async () => {
      s = await startTestServer(kind);
      w = await makeWorkspace(s);
    });
    afterAll(async () => s.close());

    it.each([
      ['gatewaya', { amount: 10_000 }, '--stripe-secret-key with --stripe-webhook-secret (Stripe)'],
      ['gatewayb', { amount: 1_000_000 }, '--paystack-secret-key (Paystack)'],
    ])('%s answers 503 naming the settings to configure, and credits nothing', async (gateway, body, settings) => {
      for (const key of [w.owner.key, w.admin.key]) {
        const r = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/${gateway}`, { key, body });
        expect(r.status).toBe(503);
        expect(r.body).toEqual({
          success: false,
          error: `Top-ups through ${gateway} are not available on this installation: its operator has configured no payment gateway for it (${settings}) and has not turned on the sandbox (--payments sandbox).`,
        });
      }
      expect(await s.store.db.selectFrom('payments').select('id').where('workspace_id', '=', w.id).execute()).toEqual([]);
      expect((await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key })).body.data?.balance).toBe(500);
      const tx = await s.request<{ transactions: Transaction[] }>('GET', `/api/workspaces/${w.slug}/wallet/transactions`, { key: w.owner.key });
      expect(tx.body.data?.transactions.map((t) => t.type)).toEqual(['adjustment']);
    });

    it('points a 402 at the operator, not at a top-up path that is off', async () => {
      const empty = await makeWorkspace(s);
      const m = await money(s, empty.id);
      await s.store.transaction((tx) => tx.wallets.post({ id: s.deps.ids.id(), workspaceId: empty.id, type: 'adjustment', amountMicros: -m.balance, description: 'test: drained', reference: null, at: s.clock.now().toISOString() }));
      const r = await s.request('POST', `/api/workspaces/${empty.slug}/databases`, { key: empty.member.key, body: { name: 'cache', type: 'redis' } });
      expect(r.status).toBe(402);
      expect(r.body.error).toBe('The workspace wallet has no credit left; this installation takes no top-ups (no payment gateway is configured): ask its operator for credit (slipway admin grant-credit), then try again.');
    });

    it('answers 503 to a webhook delivery for a path with no gateway', async () => {
      const r = await s.request('POST', '/api/webhooks/payments/gatewayb', { raw: '{"event":"charge.success","data":{"reference":"x"}}', headers: { 'content-type': 'application/json', 'x-paystack-signature': 'ab' } });
      expect(r.status).toBe(503);
      expect(r.body.error).toMatch(/^Top-ups through gatewayb are not available on this installation/);
    });
  });

  describe('top-ups through the sandbox gateway (--payments sandbox)', () => {
    let s: TestServer;
    let w: TestWorkspace;
    beforeAll(async () => {
      s = await startTestServer(kind, { payments: 'sandbox' });
      w = await makeWorkspace(s);
      billingWorker(s);
    });
    afterAll(async () => s.close());

    it('credits at once, in major units through gatewaya and minor units through gatewayb', async () => {
      const a = await s.request<{ payment_id: string; status: string; checkout_url: string | null; amount: number; currency: string }>('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body: { amount: 10 } });
      expect(a.status).toBe(200);
      expect(a.body.data).toMatchObject({ status: 'succeeded', checkout_url: null, amount: 10, currency: 'USD', gateway: 'gatewaya', provider: 'sandbox' });
      const b = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewayb`, { key: w.owner.key, body: { amount: 250, currency: 'usd' } });
      expect(b.body.data).toMatchObject({ status: 'succeeded', amount: 250, gateway: 'gatewayb' });
      const g = await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key });
      expect(g.body.data?.balance).toBe(500 + 1000 + 250);
      const tx = await s.request<{ transactions: Transaction[] }>('GET', `/api/workspaces/${w.slug}/wallet/transactions`, { key: w.admin.key });
      expect(tx.body.data?.transactions.map((t) => [t.type, t.amount, t.balance_after])).toEqual([
        ['topup', 250, 1750],
        ['topup', 1000, 1500],
        ['adjustment', 500, 500],
      ]);
      const payments = await s.request<{ payments: { id: string; status: string; amount: number; provider: string }[]; total: number }>('GET', `/api/workspaces/${w.slug}/wallet/payments?limit=1`, { key: w.admin.key });
      expect(payments.body.data).toMatchObject({ total: 2, payments: [{ status: 'succeeded', amount: 250, provider: 'sandbox' }] });
      const m = await money(s, w.id);
      expect(m.ledger).toBe(m.balance);
    });

    it.each([
      ['gatewaya', { amount: 0.5 }, 'amount: a top-up through gatewaya is 1 to 10000 (major units) USD; got 0.5.'],
      ['gatewaya', { amount: 10_001 }, 'amount: a top-up through gatewaya is 1 to 10000 (major units) USD; got 10001.'],
      ['gatewaya', { amount: 10.005 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 10.005.'],
      // issue 26 item 9: every decimal counts, none is rounded away
      ['gatewaya', { amount: 0.999999999 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 0.999999999.'],
      ['gatewaya', { amount: 1.999999999 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 1.999999999.'],
      ['gatewaya', { amount: 10.001 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 10.001.'],
      ['gatewaya', { amount: 1.005 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 1.005.'],
      ['gatewaya', { amount: 5.0000001 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 5.0000001.'],
      ['gatewaya', { amount: 1e-7 }, 'amount: gatewaya takes major units of USD with at most 2 decimals (10 = 10.00 USD); got 1e-7.'],
      ['gatewaya', { amount: 1e21 }, 'amount: a top-up through gatewaya is 1 to 10000 (major units) USD; got 1e+21.'],
      ['gatewaya', { amount: 1.7976931348623157e308 }, 'amount: a top-up through gatewaya is 1 to 10000 (major units) USD; got 1.7976931348623157e+308.'],
      ['gatewayb', { amount: 999.9999999 }, 'amount: gatewayb takes a whole number of minor units of USD (1000 = 10.00 USD); got 999.9999999.'],
      ['gatewayb', { amount: 1e21 }, 'amount: a top-up through gatewayb is 100 to 1000000 (minor units) USD; got 1e+21.'],
      ['gatewayb', { amount: 99 }, 'amount: a top-up through gatewayb is 100 to 1000000 (minor units) USD; got 99.'],
      ['gatewayb', { amount: 1000.5 }, 'amount: gatewayb takes a whole number of minor units of USD (1000 = 10.00 USD); got 1000.5.'],
      ['gatewayb', { amount: 1000, currency: 'XYZ' }, 'currency: "XYZ" is not an ISO 4217 currency code; this wallet holds USD.'],
      ['gatewayb', { amount: 1000, currency: 'EUR' }, 'currency: this wallet holds USD; top it up in USD, not EUR.'],
    ])('refuses %s %j with 400 and writes nothing', async (gateway, body, message) => {
      const before = await s.store.db.selectFrom('payments').select('id').where('workspace_id', '=', w.id).execute();
      const r = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/${gateway}`, { key: w.admin.key, body });
      expect(r).toMatchObject({ status: 400, body: { success: false, error: message } });
      expect(await s.store.db.selectFrom('payments').select('id').where('workspace_id', '=', w.id).execute()).toEqual(before);
    });

    it.each([
      ['gatewaya', '{"amount": 0.999999999}', 'got 0.999999999.'],
      ['gatewaya', '{"amount": 1E-7}', 'got 1e-7.'],
      ['gatewaya', '{"amount": 1000000000000000000000000}', 'got 1e+24.'],
      ['gatewayb', '{"amount": 1000.000001}', 'got 1000.000001.'],
    ])('refuses %s %s as sent, with 400 naming the field and the rule', async (gateway, raw, got) => {
      const r = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/${gateway}`, { key: w.admin.key, raw, headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatch(/^amount: /);
      expect(r.body.error?.endsWith(got)).toBe(true);
    });

    it.each([
      ['gatewaya', 1.1, 110],
      ['gatewaya', 1.15, 115],
      ['gatewaya', 4.35, 435],
      ['gatewaya', 12.5, 1250],
      ['gatewaya', 10_000, 1_000_000],
      ['gatewayb', 1e3, 1000],
    ])('credits %s %d as exactly %d minor units', async (gateway, amount, minor) => {
      const before = (await money(s, w.id)).balance;
      const r = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/${gateway}`, { key: w.admin.key, body: { amount } });
      expect(r.status, r.text).toBe(200);
      expect((await money(s, w.id)).balance - before).toBe(minor * 10_000);
    });

    it.each([[{ threshold: 0.999999999 }], [{ threshold: 10.5 }], [{ threshold: 1e21 }], [{ threshold: -1 }], [{ threshold: '100' }]])('refuses the alert threshold %j with 400: whole minor units only', async (body) => {
      const r = await s.request('PUT', `/api/workspaces/${w.slug}/wallet/alert-threshold`, { key: w.admin.key, body });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatch(/threshold/);
      expect((await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key })).body.data?.alert_threshold).toBe(0);
    });

    it.each([[{}], [{ amount: -5 }], [{ amount: '10' }], [{ amount: 10, extra: 1 }]])('refuses the body %j with 400', async (body) => {
      const r = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.admin.key, body });
      expect(r.status).toBe(400);
      expect(r.body.success).toBe(false);
    });

    it('lets members read the balance and usage but not the ledger, payments or top-ups', async () => {
      for (const [method, path] of [['GET', 'transactions'], ['GET', 'payments'], ['POST', 'topup/gatewaya'], ['POST', 'topup/gatewayb']] as const) {
        const r = await s.request(method, `/api/workspaces/${w.slug}/wallet/${path}`, { key: w.member.key, ...(method === 'POST' ? { body: { amount: 1000 } } : {}) });
        expect(r.status, path).toBe(403);
      }
      expect((await s.request('GET', `/api/workspaces/${w.slug}/wallet/usage`, { key: w.member.key })).status).toBe(200);
    });
  });

  describe('402, alerts, suspension and resumption', () => {
    let s: TestServer;
    let smtp: Awaited<ReturnType<typeof startSmtp>>;
    let w: TestWorkspace;
    beforeAll(async () => {
      smtp = await startSmtp();
      s = await startTestServer(kind, { mailer: await mailerFor(smtp.url()), platform: { billing: { graceMs: 3_600_000 } }, payments: 'sandbox' });
      setClock(s, '2027-05-20T08:00:10.000Z');
      w = await makeWorkspace(s);
    });
    afterAll(async () => {
      await s.close();
      await smtp.close();
    });

    const subjects = () => smtp.received.filter((m) => m.to.includes(w.owner.email)).map((m) => parseMail(m.data).subject);

    it('warns below the threshold once, at 0, refuses paid work with 402, suspends after the grace period and resumes after a top-up', async () => {
      const { worker } = billingWorker(s);
      expect((await s.request('PUT', `/api/workspaces/${w.slug}/wallet/alert-threshold`, { key: w.admin.key, body: { threshold: 400 } })).body.data).toEqual({ threshold: 400 });
      // 10 replicas × (8 vCPU × 0.000463 + 32 GiB × 0.000231) = 11.096 cents a minute
      const p = await runningProject(s, w.id, { replicas: 10, cpu: '8', ram: '32' });
      const dbId = await runningDatabase(s, w.id, 32);
      const dbStatus = async () => (await s.store.db.selectFrom('databases').select('status').where('id', '=', dbId).executeTakeFirstOrThrow()).status;
      const minutes = async (n: number) => {
        for (let i = 0; i < n; i++) {
          s.clock.advance(MINUTE);
          await worker.pass();
        }
      };
      await worker.pass();
      await minutes(8);
      // 9 minutes: 99.864 cents used, 400.136 left
      expect(subjects()).toEqual([]);
      await minutes(1);
      // 10 minutes: 389.04 left, below 400
      expect(subjects()).toEqual([`Slipway: the wallet of ${w.slug} is below its alert threshold`]);
      await minutes(5);
      expect(subjects()).toHaveLength(1);
      // 46 minutes (08:00 to 08:45): 510.416 cents for the project, 0.0332 for a 32 MiB database
      await minutes(31);
      const empty = await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key });
      expect(empty.body.data).toMatchObject({ balance: 500, unbilled: 510.4492, available: -11, state: 'grace', suspends_at: expect.stringMatching(/^2027-05-20T09:45:1\d\./) as unknown });
      expect(subjects()).toEqual([`Slipway: the wallet of ${w.slug} is below its alert threshold`, `Slipway: the wallet of ${w.slug} is empty`]);
      // paid work is refused while nothing is available
      const other = await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'other' } });
      expect(other.status).toBe(201);
      const redeploy = await s.request('POST', `/api/workspaces/${w.slug}/projects/${p.slug}/redeploy`, { key: w.member.key });
      expect(redeploy.status).toBe(402);
      expect(redeploy.body.error).toMatch(/no credit left; top it up with POST \/api\/workspaces\/:slug\/wallet\/topup\/gatewaya/);
      expect((await s.request('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: 'cache', type: 'redis' } })).status).toBe(402);
      // scaling up is paid work too (nothing is saved); scaling down is not
      for (const patch of [{ replicas: 2 }, { cpu: '1' }, { ram: '1' }]) {
        expect((await s.request('PUT', `/api/workspaces/${w.slug}/projects/other`, { key: w.member.key, body: patch })).status, JSON.stringify(patch)).toBe(402);
      }
      expect((await s.request<{ replicas: number; cpu: string }>('GET', `/api/workspaces/${w.slug}/projects/other`, { key: w.member.key })).body.data).toMatchObject({ replicas: 1, cpu: '0.5' });
      expect((await s.request('PUT', `/api/workspaces/${w.slug}/projects/other`, { key: w.member.key, body: { replicas: 0 } })).status).toBe(200);
      // still running during the grace period
      s.clock.advance(30 * MINUTE);
      await worker.pass();
      expect((await s.request<{ status: string }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key })).body.data?.status).toBe('running');
      // past it: stopped and suspended, once
      s.clock.advance(31 * MINUTE);
      await worker.pass();
      await worker.pass();
      const suspended = await s.request<{ status: string }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key });
      expect(suspended.body.data?.status).toBe('suspended');
      const d = await s.store.db.selectFrom('deployments').select('status').where('id', '=', p.deploymentId).executeTakeFirstOrThrow();
      expect(d.status).toBe('stopped');
      expect(await dbStatus()).toBe('suspended');
      expect(subjects()).toHaveLength(3);
      expect(subjects()[2]).toBe(`Slipway: the apps of ${w.slug} are suspended`);
      expect((await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key })).body.data?.state).toBe('suspended');
      // nothing runs now, nothing is charged
      const frozen = await money(s, w.id);
      s.clock.advance(2 * 60 * MINUTE);
      await worker.pass();
      const after = await money(s, w.id);
      expect(after.balance - after.unbilled).toBe(frozen.balance - frozen.unbilled);
      // a top-up that does not cover the debt keeps it suspended; one that does resumes it
      await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewayb`, { key: w.owner.key, body: { amount: 100 } });
      await worker.pass();
      expect((await s.request<{ status: string }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key })).body.data?.status).toBe('suspended');
      const topup = await s.request('POST', `/api/workspaces/${w.slug}/wallet/topup/gatewaya`, { key: w.owner.key, body: { amount: 50 } });
      expect(topup.status).toBe(200);
      await worker.pass();
      const resumed = await s.request<{ status: string }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}`, { key: w.member.key });
      expect(resumed.body.data?.status).toBe('building');
      const queued = await s.request<{ deployments: { source: string; status: string; image: string | null }[] }>('GET', `/api/workspaces/${w.slug}/projects/${p.slug}/deployments`, { key: w.member.key });
      expect(queued.body.data?.deployments[0]).toMatchObject({ source: 'redeploy', status: 'queued', image: `slipway-test/${p.slug}:1` });
      expect(await dbStatus()).toBe('running');
      expect((await s.request<Wallet>('GET', `/api/workspaces/${w.slug}/wallet`, { key: w.member.key })).body.data).toMatchObject({ state: 'active', suspends_at: null });
      // the next crossing notifies again
      expect(subjects()).toHaveLength(3);
      const m = await money(s, w.id);
      expect(m.ledger).toBe(m.balance);
    }, 60_000);
  });
});
