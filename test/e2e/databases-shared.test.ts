// The `shared` provisioner against the real PostgreSQL, MariaDB and Redis servers on loopback
// (scripts/ensure-postgres.sh, scripts/ensure-shared-servers.sh): through the API, two
// workspaces each get a database of the same name on the same server; each reads and writes its
// own with the official client and exactly the returned credentials, and cannot reach the
// other's; deleting one drops only its own; deleting a workspace drops its databases there too.
// No Docker: the servers are the operator's.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseDetail, Database } from '../../src/modules/databases/databases.schema.js';
import { sharedPrefix, sharedServer } from '../../src/modules/databases/shared.js';
import type { DatabaseWorker } from '../../src/modules/databases/databases.worker.js';
import { instanceId } from '../../src/store/db.js';
import { startDatabaseWorker } from '../factories/databases.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { pgAdminUrl } from '../factories/stores.js';

const MYSQL_URL = process.env['SLIPWAY_TEST_MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306';
const REDIS_URL = process.env['SLIPWAY_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const SHARED = { postgresql: pgAdminUrl(), mysql: MYSQL_URL, redis: REDIS_URL } as const;
type Kind = keyof typeof SHARED;

/** Runs `fn` with a connection of the official client of `type`, logged in with `url` (and, for Redis, the record's key prefix). */
async function withClient<T>(type: Kind, url: string, fn: (q: (sql: string, ...args: string[]) => Promise<unknown>) => Promise<T>): Promise<T> {
  switch (type) {
    case 'postgresql': {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000, query_timeout: 10_000 });
      c.on('error', () => undefined);
      await c.connect();
      try {
        return await fn(async (sql, ...args) => (await c.query(sql, args)).rows as unknown);
      } finally {
        await c.end().catch(() => undefined);
      }
    }
    case 'mysql': {
      const c = await mysql.createConnection({ uri: url, connectTimeout: 10_000 });
      c.on('error', () => undefined);
      try {
        return await fn(async (sql, ...args) => (await c.query(sql, args))[0]);
      } finally {
        await c.end().catch(() => undefined);
      }
    }
    case 'redis': {
      const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      // a refused AUTH arrives as an 'error' event; connect() then only says the connection closed
      let refused: unknown = null;
      c.on('error', (err) => { refused ??= err; });
      await c.connect().catch((err: unknown) => { throw refused ?? err; });
      try {
        return await fn((cmd, ...args) => c.call(cmd, ...args));
      } finally {
        c.disconnect();
      }
    }
  }
}

/** Writes `value` into its own database (Redis: under its key prefix) and reads it back on another connection. */
async function writeAndRead(type: Kind, d: Database, password: string, value: string): Promise<string> {
  const url = (d.external_connection_string ?? '').replace('********', password);
  if (type === 'redis') {
    await withClient(type, url, (q) => q('SET', `${d.key_prefix ?? ''}note`, value));
    return String(await withClient(type, url, (q) => q('GET', `${d.key_prefix ?? ''}note`)));
  }
  await withClient(type, url, async (q) => {
    await q('create table notes (v varchar(200))');
    await q(type === 'postgresql' ? 'insert into notes (v) values ($1)' : 'insert into notes (v) values (?)', value);
  });
  const rows = (await withClient(type, url, (q) => q('select v from notes'))) as { v: string }[];
  return rows.map((r) => r.v).join(',');
}

describe('databases on shared servers (PostgreSQL, MariaDB, Redis on loopback)', () => {
  let s: TestServer;
  let a: TestWorkspace;
  let b: TestWorkspace;
  let worker: DatabaseWorker;
  let prefix: string;

  beforeAll(async () => {
    s = await startTestServer('sqlite', { platform: { databases: { shared: SHARED, readyTimeoutMs: 30_000 } } });
    a = await makeWorkspace(s);
    b = await makeWorkspace(s);
    prefix = sharedPrefix(await instanceId(s.store));
    worker = await startDatabaseWorker(s, { reconcileEveryMs: 500 });
  });
  afterAll(async () => {
    s.leader.databases.clear();
    await worker.stop();
    // whatever a failed case left on the servers goes: this server's prefix is its own
    for (const [type, url] of Object.entries(SHARED) as [Kind, string][]) {
      const server = sharedServer(type, url);
      for (const name of await server.tenants(prefix)) await server.drop(name);
    }
    await s.close();
  });

  async function settled(w: TestWorkspace, slug: string, until: (d: DatabaseDetail | undefined, status: number) => boolean = (d) => d?.status !== 'provisioning'): Promise<{ status: number; d: DatabaseDetail | undefined }> {
    const end = Date.now() + 60_000;
    for (;;) {
      const r = await s.request<DatabaseDetail>('GET', `/api/workspaces/${w.slug}/databases/${slug}`, { key: w.member.key });
      if (until(r.body.data, r.status)) return { status: r.status, d: r.body.data };
      if (Date.now() > end) throw new Error(`${slug} did not settle: ${r.text}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  const gone = (w: TestWorkspace, slug: string) => settled(w, slug, (_d, status) => status === 404);

  describe.each(Object.keys(SHARED) as Kind[])('%s', (type) => {
    it('gives two workspaces databases of the same name that each use alone; deleting one drops only its own', async () => {
      const server = sharedServer(type, SHARED[type]);
      const made = [];
      for (const w of [a, b]) {
        const r = await s.request<Database>('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: `Main ${type}`, type } });
        expect(r.status, r.text).toBe(202);
        const d = r.body.data;
        if (d === undefined) throw new Error('no record');
        made.push({ w, d, password: d.password });
      }
      const [mine, theirs] = made as [(typeof made)[number], (typeof made)[number]];
      // same slug in both workspaces; names of their own on the server, under this installation's prefix
      expect(mine.d.slug).toBe(theirs.d.slug);
      for (const { d } of made) {
        expect(d).toMatchObject({ provisioner: 'shared', status: 'provisioning', host: server.host, port: server.port, external_host: server.host, external_port: server.port, image: null, memory_mb: 0 });
        expect(d.username).toMatch(new RegExp(`^${prefix}${`main_${type}`.slice(0, 13)}_[a-z0-9]{8}$`));
        expect(d.database_name).toBe(d.username);
        expect(d.key_prefix).toBe(type === 'redis' ? `${d.username}:` : null);
      }
      expect(mine.d.username).not.toBe(theirs.d.username);

      for (const m of made) {
        const { d } = await settled(m.w, m.d.slug);
        expect(d?.status, d?.error ?? '').toBe('running');
        expect(d?.health).toBeNull();
        expect(d?.events.map((e) => e.message)).toEqual([
          `Created; a ${type} server is being provisioned.`,
          `Creating its user and database on the shared ${type} server at ${server.host}:${String(server.port)}.`,
          expect.stringMatching(new RegExp(`^Running: a login as ${m.d.username} succeeded after [0-9.]+ s\\.$`)),
        ]);
        // exactly the returned connection string, with the official client
        expect(await writeAndRead(type, m.d, m.password, `kept by ${m.w.slug}`)).toBe(`kept by ${m.w.slug}`);
      }

      // their credentials do not reach my data
      const theirUrl = (theirs.d.external_connection_string ?? '').replace('********', theirs.password);
      switch (type) {
        case 'postgresql': {
          const intoMine = theirUrl.replace(new RegExp(`/${theirs.d.database_name}$`), `/${mine.d.database_name}`);
          await expect(withClient(type, intoMine, (q) => q('select 1'))).rejects.toThrow(/permission denied for database/);
          // (the loopback server trusts every local login, so no wrong-password case here; the container tests have it)
          break;
        }
        case 'mysql': {
          await expect(withClient(type, theirUrl, (q) => q(`select v from \`${mine.d.database_name}\`.notes`))).rejects.toThrow(/command denied|Access denied/);
          const wrong = (mine.d.external_connection_string ?? '').replace(mine.password, 'not-the-password');
          await expect(withClient(type, wrong, (q) => q('select 1'))).rejects.toThrow(/Access denied/);
          break;
        }
        case 'redis': {
          await withClient(type, theirUrl, async (q) => {
            await expect(q('GET', `${mine.d.key_prefix ?? ''}note`)).rejects.toThrow(/NOPERM/);
            // nor may it list, count, pick or flush what others keep
            for (const cmd of [['KEYS', '*'], ['SCAN', '0'], ['RANDOMKEY'], ['DBSIZE'], ['FLUSHALL'], ['SELECT', '1'], ['CONFIG', 'GET', '*'], ['ACL', 'LIST']]) {
              await expect(q(cmd[0] ?? '', ...cmd.slice(1)), cmd.join(' ')).rejects.toThrow(/NOPERM/);
            }
          });
          const wrong = (mine.d.external_connection_string ?? '').replace(mine.password, 'not-the-password');
          await expect(withClient(type, wrong, (q) => q('PING'))).rejects.toThrow(/WRONGPASS/);
          break;
        }
      }

      // deleting mine drops my database and user there, and nothing of theirs
      const del = await s.request<Database>('DELETE', `/api/workspaces/${mine.w.slug}/databases/${mine.d.slug}`, { key: mine.w.admin.key });
      expect(del.status).toBe(202);
      expect(del.body.data?.status).toBe('deleting');
      await gone(mine.w, mine.d.slug);
      const left = await server.tenants(prefix);
      expect(left.has(mine.d.username)).toBe(false);
      expect(left.has(theirs.d.username)).toBe(true);
      const myUrl = (mine.d.external_connection_string ?? '').replace('********', mine.password);
      if (type === 'redis') {
        await expect(withClient(type, myUrl, (q) => q('PING'))).rejects.toThrow(/WRONGPASS/);
        // its keys went with it
        const admin = new Redis(SHARED.redis, { lazyConnect: true });
        await admin.connect();
        try {
          expect(await admin.exists(`${mine.d.key_prefix ?? ''}note`)).toBe(0);
          expect(await admin.get(`${theirs.d.key_prefix ?? ''}note`)).toBe(`kept by ${theirs.w.slug}`);
        } finally {
          admin.disconnect();
        }
      } else {
        await expect(withClient(type, myUrl, (q) => q('select 1'))).rejects.toThrow(type === 'postgresql' ? /does not exist/ : /Access denied/);
      }
      expect(await writeAndRead(type, theirs.d, theirs.password, 'still here').catch((err: unknown) => String(err))).toMatch(type === 'redis' ? /^still here$/ : /already exists/);
      if (type !== 'redis') {
        const rows = (await withClient(type, theirUrl, (q) => q('select v from notes'))) as { v: string }[];
        expect(rows.map((r) => r.v)).toEqual([`kept by ${theirs.w.slug}`]);
      }
    }, 120_000);
  });

  it('suspends a workspace\'s databases on the shared servers (logins refused, sessions ended, data kept) and resumes them', async () => {
    const w = await makeWorkspace(s);
    const made: { type: Kind; d: Database; password: string }[] = [];
    for (const type of Object.keys(SHARED) as Kind[]) {
      const r = await s.request<Database>('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: `held ${type}`, type } });
      const d = r.body.data;
      if (d === undefined) throw new Error(r.text);
      expect((await settled(w, d.slug)).d?.status).toBe('running');
      expect(await writeAndRead(type, d, d.password, `held by ${w.slug}`)).toBe(`held by ${w.slug}`);
      made.push({ type, d, password: d.password });
    }
    const urlOf = (m: (typeof made)[number]) => (m.d.external_connection_string ?? '').replace('********', m.password);
    // a session open before the suspension is ended by it
    const first = made[0];
    if (first === undefined) throw new Error('nothing made');
    const open = new pg.Client({ connectionString: urlOf(first) });
    open.on('error', () => undefined);
    await open.connect();

    expect(await s.services.databases.suspendWorkspace(w.id)).toBe(3);
    for (const m of made) {
      expect((await settled(w, m.d.slug)).d?.status).toBe('suspended');
      const refused = withClient(m.type, urlOf(m), (q) => (m.type === 'redis' ? q('PING') : q('select 1')));
      await expect(refused, m.type).rejects.toThrow({ postgresql: /not permitted to log in/, mysql: /locked/, redis: /WRONGPASS/ }[m.type]);
    }
    await expect(open.query('select 1')).rejects.toThrow();
    await open.end().catch(() => undefined);
    // again: nothing more to do
    expect(await s.services.databases.suspendWorkspace(w.id)).toBe(0);

    expect(await s.services.databases.resumeWorkspace(w.id)).toBe(3);
    for (const m of made) {
      expect((await settled(w, m.d.slug)).d?.status).toBe('running');
      const kept =
        m.type === 'redis'
          ? await withClient(m.type, urlOf(m), (q) => q('GET', `${m.d.key_prefix ?? ''}note`))
          : ((await withClient(m.type, urlOf(m), (q) => q('select v from notes'))) as { v: string }[]).map((r) => r.v).join(',');
      expect(kept, m.type).toBe(`held by ${w.slug}`);
    }
  }, 120_000);

  it('drops the databases of a deleted workspace from the shared servers, and only this installation\'s', async () => {
    const w = await makeWorkspace(s);
    const names = new Map<Kind, string>();
    for (const type of Object.keys(SHARED) as Kind[]) {
      const r = await s.request<Database>('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: `doomed ${type}`, type } });
      expect(r.status, r.text).toBe(202);
      names.set(type, r.body.data?.username ?? '');
      expect((await settled(w, `doomed-${type}`)).d?.status).toBe('running');
    }
    // another installation's tenant on the same server is never touched
    const stranger = sharedServer('redis', SHARED.redis);
    const strangerName = `${sharedPrefix('ffffff00-0000-7000-8000-000000000000')}main_abcdefgh`;
    await stranger.create({ name: strangerName, password: 'a-stranger-password-of-some-len' });
    try {
      expect((await s.request('DELETE', `/api/workspaces/${w.slug}`, { key: w.owner.key })).status).toBeLessThan(300);
      for (const [type, name] of names) {
        const server = sharedServer(type, SHARED[type]);
        const end = Date.now() + 30_000;
        while ((await server.tenants(prefix)).has(name) && Date.now() < end) await new Promise((res) => setTimeout(res, 200));
        expect((await server.tenants(prefix)).has(name), `${type} ${name}`).toBe(false);
      }
      expect((await stranger.tenants('swffffff_')).has(strangerName)).toBe(true);
    } finally {
      await stranger.drop(strangerName);
    }
  }, 120_000);

  it('fails readably when the shared server cannot be reached, never showing its URL, and keeps a deletion until the server answers', async () => {
    const down = await startTestServer('sqlite', { platform: { databases: { shared: { redis: 'redis://default:admin-secret@127.0.0.1:1' }, readyTimeoutMs: 5_000 } } });
    const downWorker = await startDatabaseWorker(down, { reconcileEveryMs: 500 });
    try {
      const w = await makeWorkspace(down);
      const made = await down.request<Database>('POST', `/api/workspaces/${w.slug}/databases`, { key: w.member.key, body: { name: 'cache', type: 'redis' } });
      expect(made.status).toBe(202);
      const end = Date.now() + 30_000;
      let d: DatabaseDetail | undefined;
      while (Date.now() < end) {
        d = (await down.request<DatabaseDetail>('GET', `/api/workspaces/${w.slug}/databases/cache`, { key: w.member.key })).body.data;
        if (d?.status !== 'provisioning') break;
        await new Promise((res) => setTimeout(res, 200));
      }
      expect(d?.status).toBe('failed');
      expect(d?.error).toMatch(/ECONNREFUSED 127\.0\.0\.1:1/);
      const del = await down.request<Database>('DELETE', `/api/workspaces/${w.slug}/databases/cache`, { key: w.member.key });
      expect(del.status).toBe(202);
      let after: DatabaseDetail | undefined;
      const end2 = Date.now() + 30_000;
      while (Date.now() < end2) {
        after = (await down.request<DatabaseDetail>('GET', `/api/workspaces/${w.slug}/databases/cache`, { key: w.member.key })).body.data;
        if (after?.events.at(-1)?.message.startsWith('Cannot drop it') === true) break;
        await new Promise((res) => setTimeout(res, 200));
      }
      expect(after?.status).toBe('deleting');
      expect(after?.events.at(-1)?.message).toMatch(/^Cannot drop it from the shared server yet: .*ECONNREFUSED/);
      expect(JSON.stringify(after)).not.toContain('admin-secret');
      expect(down.logs.join('\n')).not.toContain('admin-secret');
    } finally {
      down.leader.databases.clear();
      await downWorker.stop();
      await down.close();
    }
  }, 60_000);
});
