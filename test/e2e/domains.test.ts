import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, makeWorkspace, startTestServer, type TestProject, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';
import { startDnsServer, type TestDns } from '../factories/dns-server.js';

interface Domain {
  id: string;
  domain: string;
  verified: boolean;
  verification: { type: 'TXT'; name: string; value: string } | null;
  verified_at: string | null;
  created_at: string;
}

let n = 0;
/** A host name no other test (or store run) has taken yet. */
const fresh = (label = 'd') => `${label}-${(n++).toString()}-${Date.now().toString(36)}.example.com`;

describe.each(STORE_KINDS)('project domains on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  let dns: TestDns;
  beforeAll(async () => {
    dns = await startDnsServer();
    s = await startTestServer(kind, { platform: { appsDomain: 'apps.test', domains: { verification: 'dns', dnsServers: [dns.server], publicAddresses: [], maxPerProject: 100 } } });
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
  });
  afterAll(async () => {
    await s.close();
    await dns.close();
  });

  const base = (ws: { slug: string }, project: { slug: string }) => `/api/workspaces/${ws.slug}/projects/${project.slug}/domains`;
  const add = (domain: unknown, key = w.member.key, ws: { slug: string } = w, project: { slug: string } = p) =>
    s.request<Domain>('POST', base(ws, project), { key, body: { domain } });
  const list = (key = w.member.key, ws: { slug: string } = w, project: { slug: string } = p) =>
    s.request<Domain[]>('GET', base(ws, project), { key });
  const remove = (id: string, key = w.member.key, ws: { slug: string } = w, project: { slug: string } = p) =>
    s.request<Domain>('DELETE', `${base(ws, project)}/${id}`, { key });

  it('adds, lists and removes a domain', async () => {
    const name = fresh('shop');
    const r = await add(name);
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      success: true,
      data: {
        id: expect.any(String),
        domain: name,
        verified: false,
        verification: { type: 'TXT', name: `_slipway-challenge.${name}`, value: expect.stringMatching(/^slipway-verify=[0-9a-f]{32}$/) },
        verified_at: null,
        created_at: expect.any(String),
      },
    });
    const id = r.body.data?.id ?? '';
    const second = await add(fresh('www'));
    expect((await list()).body.data?.map((d) => d.id)).toEqual([id, second.body.data?.id]);

    const removed = await remove(id);
    expect(removed).toMatchObject({ status: 200, body: { success: true, data: r.body.data } });
    expect((await list()).body.data?.map((d) => d.id)).toEqual([second.body.data?.id]);
    expect(await remove(id)).toMatchObject({ status: 404, body: { success: false, error: 'Domain was not found.' } });
    // Once removed, the name is free again.
    expect((await add(name)).status).toBe(201);
  });

  it('lists an empty array for a project without domains', async () => {
    const other = await makeProject(s, w);
    expect(await list(w.member.key, w, other)).toMatchObject({ status: 200, body: { success: true, data: [] } });
  });

  it('stores and answers the name lowercased', async () => {
    const name = fresh('MiXeD').toUpperCase();
    const r = await add(name);
    expect(r.status).toBe(201);
    expect(r.body.data?.domain).toBe(name.toLowerCase());
    // The same name in another case is the same name.
    expect((await add(name.toLowerCase())).status).toBe(409);
  });

  it.each([
    ['https://shop.example.com', '"domain" must be a host name without a scheme such as https://.'],
    ['HTTP://shop.example.com/', '"domain" must be a host name without a scheme such as https://.'],
    ['shop.example.com:8443', '"domain" must be a host name without a port.'],
    ['shop.example.com/path', '"domain" must be a host name without a path.'],
    ['shop.example.com?x=1', '"domain" must be a host name without a path.'],
    ['192.168.1.10', '"domain" must be a host name, not an IP address.'],
    ['::1', '"domain" must be a host name, not an IP address.'],
    ['2001:db8::1', '"domain" must be a host name, not an IP address.'],
    ['[2001:db8::1]', '"domain" must be a host name, not an IP address.'],
    ['*.example.com', '"domain" cannot be a wildcard; wildcard domains are not supported.'],
    ['shop.example.com.', '"domain" must not end with a dot.'],
    ['localhost', '"domain" must have at least two labels, such as example.com.'],
    [`${'a'.repeat(64)}.example.com`, '"domain" must not have a label longer than 63 characters.'],
    [`${'a.'.repeat(126)}com`, '"domain" must be at most 253 characters long.'],
    ['shop..example.com', '"domain" must not contain an empty label (a leading dot or two dots in a row).'],
    ['.example.com', '"domain" must not contain an empty label (a leading dot or two dots in a row).'],
    ['-shop.example.com', '"domain" must not have a label that starts or ends with a hyphen.'],
    ['shop-.example.com', '"domain" must not have a label that starts or ends with a hyphen.'],
    ['shop_1.example.com', '"domain" may contain only letters a-z, digits, hyphens and dots (write internationalized names in their xn-- form).'],
    ['shop example.com', '"domain" may contain only letters a-z, digits, hyphens and dots (write internationalized names in their xn-- form).'],
    ['bücher.example', '"domain" may contain only letters a-z, digits, hyphens and dots (write internationalized names in their xn-- form).'],
    ['\u212Aelvin.example.com', '"domain" may contain only letters a-z, digits, hyphens and dots (write internationalized names in their xn-- form).'],
    ['example.123', '"domain" must end in a top-level domain that is not all digits.'],
    ['1.2.3', '"domain" must end in a top-level domain that is not all digits.'],
    ['my-app.apps.test', '"domain" must not be under apps.test, which is reserved for the default domains of projects.'],
    ['A.B.APPS.TEST', '"domain" must not be under apps.test, which is reserved for the default domains of projects.'],
    ['apps.test', '"domain" must not be under apps.test, which is reserved for the default domains of projects.'],
    ['', '"domain" must not be empty.'],
    [42, '"domain" must be a string.'],
  ])('refuses %j with 400', async (domain, message) => {
    expect(await add(domain)).toMatchObject({ status: 400, body: { success: false, error: message } });
  });

  it('accepts names that only look close to the refused ones', async () => {
    for (const name of [fresh('xn--bcher-kva'), `a1.${fresh('b-c')}`, `${'a'.repeat(63)}.${fresh()}`, fresh('apps-test'), `${n.toString()}x.myapps.test`]) {
      const r = await add(name);
      expect(r.status, `${name}: ${r.text}`).toBe(201);
    }
  });

  it('rejects unknown fields and a missing domain', async () => {
    expect(await s.request('POST', base(w, p), { key: w.member.key, body: { domain: fresh(), verified: true } })).toMatchObject({
      status: 400,
      body: { error: 'Unknown field "verified".' },
    });
    expect(await s.request('POST', base(w, p), { key: w.member.key, body: {} })).toMatchObject({
      status: 400,
      body: { error: '"domain" is required.' },
    });
  });

  it('refuses a name verified in another workspace with 409, naming neither workspace nor project', async () => {
    const other = await makeWorkspace(s);
    const theirs = await makeProject(s, other);
    const name = fresh('taken');
    const claim = await add(name, other.owner.key, other, theirs);
    expect(claim.status).toBe(201);
    dns.setTxt(`_slipway-challenge.${name}`, [claim.body.data?.verification?.value ?? '']);
    const proven = await s.request<Domain>('POST', `${base(other, theirs)}/${claim.body.data?.id ?? ''}/verify`, { key: other.member.key });
    expect(proven.body.data?.verified).toBe(true);
    const r = await add(name);
    expect(r).toMatchObject({ status: 409, body: { success: false, error: `The domain "${name}" is already in use on this platform.` } });
    for (const secret of [other.slug, other.id, theirs.slug, theirs.id, theirs.name]) expect(r.text).not.toContain(secret);
    // The same project, too.
    expect((await add(name, other.owner.key, other, theirs)).status).toBe(409);
  });

  it('lets exactly one of many concurrent adds of one name to one project win', async () => {
    const name = fresh('race-one');
    const statuses = (await Promise.all([1, 2, 3, 4].map(() => add(name)))).map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409]);
    expect(await s.store.db.selectFrom('domains').selectAll().where('domain', '=', name).execute()).toHaveLength(1);
  });

  it('never lets a member of one workspace see or remove the domains of another', async () => {
    const b = await makeWorkspace(s);
    const bProject = await makeProject(s, b);
    const bDomain = (await add(fresh('b'), b.owner.key, b, bProject)).body.data?.id ?? '';
    const notFound = (what: string) => ({ status: 404, body: { success: false, error: `${what} was not found.` } });

    // B's slug with A's key: B does not exist for A.
    expect(await list(w.owner.key, b, bProject)).toMatchObject(notFound('Workspace'));
    expect(await add(fresh(), w.owner.key, b, bProject)).toMatchObject(notFound('Workspace'));
    expect(await remove(bDomain, w.owner.key, b, bProject)).toMatchObject(notFound('Workspace'));
    // A's slug with B's project slug: no such project in A.
    expect(await list(w.owner.key, w, bProject)).toMatchObject(notFound('Project'));
    expect(await remove(bDomain, w.owner.key, w, bProject)).toMatchObject(notFound('Project'));
    // A's own project with B's domain id.
    expect(await remove(bDomain, w.owner.key, w, p)).toMatchObject(notFound('Domain'));
    // Another project of the same workspace does not reach it either.
    const bSecond = await makeProject(s, b);
    expect(await remove(bDomain, b.owner.key, b, bSecond)).toMatchObject(notFound('Domain'));

    expect((await list(b.member.key, b, bProject)).body.data?.map((d) => d.id)).toEqual([bDomain]);
  });

  it('answers 404 for a project that does not exist', async () => {
    expect(await list(w.member.key, w, { slug: 'no-such-project' })).toMatchObject({ status: 404, body: { error: 'Project was not found.' } });
    expect(await add(fresh(), w.member.key, w, { slug: 'no-such-project' })).toMatchObject({ status: 404 });
  });

  it('validates the name before looking up the project', async () => {
    expect(await add('https://x.example.com', w.member.key, w, { slug: 'no-such-project' })).toMatchObject({ status: 400 });
  });
});

// With --domain-verification off every add is verified at once: a name is then unique outright.
describe.each(STORE_KINDS)('project domains, verification off, on %s', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  let p: TestProject;
  beforeAll(async () => {
    s = await startTestServer(kind, { platform: { appsDomain: 'apps.test', domains: { verification: 'off', dnsServers: [], publicAddresses: [], maxPerProject: 20 } } });
    w = await makeWorkspace(s);
    p = await makeProject(s, w);
  });
  afterAll(async () => s.close());
  const add = (domain: string, key = w.member.key, ws: { slug: string } = w, project: { slug: string } = p) =>
    s.request<Domain>('POST', `/api/workspaces/${ws.slug}/projects/${project.slug}/domains`, { key, body: { domain } });

  it('lets exactly one of many concurrent adds of one name win', async () => {
    const name = fresh('race');
    const others = await Promise.all([1, 2, 3].map(async () => {
      const ws = await makeWorkspace(s);
      return { ws, project: await makeProject(s, ws) };
    }));
    const attempts = [
      ...[1, 2, 3].map(() => add(name)),
      ...others.flatMap(({ ws, project }) => [add(name, ws.owner.key, ws, project), add(name.toUpperCase(), ws.member.key, ws, project)]),
    ];
    const statuses = (await Promise.all(attempts)).map((r) => r.status).sort();
    expect(statuses).toEqual([201, ...Array<number>(attempts.length - 1).fill(409)]);
    const rows = await s.store.db.selectFrom('domains').selectAll().where('domain', '=', name).execute();
    expect(rows).toHaveLength(1);
  });
});
