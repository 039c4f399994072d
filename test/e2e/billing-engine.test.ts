// Issue 14 end to end on the real engine: a project built from Git runs behind the router and is
// metered; top-ups through both gateways' local servers are credited once by their signed
// webhooks; the wallet runs dry, the project keeps serving through the grace period, is then
// stopped and marked suspended (its containers gone, its image kept; its database's server gone,
// its data kept), and a top-up brings both back.
// Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import Docker from 'dockerode';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PaystackGateway } from '../../src/modules/billing/gateways/paystack.js';
import { StripeGateway } from '../../src/modules/billing/gateways/stripe.js';
import { iso } from '../../src/domain/clock.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { engineContainers } from '../../src/modules/billing/meter.js';
import { instanceLabels } from '../../src/modules/deployments/engine/containers.js';
import { instanceId } from '../../src/store/db.js';
import { billingWorker, money } from '../factories/billing.js';
import { startDeployFixture, viaRouter, type DeployFixture } from '../factories/engine.js';
import { startFakePaystack, type FakePaystack } from '../factories/fake-paystack.js';
import { startFakeStripe, type FakeStripe, type WebhookDelivery } from '../factories/fake-stripe.js';
import { ensureBaseImage, ensureDatabaseImages } from '../factories/images.js';
import { waitFor } from '../factories/process.js';
import { settledDeployment } from '../factories/deployments.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

describe('billing on the engine', () => {
  let fx: DeployFixture;
  let stripe: FakeStripe;
  let paystack: FakePaystack;
  const docker = new Docker();
  const api = () => `/api/workspaces/${fx.w.slug}`;
  const host = () => `billed-${fx.w.slug}.apps.test`;

  beforeAll(async () => {
    await ensureDatabaseImages();
    const base = await ensureBaseImage();
    stripe = await startFakeStripe();
    paystack = await startFakePaystack();
    fx = await startDeployFixture('sqlite', 'acme/billed', {
      engine: { databases: { readyTimeoutMs: 120_000 } },
      server: {
        platform: { billing: { graceMs: 2 * MINUTE } },
        gateways: {
          gatewaya: new StripeGateway({ name: 'gatewaya', secretKey: stripe.secretKey, webhookSecret: stripe.webhookSecret, apiUrl: stripe.url }),
          gatewayb: new PaystackGateway({ name: 'gatewayb', secretKey: paystack.secretKey, apiUrl: paystack.url }),
        },
      },
    });
    await fx.repo.commit('v1', {
      Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
      'index.html': 'billed v1\n',
    });
  }, 600_000);
  afterAll(async () => {
    await fx.close();
    await stripe.close();
    await paystack.close();
  }, 120_000);

  const settled = (id: string) => settledDeployment<Deployment>(fx.s, fx.w.member.key, `${api()}/projects/billed`, id);

  const deliver = (gateway: string, d: WebhookDelivery) => fx.s.request<{ outcome: string }>('POST', `/api/webhooks/payments/${gateway}`, { raw: d.body, headers: d.headers });
  const wallet = async () => (await fx.s.request<{ balance: number; available: number; state: string }>('GET', `${api()}/wallet`, { key: fx.w.member.key })).body.data;
  const containers = async (projectId: string) => docker.listContainers({ all: true, filters: { label: [`slipway.project=${projectId}`] } });
  const servers = async (databaseId: string) => docker.listContainers({ all: true, filters: { label: [`slipway.database=${databaseId}`] } });

  const until = <T>(what: string, check: () => Promise<T | undefined>) => waitFor(what, check, undefined, 120_000);

  /** The note the app wrote into its Redis, read from the host. */
  async function note(url: string, write?: string): Promise<string | null> {
    const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await r.connect();
    try {
      if (write !== undefined) await r.set('note', write);
      return await r.get('note');
    } finally {
      r.disconnect();
    }
  }

  it('meters a running project, credits top-ups once, suspends it after the grace period and resumes it after a top-up', async () => {
    const { s, w, engine } = fx;
    // An hour's usage is posted to the balance when the hour ends. The balance asserted after the
    // top-ups below is that of an hour still open, so the test starts early in an hour (before
    // anything of it runs or is metered): a real hour ending mid-test made it 2499 once.
    s.clock.advance(HOUR - (s.clock.now().getTime() % HOUR) + 2 * MINUTE);
    // metered from what the engine runs, as the leader's worker is
    const { worker } = billingWorker(s, engineContainers(engine.runtime, instanceLabels(await instanceId(s.store))));
    const made = await s.request<{ id: string }>('POST', `${api()}/projects`, { key: w.member.key, body: { name: 'billed', port: 8080, cpu: '0.25', ram: '0.125' } });
    const projectId = made.body.data?.id ?? '';
    await s.request('POST', `${api()}/projects/billed/git`, { key: w.member.key, body: { repo_full_name: 'acme/billed' } });
    const queued = await s.request<Deployment>('POST', `${api()}/projects/billed/deploy`, { key: w.member.key });
    const d1 = await settled(queued.body.data?.id ?? '');
    expect(d1.status, d1.error ?? '').toBe('running');
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'billed v1\n' });
    const created = await s.request<{ id: string; password: string }>('POST', `${api()}/databases`, { key: w.member.key, body: { name: 'cache', type: 'redis' } });
    expect(created.status, created.text).toBe(202);
    const dbId = created.body.data?.id ?? '';
    const password = created.body.data?.password ?? '';
    const db = await until('the database', async () => {
      const d = (await s.request<{ status: string; external_connection_string: string | null }>('GET', `${api()}/databases/cache`, { key: w.member.key })).body.data;
      return d?.status === 'running' ? d : undefined;
    });
    const redisUrl = (db.external_connection_string ?? '').replace('********', password);
    expect(await note(redisUrl, 'kept')).toBe('kept');

    // metered: 0.25 vCPU × 0.000463 + 0.125 GiB × 0.000231 = 144.625 micro-units a minute
    await worker.pass();
    s.clock.advance(MINUTE);
    await worker.pass();
    const usage = await s.request<{ resources: { resource_id: string; minutes: number; cost: number }[] }>('GET', `${api()}/wallet/usage`, { key: w.member.key });
    expect(usage.body.data?.resources).toEqual(
      expect.arrayContaining([expect.objectContaining({ resource_id: projectId, minutes: 2, cost: 0.0289 }), expect.objectContaining({ resource_id: dbId, resource_kind: 'database', minutes: 2 })]),
    );
    expect((await wallet())?.available).toBe(499);

    // a top-up through each gateway, each confirmed by its signed webhook once
    const a = await s.request<{ payment_id: string; checkout_url: string }>('POST', `${api()}/wallet/topup/gatewaya`, { key: w.owner.key, body: { amount: 10 } });
    expect(a.body.data?.checkout_url).toMatch(/^https?:\/\//);
    const session = [...stripe.sessions.values()].find((x) => x.client_reference_id === a.body.data?.payment_id);
    const completed = stripe.completedEvent(session?.id ?? '');
    expect((await deliver('gatewaya', completed)).body.data?.outcome).toBe('credited');
    expect((await deliver('gatewaya', completed)).body.data?.outcome).toBe('duplicate');
    const b = await s.request<{ payment_id: string }>('POST', `${api()}/wallet/topup/gatewayb`, { key: w.owner.key, body: { amount: 1000 } });
    const success = paystack.completedEvent(b.body.data?.payment_id ?? '');
    expect((await deliver('gatewayb', success)).body.data?.outcome).toBe('credited');
    expect((await deliver('gatewayb', success)).body.data?.outcome).toBe('duplicate');
    expect((await wallet())?.balance).toBe(2500);

    // the wallet runs dry: an operator's adjustment leaves 300 micro-units, about two minutes
    const m = await money(s, w.id);
    await s.store.transaction((tx) => tx.wallets.post({ id: s.deps.ids.id(), workspaceId: w.id, type: 'adjustment', amountMicros: -(m.balance - m.unbilled - 300), description: 'test: drained', reference: null, at: iso(s.clock.now()) }));
    for (let i = 0; i < 3; i++) {
      s.clock.advance(MINUTE);
      await worker.pass();
    }
    expect(await wallet()).toMatchObject({ state: 'grace' });
    // paid work is refused, running work goes on through the grace period
    expect((await s.request('POST', `${api()}/projects/billed/redeploy`, { key: w.member.key })).status).toBe(402);
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'billed v1\n' });

    // past it: stopped and suspended; the image and the deployment are kept
    s.clock.advance(2 * MINUTE);
    await worker.pass();
    const suspended = await s.request<{ status: string }>('GET', `${api()}/projects/billed`, { key: w.member.key });
    expect(suspended.body.data?.status).toBe('suspended');
    expect(await containers(projectId)).toEqual([]);
    expect((await viaRouter(engine.routerPort, host())).status).toBe(503);
    expect((await wallet())?.state).toBe('suspended');
    expect(await docker.getImage(d1.image ?? '').inspect()).toBeDefined();
    // the database's server goes too, its volume stays
    expect((await s.request<{ status: string }>('GET', `${api()}/databases/cache`, { key: w.member.key })).body.data?.status).toBe('suspended');
    await until('the database server to stop', async () => ((await servers(dbId)).length === 0 ? true : undefined));
    expect((await docker.listVolumes({ filters: { label: [`slipway.database=${dbId}`] } })).Volumes).toHaveLength(1);

    // a top-up brings it back with the image it ran
    const c = await s.request<{ payment_id: string }>('POST', `${api()}/wallet/topup/gatewaya`, { key: w.owner.key, body: { amount: 5 } });
    const s2 = [...stripe.sessions.values()].find((x) => x.client_reference_id === c.body.data?.payment_id);
    expect((await deliver('gatewaya', stripe.completedEvent(s2?.id ?? ''))).body.data?.outcome).toBe('credited');
    const resumed = await (async () => {
      const end = Date.now() + 180_000;
      for (;;) {
        const list = (await s.request<{ deployments: Deployment[] }>('GET', `${api()}/projects/billed/deployments`, { key: w.member.key })).body.data?.deployments ?? [];
        const latest = list[0];
        if (latest !== undefined && latest.id !== d1.id && latest.status === 'running') return latest;
        if (Date.now() > end) throw new Error('the project did not come back');
        await new Promise((res) => setTimeout(res, 250));
      }
    })();
    expect(resumed).toMatchObject({ source: 'redeploy', image: d1.image });
    expect(await viaRouter(engine.routerPort, host())).toEqual({ status: 200, body: 'billed v1\n' });
    expect((await s.request<{ status: string }>('GET', `${api()}/projects/billed`, { key: w.member.key })).body.data?.status).toBe('running');
    expect((await wallet())?.state).toBe('active');
    // the database is back on its volume, with what it held
    await until('the database to run again', async () => ((await s.request<{ status: string }>('GET', `${api()}/databases/cache`, { key: w.member.key })).body.data?.status === 'running' ? true : undefined));
    const again = await until('the database server to start', async () => {
      const d = (await s.request<{ external_connection_string: string | null }>('GET', `${api()}/databases/cache`, { key: w.member.key })).body.data;
      return (await servers(dbId)).some((c) => c.State === 'running') ? d : undefined;
    });
    expect(await until('the note', async () => note((again.external_connection_string ?? '').replace('********', password)).catch(() => undefined))).toBe('kept');
    const after = await money(s, w.id);
    expect(after.ledger).toBe(after.balance);
  }, 300_000);
});
