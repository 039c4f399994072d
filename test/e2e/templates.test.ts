// Templates through the API, without an engine: the catalog, instances and their variables
// (generated values, the address, the database wiring), the errors, env/domains/deployments
// under /templates, and what deleting takes with it. The real deploys are in
// templates-engine.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/modules/databases/databases.schema.js';
import type { EnvVar } from '../../src/modules/env/env.schema.js';
import type { Deployment } from '../../src/modules/deployments/deployments.schema.js';
import type { CatalogView } from '../../src/modules/templates/catalog.js';
import type { TemplateInstance } from '../../src/modules/templates/templates.schema.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

describe.each(STORE_KINDS)('templates API (%s)', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  const base = () => `/api/workspaces/${w.slug}/templates`;
  const create = (body: unknown, key = w.member.key) => s.request<TemplateInstance>('POST', base(), { key, body });

  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  it('answers the catalog at the fixed path, to any caller with a key, with the spec\'s fields as strings', async () => {
    const r = await s.request<CatalogView[]>('GET', '/api/workspaces/available-templates', { key: w.member.key });
    expect(r.status).toBe(200);
    const hello = r.body.data?.find((e) => e.key === 'hello-template');
    expect(hello).toEqual({
      name: 'Hello Template',
      key: 'hello-template',
      description: expect.any(String) as string,
      source: 'https://github.com/acme/tpl-hello',
      default_port: '8080',
      default_cpu: '0.25',
      default_ram: '0.125',
      required_envs: [{ key: 'GREETING', placeholder: 'Hello' }],
      image: 'slipway-test/tpl-hello:1.0',
      category: 'test',
      website: 'https://example.com/hello',
      version: '1.0',
      databases: [],
      optional_envs: [{ key: 'COLOR', placeholder: 'blue' }],
    });
    // the shipped entries too; the preset variables (and their generators) are not shown
    expect(r.body.data?.some((e) => e.key === 'uptime-kuma')).toBe(true);
    expect(r.text).not.toContain('${hex');
    expect((await s.request('GET', '/api/workspaces/available-templates')).status).toBe(401);
    // never taken for a workspace named so
    expect((await s.request('POST', '/api/workspaces', { key: w.owner.key, body: { name: 'x', slug: 'available-templates' } })).status).toBe(400);
  });

  it('makes an instance with its variables filled once: generated secrets of the right form, the address and the rest kept for each deploy', async () => {
    const r = await create({ name: 'My Site', template_name: 'hello-template' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data).toEqual({
      id: expect.any(String) as string,
      name: 'My Site',
      slug: 'my-site',
      template_name: 'hello-template',
      status: 'pending',
      port: 8080,
      cpu: '0.25',
      ram: '0.125',
      replicas: 1,
      url: `http://my-site-${w.slug}.apps.test:8000`,
      default_domain: `my-site-${w.slug}.apps.test`,
      databases: [],
      generated_envs: { TOKEN_HEX: expect.stringMatching(/^[0-9a-f]{32}$/) as string, TOKEN_B64: expect.any(String) as string, ADMIN_PASSWORD: expect.stringMatching(/^[A-Za-z0-9]{24}$/) as string, INSTANCE_UUID: expect.any(String) as string },
      created_at: expect.any(String) as string,
      updated_at: expect.any(String) as string,
    });
    const generated = (r.body.data as unknown as { generated_envs: Record<string, string> }).generated_envs;
    const env = await s.request<EnvVar[]>('GET', `${base()}/my-site/envs`, { key: w.member.key });
    // shown in the create response only
    expect(env.text).not.toContain(generated['ADMIN_PASSWORD'] ?? 'none');
    expect((await s.request('GET', `${base()}/my-site`, { key: w.member.key })).text).not.toContain(generated['ADMIN_PASSWORD'] ?? 'none');
    expect(env.status).toBe(200);
    const byKey = new Map((env.body.data ?? []).map((v) => [v.key, v]));
    // generated: secrets, never shown
    for (const k of ['TOKEN_HEX', 'TOKEN_B64', 'ADMIN_PASSWORD', 'INSTANCE_UUID']) expect(byKey.get(k)).toMatchObject({ is_secret: true, value: '' });
    expect(byKey.get('SITE_URL')).toMatchObject({ is_secret: false, value: '${url}' });
    const project = await s.store.repos.projects.inWorkspace(w.id, 'my-site');
    const resolved = await s.services.envVars.resolvedFor(project?.id ?? '');
    expect(resolved['TOKEN_HEX']).toMatch(/^[0-9a-f]{32}$/);
    expect(Buffer.from(resolved['TOKEN_B64'] ?? '', 'base64')).toHaveLength(32);
    expect(Buffer.from(resolved['TOKEN_B64'] ?? '', 'base64').toString('base64')).toBe(resolved['TOKEN_B64']);
    expect(resolved['ADMIN_PASSWORD']).toMatch(/^[A-Za-z0-9]{24}$/);
    expect(resolved['INSTANCE_UUID']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(resolved['SITE_URL']).toBe(`http://my-site-${w.slug}.apps.test:8000`);
    expect(resolved['ADMIN_PASSWORD']).toBe(generated['ADMIN_PASSWORD']);
    expect(resolved['SITE_DOMAIN']).toBe(`my-site-${w.slug}.apps.test`);
    // filled once: the same at the next deploy, and another instance gets its own
    expect(await s.services.envVars.resolvedFor(project?.id ?? '')).toEqual(resolved);
    await create({ name: 'Other Site', template_name: 'hello-template' });
    const other = await s.store.repos.projects.inWorkspace(w.id, 'other-site');
    expect((await s.services.envVars.resolvedFor(other?.id ?? ''))['TOKEN_HEX']).not.toBe(resolved['TOKEN_HEX']);
    // a verified custom domain becomes its address
    const d = await s.request<{ id: string }>('POST', `${base()}/my-site/domains`, { key: w.member.key, body: { domain: 'site.example.com' } });
    expect(d.status, d.text).toBe(201);
    await s.store.db.updateTable('domains').set({ verified: 1 }).where('domain', '=', 'site.example.com').execute();
    expect(await s.services.envVars.resolvedFor(project?.id ?? '')).toMatchObject({ SITE_URL: 'http://site.example.com:8000', SITE_DOMAIN: 'site.example.com' });
  });

  it('refuses an unknown template naming near keys (400), a taken name (409), and a bad body (400)', async () => {
    const unknown = await create({ name: 'x', template_name: 'hello-templat' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toBe('"template_name" "hello-templat" is not in the catalog; did you mean "hello-template"? (GET /api/workspaces/available-templates lists them).');
    const far = await create({ name: 'x', template_name: 'zzzzzzzzzzzzzzzz' });
    expect(far.body.error).toBe('"template_name" "zzzzzzzzzzzzzzzz" is not in the catalog (GET /api/workspaces/available-templates lists them).');
    await create({ name: 'taken', template_name: 'hello-template' });
    const taken = await create({ name: 'Taken', template_name: 'hello-template' });
    expect(taken.status).toBe(409);
    expect(taken.body.error).toBe('A template instance with slug "taken" already exists in this workspace.');
    // projects and instances share the slugs (and so the host names)
    const project = await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'taken' } });
    expect(project.status).toBe(409);
    expect((await create({ name: 'x' })).status).toBe(400);
    expect((await create({ name: 'x', template_name: 'hello-template', extra: 1 })).status).toBe(400);
    // nothing half-made
    expect((await s.request<TemplateInstance[]>('GET', base(), { key: w.member.key })).body.data?.map((i) => i.slug)).not.toContain('x');
  });

  it('keeps instances and projects apart: each route family sees only its own kind', async () => {
    await create({ name: 'apart', template_name: 'hello-template' });
    await s.request('POST', `/api/workspaces/${w.slug}/projects`, { key: w.member.key, body: { name: 'plain project' } });
    const projects = await s.request<{ slug: string }[]>('GET', `/api/workspaces/${w.slug}/projects`, { key: w.member.key });
    expect(projects.body.data?.map((p) => p.slug)).toContain('plain-project');
    expect(projects.body.data?.map((p) => p.slug)).not.toContain('apart');
    expect((await s.request('GET', `/api/workspaces/${w.slug}/projects/apart`, { key: w.member.key })).status).toBe(404);
    expect((await s.request('GET', `/api/workspaces/${w.slug}/projects/apart/env`, { key: w.member.key })).status).toBe(404);
    const missing = await s.request('GET', `${base()}/plain-project`, { key: w.member.key });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('Template instance was not found.');
    const instances = await s.request<TemplateInstance[]>('GET', base(), { key: w.member.key });
    expect(instances.body.data?.map((i) => i.slug)).toContain('apart');
    expect(instances.body.data?.map((i) => i.slug)).not.toContain('plain-project');
  });

  it('sets, lists and removes variables; a deploy without a required one is refused naming it', async () => {
    await create({ name: 'needs env', template_name: 'hello-template' });
    const one = `${base()}/needs-env`;
    const refused = await s.request('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'image' } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('Set the required variable "GREETING" (POST …/envs) before deploying.');
    const set = await s.request<EnvVar[]>('POST', `${one}/envs`, { key: w.member.key, body: [{ key: 'GREETING', value: 'Hi' }, { key: 'API_KEY', value: 's3cret', is_secret: true }] });
    expect(set.status, set.text).toBe(200);
    expect(set.body.data?.find((v) => v.key === 'GREETING')).toMatchObject({ value: 'Hi', is_secret: false });
    expect(set.body.data?.find((v) => v.key === 'API_KEY')).toMatchObject({ value: '', is_secret: true });
    expect(set.text).not.toContain('s3cret');
    // replaced, keeping its secrecy
    const again = await s.request<EnvVar[]>('POST', `${one}/envs`, { key: w.member.key, body: [{ key: 'API_KEY', value: 'other' }] });
    expect(again.body.data?.find((v) => v.key === 'API_KEY')).toMatchObject({ is_secret: true });
    expect((await s.request('POST', `${one}/envs`, { key: w.member.key, body: [{ key: 'bad key', value: 'x' }] })).status).toBe(400);
    expect((await s.request('POST', `${one}/envs`, { key: w.member.key, body: [{ key: 'A', value: '1' }, { key: 'A', value: '2' }] })).body.error).toBe('The variable "A" is given twice.');
    const queued = await s.request<Deployment>('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'image' } });
    expect(queued.status, queued.text).toBe(202);
    expect(queued.body.data).toMatchObject({ status: 'queued', source: 'template', image: 'slipway-test/tpl-hello:1.0' });
    const list = await s.request<{ deployments: Deployment[]; total: number }>('GET', `${one}/deployments?page=1&limit=5`, { key: w.member.key });
    expect(list.body.data?.total).toBe(1);
    expect((await s.request('GET', `${one}/deployments/${queued.body.data?.id ?? ''}`, { key: w.member.key })).status).toBe(200);
    // removing a required variable makes the next deploy refused again
    const removed = await s.request<EnvVar>('DELETE', `${one}/envs/GREETING`, { key: w.member.key });
    expect(removed.status).toBe(200);
    expect((await s.request('DELETE', `${one}/envs/GREETING`, { key: w.member.key })).status).toBe(404);
    expect((await s.request('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'image' } })).status).toBe(400);
    expect((await s.request('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'docker' } })).status).toBe(400);
    // build mode connects the instance to the template's source and queues a build
    await s.request('POST', `${one}/envs`, { key: w.member.key, body: [{ key: 'GREETING', value: 'Hi' }] });
    const built = await s.request<Deployment>('POST', `${one}/deploy`, { key: w.member.key, body: { mode: 'build' } });
    expect(built.status, built.text).toBe(202);
    expect(built.body.data).toMatchObject({ status: 'queued', source: 'git', branch: 'main', image: null });
    const git = await s.store.repos.gitConnections.of((await s.store.repos.projects.inWorkspace(w.id, 'needs-env'))?.id ?? '');
    expect(git).toMatchObject({ repo_full_name: 'acme/tpl-hello', branch: 'main', auto_deploy: 0 });
    // nothing runs: stop says so
    const stop = await s.request('POST', `${one}/stop`, { key: w.member.key });
    expect(stop.status).toBe(409);
  });

  it('updates name, port and sizes; refuses what a project refuses', async () => {
    await create({ name: 'resize me', template_name: 'hello-template' });
    const r = await s.request<TemplateInstance>('PUT', `${base()}/resize-me`, { key: w.member.key, body: { name: 'Resized', port: 9090, cpu: '1', ram: '0.5', replicas: 2 } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toMatchObject({ name: 'Resized', slug: 'resize-me', port: 9090, cpu: '1', ram: '0.5', replicas: 2 });
    expect((await s.request('PUT', `${base()}/resize-me`, { key: w.member.key, body: { cpu: '99' } })).status).toBe(400);
    expect((await s.request('PUT', `${base()}/resize-me`, { key: w.member.key, body: {} })).status).toBe(400);
  });

  it('provisions the database a template declares, named after the instance and wired by reference; deleting the instance deletes it', async () => {
    const r = await create({ name: 'Counter', template_name: 'hello-postgres' });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data?.databases).toEqual(['counter']);
    const dbs = await s.request<Database[]>('GET', `/api/workspaces/${w.slug}/databases`, { key: w.member.key });
    const db = dbs.body.data?.find((d) => d.slug === 'counter');
    expect(db).toMatchObject({ name: 'Counter', type: 'postgresql', status: 'provisioning' });
    const env = await s.request<EnvVar[]>('GET', `${base()}/counter/envs`, { key: w.member.key });
    expect(env.body.data?.find((v) => v.key === 'DATABASE_URL')).toMatchObject({ value: '${{databases.counter.connection_string}}', is_secret: false });
    const project = await s.store.repos.projects.inWorkspace(w.id, 'counter');
    const resolved = await s.services.envVars.resolvedFor(project?.id ?? '');
    expect(resolved['DATABASE_URL']).toMatch(/^postgresql:\/\/slipway:[A-Za-z0-9]{32}@counter\.db:5432\/counter$/);
    expect(resolved['DB_HOST']).toBe('counter.db');
    // a database of that name already there: 409, and nothing is left of the attempt
    await s.request('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: 'clash', type: 'redis' } });
    const clash = await create({ name: 'clash', template_name: 'hello-postgres' });
    expect(clash.status).toBe(409);
    expect(clash.body.error).toBe('A database with the slug "clash" already exists in this workspace.');
    expect((await s.request('GET', `${base()}/clash`, { key: w.member.key })).status).toBe(404);

    const del = await s.request<TemplateInstance>('DELETE', `${base()}/counter`, { key: w.member.key });
    expect(del.status).toBe(200);
    expect((await s.request('GET', `${base()}/counter`, { key: w.member.key })).status).toBe(404);
    const after = await s.request<Database>('GET', `/api/workspaces/${w.slug}/databases/counter`, { key: w.member.key });
    expect(after.body.data?.status).toBe('deleting');
  });

  it('answers 402 for a template with a database when the wallet is empty, and for a deploy', async () => {
    const poor = await makeWorkspace(s);
    await s.request('POST', `/api/workspaces/${poor.slug}/templates`, { key: poor.owner.key, body: { name: 'cheap', template_name: 'hello-template' } });
    await s.request('POST', `/api/workspaces/${poor.slug}/templates/cheap/envs`, { key: poor.owner.key, body: [{ key: 'GREETING', value: 'x' }] });
    await s.store.db.updateTable('wallets').set({ balance_micros: 0 }).where('workspace_id', '=', poor.id).execute();
    expect((await s.request('POST', `/api/workspaces/${poor.slug}/templates`, { key: poor.owner.key, body: { name: 'db', template_name: 'hello-postgres' } })).status).toBe(402);
    expect((await s.request('POST', `/api/workspaces/${poor.slug}/templates/cheap/deploy`, { key: poor.owner.key, body: { mode: 'image' } })).status).toBe(402);
  });
});
