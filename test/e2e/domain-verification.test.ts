// Issue 9, item 7: a custom domain is routed only once its ownership is proven (a DNS TXT record
// `_slipway-challenge.<domain>` = `slipway-verify=<token>`, or, with public addresses
// configured, the name resolving to this installation), and a project has a bounded number of
// them. Tried as a hostile tenant: mallory claims bigcorp's name first. DNS is a local server
// (test/factories/dns-server.ts) that the resolver is pointed at, as --dns-servers does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DomainPolicy } from '../../src/modules/domains/policy.js';
import type { Domain } from '../../src/modules/domains/domains.schema.js';
import { DomainService } from '../../src/modules/domains/domains.service.js';
import { startDnsServer, type TestDns } from '../factories/dns-server.js';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

let n = 0;
const fresh = (label: string) => `${label}-${(n++).toString()}-${Date.now().toString(36)}.bigcorp.example`;
const PUBLIC = '203.0.113.7';

describe.each(STORE_KINDS)('custom domain verification on %s', (kind) => {
  let s: TestServer;
  let dns: TestDns;
  let bigcorp: TestWorkspace;
  let mallory: TestWorkspace;
  let shop: TestProject;
  let evil: TestProject;
  const policy = (): DomainPolicy => ({ verification: 'dns', dnsServers: [dns.server], publicAddresses: [PUBLIC], maxPerProject: 3 });

  beforeAll(async () => {
    dns = await startDnsServer();
    s = await startTestServer(kind, { platform: { appsDomain: 'apps.test', domains: policy() } });
    bigcorp = await makeWorkspace(s);
    mallory = await makeWorkspace(s);
    shop = await makeProject(s, bigcorp);
    evil = await makeProject(s, mallory);
  });
  afterAll(async () => {
    await s.close();
    await dns.close();
  });

  const base = (w: TestWorkspace, p: TestProject) => `/api/workspaces/${w.slug}/projects/${p.slug}/domains`;
  const add = (w: TestWorkspace, p: TestProject, domain: string) => s.request<Domain>('POST', base(w, p), { key: w.member.key, body: { domain } });
  const verify = (w: TestWorkspace, p: TestProject, id: string) => s.request<Domain>('POST', `${base(w, p)}/${id}/verify`, { key: w.member.key });
  const list = (w: TestWorkspace, p: TestProject) => s.request<Domain[]>('GET', base(w, p), { key: w.member.key });

  it('keeps a new domain pending and shows how to verify it; a TXT record with its token verifies it', async () => {
    const name = fresh('www');
    const r = await add(bigcorp, shop, name);
    expect(r.status).toBe(201);
    const token = r.body.data?.verification?.value ?? '';
    expect(r.body.data).toMatchObject({ domain: name, verified: false, verified_at: null, verification: { type: 'TXT', name: `_slipway-challenge.${name}` } });
    expect(token).toMatch(/^slipway-verify=[0-9a-f]{32}$/);
    const id = r.body.data?.id ?? '';

    // Nothing published, then a record with another token: still pending.
    expect((await verify(bigcorp, shop, id))).toMatchObject({ status: 200, body: { data: { verified: false } } });
    dns.setTxt(`_slipway-challenge.${name}`, ['slipway-verify=0123456789abcdef0123456789abcdef', 'v=spf1 -all']);
    expect((await verify(bigcorp, shop, id)).body.data?.verified).toBe(false);

    dns.setTxt(`_slipway-challenge.${name}`, ['v=spf1 -all', token]);
    const v = await verify(bigcorp, shop, id);
    expect(v).toMatchObject({ status: 200, body: { success: true, data: { id, verified: true, verification: null, verified_at: expect.any(String) } } });
    expect((await list(bigcorp, shop)).body.data?.find((d) => d.id === id)?.verified).toBe(true);
    // Asking again changes nothing.
    expect((await verify(bigcorp, shop, id)).body.data).toEqual(v.body.data);
  });

  it('verifies at POST when the record is already there', async () => {
    const name = fresh('api');
    // The token is made at POST: a record published beforehand cannot name it, so this is the A/AAAA path.
    dns.setA(name, [PUBLIC]);
    const r = await add(bigcorp, shop, name);
    expect(r.body.data).toMatchObject({ verified: true, verification: null });
  });

  it('does not let a pending claim by another tenant block the owner; the proven claim wins and the other cannot verify', async () => {
    const name = fresh('shop');
    const squat = await add(mallory, evil, name);
    expect(squat.status).toBe(201);
    expect(squat.body.data?.verified).toBe(false);

    // The owner can still claim the name, and proves it with its own token.
    const mine = await add(bigcorp, shop, name);
    expect(mine.status).toBe(201);
    dns.setTxt(`_slipway-challenge.${name}`, [mine.body.data?.verification?.value ?? '']);
    // Mallory's token is not the one published: not proven.
    expect(await verify(mallory, evil, squat.body.data?.id ?? '')).toMatchObject({ status: 200, body: { data: { verified: false } } });
    expect((await verify(bigcorp, shop, mine.body.data?.id ?? '')).body.data?.verified).toBe(true);

    const again = await verify(mallory, evil, squat.body.data?.id ?? '');
    expect(again).toMatchObject({ status: 409, body: { success: false, error: `The domain "${name}" has been verified by another project on this platform; it cannot be verified here.` } });
    for (const secret of [bigcorp.slug, bigcorp.id, shop.slug, shop.id]) expect(again.text).not.toContain(secret);
    // A new claim of a verified name is refused, and saves nothing.
    const other = await makeProject(s, mallory);
    expect((await add(mallory, other, name)).status).toBe(409);
    expect(await s.store.db.selectFrom('domains').select('id').where('domain', '=', name).where('project_id', '=', other.id).execute()).toEqual([]);
  });

  it('accepts a name that resolves to this installation only while no other project claims it', async () => {
    const name = fresh('pointed');
    const squat = await add(mallory, evil, name);
    expect(squat.body.data?.verified).toBe(false);
    dns.setA(name, [PUBLIC]);
    // Two claims: the address proves the name is meant for this installation, not for whom.
    const mine = await add(bigcorp, await makeProject(s, bigcorp), name);
    expect(mine.status).toBe(201);
    expect(mine.body.data?.verified).toBe(false);
    expect((await verify(mallory, evil, squat.body.data?.id ?? '')).body.data?.verified).toBe(false);
    // An address elsewhere proves nothing either.
    const elsewhere = fresh('elsewhere');
    dns.setA(elsewhere, ['198.51.100.1']);
    expect((await add(bigcorp, await makeProject(s, bigcorp), elsewhere)).body.data?.verified).toBe(false);
  });

  it('verifies pending domains in the background pass', async () => {
    const p = await makeProject(s, bigcorp);
    const name = fresh('later');
    const r = await add(bigcorp, p, name);
    expect(r.body.data?.verified).toBe(false);
    await s.services.domains.verifyPending();
    expect((await list(bigcorp, p)).body.data?.[0]?.verified).toBe(false);
    dns.setTxt(`_slipway-challenge.${name}`, [r.body.data?.verification?.value ?? '']);
    await s.services.domains.verifyPending();
    expect((await list(bigcorp, p)).body.data?.[0]?.verified).toBe(true);
  });

  it('asks about a pending claim at every pass in its first hour, then hourly; POST …/verify asks at any time', async () => {
    const p = await makeProject(s, bigcorp);
    const name = fresh('slow');
    const r = await add(bigcorp, p, name);
    const id = r.body.data?.id ?? '';
    const verified = async () => (await list(bigcorp, p)).body.data?.find((d) => d.id === id)?.verified;
    await s.services.domains.verifyPending();
    const start = s.clock.now().getTime();
    try {
      s.clock.advance(2 * 3_600_000);
      await s.services.domains.verifyPending();
      dns.setTxt(`_slipway-challenge.${name}`, [r.body.data?.verification?.value ?? '']);
      // ten minutes later: this hour's question was asked already
      s.clock.advance(600_000);
      await s.services.domains.verifyPending();
      expect(await verified()).toBe(false);
      // the next hour
      s.clock.advance(3_000_000);
      await s.services.domains.verifyPending();
      expect(await verified()).toBe(true);

      const other = await makeProject(s, bigcorp);
      const late = fresh('late');
      const claim = await add(bigcorp, other, late);
      s.clock.advance(2 * 3_600_000);
      await s.services.domains.verifyPending();
      dns.setTxt(`_slipway-challenge.${late}`, [claim.body.data?.verification?.value ?? '']);
      expect((await verify(bigcorp, other, claim.body.data?.id ?? '')).body.data?.verified).toBe(true);
    } finally {
      s.clock.advance(start - s.clock.now().getTime());
    }
  });

  it('holds the limit of domains per project, pending ones included, with a clear 409 that saves nothing', async () => {
    const p = await makeProject(s, mallory);
    const names = [1, 2, 3, 4, 5, 6].map(() => fresh('many'));
    const statuses = (await Promise.all(names.map((name) => add(mallory, p, name)))).map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 409, 409, 409]);
    const r = await add(mallory, p, fresh('one-more'));
    expect(r).toMatchObject({ status: 409, body: { success: false, error: 'This project already has 3 custom domains, the most this platform allows (3); remove one first.' } });
    expect((await list(mallory, p)).body.data).toHaveLength(3);
    // Another project has its own allowance.
    expect((await add(mallory, await makeProject(s, mallory), fresh('own'))).status).toBe(201);
  });

  it('never lets another tenant verify or see a domain by its id', async () => {
    const p = await makeProject(s, bigcorp);
    const r = await add(bigcorp, p, fresh('private'));
    expect(r.status).toBe(201);
    const id = r.body.data?.id ?? '';
    expect((await s.request('POST', `${base(bigcorp, p)}/${id}/verify`, { key: mallory.owner.key })).status).toBe(404);
    expect((await verify(mallory, evil, id))).toMatchObject({ status: 404, body: { error: 'Domain was not found.' } });
  });

  it('with verification off, trusts every domain at once, and a background pass trusts the ones left pending', async () => {
    const off = new DomainService(s.store, s.deps.clock, s.deps.random, s.deps.ids, { ...policy(), verification: 'off' }, s.deps.policies.projects);
    const p = await makeProject(s, bigcorp);
    const left = await add(bigcorp, p, fresh('left'));
    expect(left.body.data?.verified).toBe(false);
    await off.verifyPending();
    expect((await list(bigcorp, p)).body.data?.[0]?.verified).toBe(true);
  });
});
