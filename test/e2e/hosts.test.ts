// Issue 9, item 2: default hosts are unique platform-wide, enforced by the store. `<project>-
// <workspace>` alone is ambiguous (project `shop-api` in workspace `alpha` and project `shop` in
// workspace `api-alpha` both make `shop-api-alpha`): the host is stored with the project,
// uniquely indexed, and the second tenant's project is refused with 409 at creation, so that
// no deploy ever discovers the conflict.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/db.js';
import { isUniqueViolation } from '../../src/store/dialects.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { freshDatabase, STORE_KINDS } from '../factories/stores.js';

interface Project {
  id: string;
  slug: string;
  default_domain: string;
  url: string;
}

describe.each(STORE_KINDS)('default hosts on %s', (kind) => {
  let s: TestServer;
  let alpha: TestWorkspace;
  let apiAlpha: TestWorkspace;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { appsDomain: 'apps.test' } });
    alpha = await makeWorkspace(s, 'alpha');
    apiAlpha = await makeWorkspace(s, 'api-alpha');
  });
  afterAll(async () => s.close());

  const create = (w: TestWorkspace, name: string, key = w.member.key) => s.request<Project>('POST', `/api/workspaces/${w.slug}/projects`, { key, body: { name } });
  const list = (w: TestWorkspace) => s.request<Project[]>('GET', `/api/workspaces/${w.slug}/projects`, { key: w.member.key });

  it('refuses project shop in api-alpha once shop-api in alpha holds shop-api-alpha, with 409 naming no other tenant, and saves nothing', async () => {
    const first = await create(alpha, 'shop-api');
    expect(first.status).toBe(201);
    expect(first.body.data?.default_domain).toBe('shop-api-alpha.apps.test');

    const r = await create(apiAlpha, 'shop', apiAlpha.admin.key);
    expect(r).toMatchObject({
      status: 409,
      body: { success: false, error: 'The default domain "shop-api-alpha.apps.test" of this project is already taken by another project on this platform; choose another project name.' },
    });
    for (const secret of [alpha.id, first.body.data?.id ?? 'x', alpha.owner.email]) expect(r.text).not.toContain(secret);
    expect((await list(apiAlpha)).body.data).toEqual([]);
    expect(await s.store.db.selectFrom('projects').select('id').where('workspace_id', '=', apiAlpha.id).execute()).toEqual([]);
    // Another name in the same workspace is fine.
    expect((await create(apiAlpha, 'shop2')).body.data?.default_domain).toBe('shop2-api-alpha.apps.test');
  });

  it('refuses the other order as well: shop in api-alpha first, then shop-api in alpha', async () => {
    const beta = await makeWorkspace(s, 'beta');
    const webBeta = await makeWorkspace(s, 'web-beta');
    expect((await create(webBeta, 'app')).status).toBe(201);
    expect((await create(beta, 'app-web')).status).toBe(409);
  });

  it('lets exactly one of two concurrent creations of one default host win', async () => {
    const gamma = await makeWorkspace(s, 'gamma');
    const xGamma = await makeWorkspace(s, 'x-gamma');
    const statuses = (await Promise.all([create(gamma, 'a-x'), create(xGamma, 'a')])).map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409]);
  });

  it('keeps the default host when the name changes (PUT never changes the slug)', async () => {
    const p = await create(alpha, 'keeper');
    const put = await s.request<Project>('PUT', `/api/workspaces/alpha/projects/keeper`, { key: alpha.member.key, body: { name: 'Another Name' } });
    expect(put.body.data).toMatchObject({ slug: 'keeper', default_domain: p.body.data?.default_domain });
  });

  it('frees the default host when its project is deleted', async () => {
    const delta = await makeWorkspace(s, 'delta');
    const zDelta = await makeWorkspace(s, 'z-delta');
    expect((await create(delta, 'y-z')).status).toBe(201);
    expect((await create(zDelta, 'y')).status).toBe(409);
    expect((await s.request('DELETE', '/api/workspaces/delta/projects/y-z', { key: delta.member.key })).status).toBe(200);
    expect((await create(zDelta, 'y')).body.data?.default_domain).toBe('y-z-delta.apps.test');
  });
});

describe.each(STORE_KINDS)('the hosts migration on %s', (kind) => {
  it('keeps the oldest of two projects that share a default host, gives the later one its own, and keeps verified domains verified', async () => {
    const db = await freshDatabase(kind);
    try {
      const old = await createStore(db.url, { upTo: '2026-11-24T000000-restart-requests' });
      const t = (m: number) => `2026-11-2${m.toString()}T10:00:00.000Z`;
      await sql`insert into workspaces (id, name, slug, settings, created_at, updated_at) values
        ('w1', 'alpha', 'alpha', '{}', ${t(1)}, ${t(1)}), ('w2', 'api-alpha', 'api-alpha', '{}', ${t(1)}, ${t(1)})`.execute(old.db);
      await sql`insert into projects (id, workspace_id, name, slug, port, replicas, cpu, ram, status, created_at, updated_at) values
        ('0190aaaa-0000-7000-8000-00000000beef', 'w2', 'shop', 'shop', 8080, 1, '0.5', '0.5', 'running', ${t(3)}, ${t(3)}),
        ('0190aaaa-0000-7000-8000-00000000cafe', 'w1', 'shop-api', 'shop-api', 8080, 1, '0.5', '0.5', 'running', ${t(2)}, ${t(2)})`.execute(old.db);
      await sql`insert into domains (id, project_id, domain, verified, created_at) values
        ('d1', '0190aaaa-0000-7000-8000-00000000cafe', 'shop.example.com', 1, ${t(2)}),
        ('d2', '0190aaaa-0000-7000-8000-00000000beef', 'pending.example.com', 0, ${t(3)})`.execute(old.db);
      await old.close();

      const store = await createStore(db.url);
      try {
        const labels = await store.db.selectFrom('projects').select(['slug', 'host_label']).orderBy('created_at').execute();
        expect(labels).toEqual([
          { slug: 'shop-api', host_label: 'shop-api-alpha' },
          { slug: 'shop', host_label: 'shop-api-alpha-0000beef' },
        ]);
        const domains = await store.db.selectFrom('domains').selectAll().orderBy('id').execute();
        expect(domains.map((d) => [d.domain, d.verified, d.verified_at])).toEqual([
          ['shop.example.com', 1, t(2)],
          ['pending.example.com', 0, null],
        ]);
        for (const d of domains) expect(d.verification_token).toMatch(/^[0-9a-f]{32}$/);
        // A verified name is unique; a pending claim of it by another project is not refused.
        const row = { verification_token: 'x', verified_at: null, created_at: t(4) };
        await store.db.insertInto('domains').values({ ...row, id: 'd3', project_id: '0190aaaa-0000-7000-8000-00000000beef', domain: 'shop.example.com', verified: 0 }).execute();
        const second = store.db.updateTable('domains').set({ verified: 1 }).where('id', '=', 'd3').execute();
        await expect(second).rejects.toSatisfy(isUniqueViolation);
        // A project claims a name once; the default host label is unique.
        await expect(store.db.insertInto('domains').values({ ...row, id: 'd4', project_id: '0190aaaa-0000-7000-8000-00000000beef', domain: 'shop.example.com', verified: 0 }).execute()).rejects.toSatisfy(isUniqueViolation);
        await expect(store.db.updateTable('projects').set({ host_label: 'shop-api-alpha' }).where('slug', '=', 'shop').execute()).rejects.toSatisfy(isUniqueViolation);
      } finally {
        await store.close();
      }
    } finally {
      await db.drop();
    }
  });
});
