// Managed databases through the API, without an engine behind it: the records, the credentials,
// the statuses, validation and the errors. The servers themselves are tested against Docker in
// databases-engine.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseDetail, Database } from '../../src/modules/databases/databases.schema.js';
import { makeProject, makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { STORE_KINDS } from '../factories/stores.js';

describe.each(STORE_KINDS)('databases API (%s)', (kind) => {
  let s: TestServer;
  let w: TestWorkspace;
  const base = () => `/api/workspaces/${w.slug}/databases`;

  beforeAll(async () => {
    s = await startTestServer(kind);
    w = await makeWorkspace(s);
  });
  afterAll(async () => s.close());

  const create = (body: unknown, key = w.member.key) => s.request<Database>('POST', base(), { key, body });

  it('answers 202 at once with the record and its credentials, status provisioning, for each of the four types', async () => {
    const expected = {
      postgresql: { port: 5432, username: 'slipway', url: (pw: string) => `postgresql://slipway:${pw}@orders.db:5432/orders` },
      mysql: { port: 3306, username: 'slipway', url: (pw: string) => `mysql://slipway:${pw}@shop-mysql.db:3306/shop-mysql` },
      redis: { port: 6379, username: 'default', url: (pw: string) => `redis://default:${pw}@cache.db:6379/0` },
      mongo: { port: 27017, username: 'slipway', url: (pw: string) => `mongodb://slipway:${pw}@docs.db:27017/docs?authSource=admin` },
    } as const;
    const names = { postgresql: 'Orders', mysql: 'Shop MySQL', redis: 'cache', mongo: 'docs' } as const;
    for (const type of ['postgresql', 'mysql', 'redis', 'mongo'] as const) {
      const r = await create({ name: names[type], type });
      expect(r.status, r.text).toBe(202);
      const d = r.body.data;
      if (d === undefined) throw new Error('no record');
      expect(d.password).toMatch(/^[A-Za-z0-9]{32}$/);
      expect(d).toMatchObject({ name: names[type], type, status: 'provisioning', error: null, port: expected[type].port, username: expected[type].username, database_name: d.slug, host: `${d.slug}.db` });
      expect(d.connection_string).toBe(expected[type].url(d.password));
      expect(d.external_host).toBeNull();
    }
  });

  it('never shows the password again: masked in the list and on GET, and sealed in the store', async () => {
    const made = await create({ name: 'secretive', type: 'postgresql' });
    const password = made.body.data?.password ?? '';
    const list = await s.request<Database[]>('GET', base(), { key: w.member.key });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(password);
    const one = list.body.data?.find((d) => d.slug === 'secretive');
    expect(one?.password).toBe('********');
    expect(one?.connection_string).toBe('postgresql://slipway:********@secretive.db:5432/secretive');
    const got = await s.request<DatabaseDetail>('GET', `${base()}/secretive`, { key: w.owner.key });
    expect(got.status).toBe(200);
    expect(got.text).not.toContain(password);
    expect(got.body.data?.events.map((e) => e.message)).toEqual(['Created; a postgresql server is being provisioned.']);
    const row = await s.store.db.selectFrom('databases').select('password').where('slug', '=', 'secretive').executeTakeFirstOrThrow();
    expect(row.password).not.toContain(password);
    // two databases never share a password
    const other = await create({ name: 'secretive two', type: 'postgresql' });
    expect(other.body.data?.password).not.toBe(password);
  });

  it('refuses a taken name (409), an unknown type (400 listing the four) and bad bodies (400)', async () => {
    expect((await create({ name: 'dup', type: 'redis' })).status).toBe(202);
    const taken = await create({ name: 'DUP', type: 'postgresql' });
    expect(taken.status).toBe(409);
    expect(taken.body.error).toBe('A database with the slug "dup" already exists in this workspace.');
    const unknown = await create({ name: 'x', type: 'oracle' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ success: false, error: '"type" must be one of postgresql, mysql, redis, mongo.' });
    for (const body of [{ name: '!!!', type: 'redis' }, { type: 'redis' }, { name: 'n' }, { name: '', type: 'redis' }, { name: 'n', type: 'redis', extra: 1 }, { name: 5, type: 'redis' }, 'text']) {
      const r = await create(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.success).toBe(false);
    }
    expect((await s.request('GET', `${base()}/nope`, { key: w.member.key })).status).toBe(404);
    expect((await s.request('DELETE', `${base()}/nope`, { key: w.member.key })).status).toBe(404);
  });

  it('answers 402 when the wallet is empty, and creates nothing', async () => {
    const poor = await makeWorkspace(s);
    await s.store.db.updateTable('wallets').set({ balance_micros: 0 }).where('workspace_id', '=', poor.id).execute();
    const r = await s.request('POST', `/api/workspaces/${poor.slug}/databases`, { key: poor.owner.key, body: { name: 'db', type: 'redis' } });
    expect(r.status).toBe(402);
    expect((await s.request<Database[]>('GET', `/api/workspaces/${poor.slug}/databases`, { key: poor.owner.key })).body.data).toEqual([]);
  });

  it('wires an app to a database through reference variables, resolved at deploy time; a reference to a database that does not exist is refused', async () => {
    const made = await create({ name: 'app data', type: 'postgresql' });
    const password = made.body.data?.password ?? '';
    const p = await makeProject(s, w);
    const env = `/api/workspaces/${w.slug}/projects/${p.slug}/env`;
    const add = (key: string, value: string, secret = false) => s.request('POST', env, { key: w.member.key, body: { key, value, is_secret: secret } });
    expect((await add('DATABASE_URL', '${{databases.app-data.connection_string}}')).status).toBe(201);
    expect((await add('DB_PASSWORD', '${{ databases.app-data.password }}', true)).status).toBe(201);
    expect((await add('DB_HOSTPORT', '${{databases.app-data.host}}:${{databases.app-data.port}}/${{databases.app-data.database_name}} as ${{databases.app-data.username}}')).status).toBe(201);
    const resolved = await s.services.envVars.resolvedFor(p.id);
    expect(resolved).toMatchObject({
      DATABASE_URL: `postgresql://slipway:${password}@app-data.db:5432/app-data`,
      DB_PASSWORD: password,
      DB_HOSTPORT: 'app-data.db:5432/app-data as slipway',
    });
    // the variable keeps the reference, not the secret
    const listed = await s.request('GET', env, { key: w.member.key });
    expect(listed.text).not.toContain(password);
    expect(listed.text).toContain('${{databases.app-data.connection_string}}');

    const missing = await add('OTHER_URL', '${{databases.nowhere.connection_string}}');
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('The variable "OTHER_URL" references the database "nowhere", which does not exist in this workspace.');
    const badField = await add('OTHER_URL', '${{databases.app-data.secret}}');
    expect(badField.status).toBe(400);
    expect(badField.body.error).toBe('The variable "OTHER_URL" references "${{databases.app-data.secret}}": a database reference ends in one of connection_string, host, port, username, password, database_name, key_prefix.');
    const bulk = await s.request('PUT', `${env}/bulk`, { key: w.member.key, body: { variables: { A: '${{databases.ghost.host}}' } } });
    expect(bulk.status).toBe(400);
    expect(bulk.body.error).toBe('"variables.A" references the database "ghost", which does not exist in this workspace.');
    // another workspace's database of the same name is not ours
    const other = await makeWorkspace(s);
    await s.request('POST', `/api/workspaces/${other.slug}/databases`, { key: other.owner.key, body: { name: 'theirs', type: 'redis' } });
    expect((await add('THEIRS', '${{databases.theirs.password}}')).status).toBe(400);

    // a deploy that finds the database gone fails with a clear error
    await s.request('DELETE', `${base()}/app-data`, { key: w.member.key });
    await expect(s.services.envVars.resolvedFor(p.id)).rejects.toThrow('The variable "DATABASE_URL" references the database "app-data", which does not exist in this workspace. No container was started with it.');
  });

  it('on a shared server (--database-shared-<type>): names of its own there, the server\'s address, a key prefix for Redis, resolved by references too', async () => {
    const shared = await startTestServer(kind, { platform: { databases: { shared: { redis: 'redis://admin:pw@cache.internal:6380', postgresql: 'postgresql://admin@pg.internal/postgres' } } } });
    try {
      const sw = await makeWorkspace(shared);
      const r = await shared.request<Database>('POST', `/api/workspaces/${sw.slug}/databases`, { key: sw.member.key, body: { name: 'Sessions', type: 'redis' } });
      expect(r.status, r.text).toBe(202);
      const d = r.body.data;
      if (d === undefined) throw new Error('no record');
      expect(d).toMatchObject({ provisioner: 'shared', status: 'provisioning', host: 'cache.internal', port: 6380, external_host: 'cache.internal', external_port: 6380, image: null, memory_mb: 0 });
      expect(d.username).toMatch(/^sw[0-9a-f]{6}_sessions_[a-z0-9]{8}$/);
      expect(d.key_prefix).toBe(`${d.username}:`);
      expect(d.connection_string).toBe(`redis://${d.username}:${d.password}@cache.internal:6380/0`);
      // the operator's administrative credentials are never shown
      expect(r.text).not.toContain('admin');
      const pgDb = (await shared.request<Database>('POST', `/api/workspaces/${sw.slug}/databases`, { key: sw.member.key, body: { name: 'Sessions', type: 'postgresql' } })).body;
      expect(pgDb.error).toBe('A database with the slug "sessions" already exists in this workspace.');
      const main = (await shared.request<Database>('POST', `/api/workspaces/${sw.slug}/databases`, { key: sw.member.key, body: { name: 'main', type: 'postgresql' } })).body.data;
      expect(main).toMatchObject({ provisioner: 'shared', host: 'pg.internal', port: 5432, key_prefix: null });
      expect(main?.connection_string).toBe(`postgresql://${main?.username ?? ''}:${main?.password ?? ''}@pg.internal:5432/${main?.username ?? ''}`);
      // other types still get a container each
      const mysqlDb = (await shared.request<Database>('POST', `/api/workspaces/${sw.slug}/databases`, { key: sw.member.key, body: { name: 'shop', type: 'mysql' } })).body.data;
      expect(mysqlDb).toMatchObject({ provisioner: 'container', host: 'shop.db', username: 'slipway', key_prefix: null });

      const p = await makeProject(shared, sw);
      const env = `/api/workspaces/${sw.slug}/projects/${p.slug}/env`;
      expect((await shared.request('POST', env, { key: sw.member.key, body: { key: 'PREFIX', value: '${{databases.sessions.key_prefix}}' } })).status).toBe(201);
      expect((await shared.request('POST', env, { key: sw.member.key, body: { key: 'NO_PREFIX', value: '[${{databases.main.key_prefix}}]' } })).status).toBe(201);
      expect(await shared.services.envVars.resolvedFor(p.id)).toMatchObject({ PREFIX: `${d.username}:`, NO_PREFIX: '[]' });
    } finally {
      await shared.close();
    }
  });

  it('marks a deleted database deleting (202) until the leader has removed its server; a workspace takes its databases with it', async () => {
    await create({ name: 'doomed', type: 'mysql' });
    const del = await s.request<Database>('DELETE', `${base()}/doomed`, { key: w.member.key });
    expect(del.status).toBe(202);
    expect(del.body.data?.status).toBe('deleting');
    expect(del.body.data?.password).toBe('********');
    const again = await s.request<Database>('DELETE', `${base()}/doomed`, { key: w.member.key });
    expect(again.status).toBe(202);
    const got = await s.request<DatabaseDetail>('GET', `${base()}/doomed`, { key: w.member.key });
    expect(got.body.data?.status).toBe('deleting');
    expect(got.body.data?.events.at(-1)?.message).toBe('Deleting: its server and its data are being removed.');

    const gone = await makeWorkspace(s);
    await s.request('POST', `/api/workspaces/${gone.slug}/databases`, { key: gone.owner.key, body: { name: 'db', type: 'redis' } });
    expect((await s.request('DELETE', `/api/workspaces/${gone.slug}`, { key: gone.owner.key })).status).toBe(200);
    expect(await s.store.db.selectFrom('databases').select('id').where('workspace_id', '=', gone.id).execute()).toEqual([]);
  });
});
