// Custom domains through the real router (nginx) and Docker Engine, as two hostile tenants try
// them (issue 9, items 4 and 7): a pending domain is not routed until its TXT record proves it;
// a claim of a name another tenant holds saves nothing; a deleted project's routes go at once,
// so the freed name routes to its new owner only, and the reconciler converges without errors.
// The reconciler runs rarely here, so that nothing but the fix itself can take routes down.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Domain } from '../../src/modules/domains/domains.schema.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import { deployAndSettle } from '../factories/deployments.js';
import { startDnsServer, type TestDns } from '../factories/dns-server.js';
import { startDeployFixture, viaRouter, type DeployFixture } from '../factories/engine.js';
import { makeWorkspace, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

const app = (base: string, text: string) => ({
  Dockerfile: `FROM ${base}\nCOPY index.html /www/index.html\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
  'index.html': `${text}\n`,
});

describe.each(STORE_KINDS)('custom domains through the router, store %s', (kind) => {
  let fx: DeployFixture;
  let s: TestServer;
  let a: TestWorkspace;
  let b: TestWorkspace;
  let dns: TestDns;
  let routerPort: number;
  const errors: string[] = [];
  const SHOP = 'shop.bigcorp.example';
  const projects = (w: TestWorkspace) => `/api/workspaces/${w.slug}/projects`;

  async function deployed(w: TestWorkspace, name: string, repo: string): Promise<void> {
    expect((await s.request('POST', projects(w), { key: w.member.key, body: { name, port: 8080, cpu: '0.25', ram: '0.125' } })).status).toBe(201);
    expect((await s.request('POST', `${projects(w)}/${name}/git`, { key: w.member.key, body: { repo_full_name: repo } })).status).toBe(201);
    const d = await deployAndSettle<Deployment>(s, w.member.key, `${projects(w)}/${name}`, 120_000);
    if (d.status !== 'running') throw new Error(d.error ?? d.status);
  }
  const claim = (w: TestWorkspace, project: string) => s.request<Domain>('POST', `${projects(w)}/${project}/domains`, { key: w.member.key, body: { domain: SHOP } });
  const verify = (w: TestWorkspace, project: string, id: string) => s.request<Domain>('POST', `${projects(w)}/${project}/domains/${id}/verify`, { key: w.member.key });
  const rows = () => s.store.db.selectFrom('domains').select(['project_id', 'verified']).where('domain', '=', SHOP).execute();

  beforeAll(async () => {
    dns = await startDnsServer();
    fx = await startDeployFixture(kind, 'bigcorp/shop', {
      server: { platform: { appsDomain: 'apps.test', domains: { verification: 'dns', dnsServers: [dns.server], publicAddresses: [], maxPerProject: 20 } } },
      engine: {
        tune: { reconcileEveryMs: 3_600_000 },
        log: { info: () => undefined, warn: () => undefined, error: (_obj, msg) => { errors.push(msg); } },
      },
    });
    ({ s, w: a } = fx);
    b = await makeWorkspace(s);
    routerPort = fx.engine.routerPort;
    await fx.repo.commit('bigcorp', app(fx.engine.base, 'bigcorp shop'));
    await (await fx.root.repo('mallory/shop')).commit('mallory', app(fx.engine.base, 'mallory shop'));
    await deployed(a, 'shop', 'bigcorp/shop');
    await deployed(b, 'shop', 'mallory/shop');
  }, 240_000);

  afterAll(async () => {
    await fx.close();
    await dns.close();
  }, 60_000);

  it('does not route a pending domain; its TXT record verifies it and then it is routed', async () => {
    const added = await claim(a, 'shop');
    expect(added.status, added.text).toBe(201);
    expect(added.body.data).toMatchObject({ verified: false, verification: { type: 'TXT', name: `_slipway-challenge.${SHOP}` } });
    expect((await viaRouter(routerPort, SHOP)).status).toBe(503);
    // The background pass finds nothing yet either.
    await s.services.domains.verifyPending();
    expect((await verify(a, 'shop', added.body.data?.id ?? '')).body.data?.verified).toBe(false);
    expect((await viaRouter(routerPort, SHOP)).status).toBe(503);

    dns.setTxt(`_slipway-challenge.${SHOP}`, [added.body.data?.verification?.value ?? '']);
    const proven = await verify(a, 'shop', added.body.data?.id ?? '');
    expect(proven.body.data).toMatchObject({ verified: true, verification: null, verified_at: expect.any(String) });
    expect(await viaRouter(routerPort, SHOP)).toEqual({ status: 200, body: 'bigcorp shop\n' });
  });

  it('refuses another tenant\'s claim of the verified name with 409 and saves nothing', async () => {
    const r = await claim(b, 'shop');
    expect(r).toMatchObject({ status: 409, body: { success: false, error: `The domain "${SHOP}" is already in use on this platform.` } });
    expect(r.text).not.toContain(a.slug);
    expect(await rows()).toHaveLength(1);
    expect(await viaRouter(routerPort, SHOP)).toEqual({ status: 200, body: 'bigcorp shop\n' });
  });

  it('takes a deleted project\'s routes down at once; the freed name then routes only to its new owner', async () => {
    expect((await s.request('DELETE', `${projects(a)}/shop`, { key: a.member.key })).status).toBe(200);
    // No reconciler pass ran: the deletion itself told the router.
    expect((await viaRouter(routerPort, SHOP)).status).toBe(503);
    expect((await viaRouter(routerPort, `shop-${a.slug}.apps.test`)).status).toBe(503);

    // The old owner's TXT record is still there: it names the old claim's token, not this one.
    const r = await claim(b, 'shop');
    expect(r.status, r.text).toBe(201);
    expect(r.body.data?.verified).toBe(false);
    expect((await viaRouter(routerPort, SHOP)).status).toBe(503);
    dns.setTxt(`_slipway-challenge.${SHOP}`, [r.body.data?.verification?.value ?? '']);
    expect((await verify(b, 'shop', r.body.data?.id ?? '')).body.data?.verified).toBe(true);
    expect(await viaRouter(routerPort, SHOP)).toEqual({ status: 200, body: 'mallory shop\n' });
    expect(await viaRouter(routerPort, `shop-${b.slug}.apps.test`)).toEqual({ status: 200, body: 'mallory shop\n' });
  });

  it('reconciles without a conflict and keeps routing the name to its owner', async () => {
    await fx.engine.orchestrator.reconcile();
    await fx.engine.orchestrator.reconcile();
    expect(errors).toEqual([]);
    expect(await viaRouter(routerPort, SHOP)).toEqual({ status: 200, body: 'mallory shop\n' });
    expect((await viaRouter(routerPort, `shop-${a.slug}.apps.test`)).status).toBe(503);
  });
});
