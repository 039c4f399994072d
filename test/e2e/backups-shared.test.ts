// Backups of databases on shared servers (docs/backups.md#shared-servers), on the real PostgreSQL,
// MariaDB and Redis servers on loopback with the engine running the tools: two workspaces each have
// a database of the same type on the same server; the first's backup, taken through the API with
// its own credentials, holds its own data and none of the other's (the Redis tenant: its keys
// only); a new database restored from it holds exactly that; a verification restores it into a
// scratch server; an in-place restore puts it back and leaves the other tenant untouched.
// Uses Docker Engine (the tool containers and the scratch servers).
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backup, BackupDetail, Restore } from '../../src/modules/backups/backups.schema.js';
import type { Database, DatabaseDetail } from '../../src/modules/databases/databases.schema.js';
import { sharedPrefix, sharedServer } from '../../src/modules/databases/shared.js';
import { instanceId } from '../../src/store/db.js';
import { startDeployFixture, type DeployFixture } from '../factories/engine.js';
import { makeWorkspace, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { ensureDatabaseImages } from '../factories/images.js';
import { pgAdminUrl } from '../factories/stores.js';

const MYSQL_URL = process.env['SLIPWAY_TEST_MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306';
const REDIS_URL = process.env['SLIPWAY_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const SHARED = { postgresql: pgAdminUrl(), mysql: MYSQL_URL, redis: REDIS_URL } as const;
type Kind = keyof typeof SHARED;
const ROWS = 300;

/** A tenant as the tests reach it: its URL (own credentials) and, for Redis, its key prefix. */
interface Tenant {
  url: string;
  prefix: string;
}

async function sql<T>(type: 'postgresql' | 'mysql', url: string, text: string): Promise<T[]> {
  if (type === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query(text)).rows as T[];
    } finally {
      await c.end();
    }
  }
  const c = await mysql.createConnection({ uri: url, multipleStatements: true });
  try {
    return (await c.query(text))[0] as T[];
  } finally {
    await c.end();
  }
}

async function redisDo<T>(url: string, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

/** Writes `n` known rows (or keys, and a hash with a ttl) marked `tag`. */
async function seed(type: Kind, t: Tenant, tag: string, n: number): Promise<void> {
  if (type === 'redis') {
    await redisDo(t.url, async (c) => {
      const m = c.multi();
      for (let i = 1; i <= n - 1; i++) m.set(`${t.prefix}item:${String(i)}`, `${tag} ${String(i)}`);
      m.hset(`${t.prefix}profile`, { name: tag, langs: 'en,fr' });
      m.pexpire(`${t.prefix}profile`, 3_600_000);
      await m.exec();
    });
    return;
  }
  await sql(type, t.url, 'create table items (id int primary key, v text not null); create table empty_one (x int)');
  const values = Array.from({ length: n }, (_, i) => `(${String(i + 1)}, '${tag} ${String(i + 1)}')`).join(',');
  await sql(type, t.url, `insert into items (id, v) values ${values}`);
}

/** The tenant's data now, as one string (Redis: its keys without the prefix, read through the administrative login's SCAN). */
async function fingerprint(type: Kind, t: Tenant): Promise<string> {
  if (type === 'redis') {
    return redisDo(SHARED.redis, async (admin) => {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await admin.scan(cursor, 'MATCH', `${t.prefix}*`, 'COUNT', 1000);
        keys.push(...batch);
        cursor = next;
      } while (cursor !== '0');
      keys.sort();
      const values = await Promise.all(keys.map(async (k) => (k.endsWith(':profile') ? `${JSON.stringify(await admin.hgetall(k))} ttl=${String((await admin.pttl(k)) > 0)}` : await admin.get(k))));
      return `${String(keys.length)} ${keys.map((k, i) => `${k.slice(t.prefix.length)}=${values[i] ?? ''}`).join(',')}`;
    });
  }
  const rows = await sql<{ id: number; v: string }>(type, t.url, 'select id, v from items order by id');
  return `${String(rows.length)} ${rows.map((r) => `${String(r.id)}:${r.v}`).join(',')}`;
}

async function change(type: Kind, t: Tenant): Promise<void> {
  if (type === 'redis') await redisDo(t.url, (c) => c.set(`${t.prefix}stray`, '1'));
  else await sql(type, t.url, 'delete from items where id > 10; create table stray (x int)');
}

describe('backups of databases on shared servers (PostgreSQL, MariaDB, Redis on loopback)', () => {
  let fx: DeployFixture;
  let s: TestServer;
  let a: TestWorkspace;
  let b: TestWorkspace;
  let prefix: string;

  beforeAll(async () => {
    await ensureDatabaseImages();
    fx = await startDeployFixture('sqlite', 'acme/backups-shared', {
      engine: { databases: { shared: SHARED, readyTimeoutMs: 30_000 } },
      server: { platform: { databases: { shared: SHARED, readyTimeoutMs: 30_000 } } },
    });
    s = fx.s;
    a = fx.w;
    b = await makeWorkspace(s, 'other tenant');
    prefix = sharedPrefix(await instanceId(s.store));
  }, 600_000);
  afterAll(async () => {
    await fx.close();
    for (const [type, url] of Object.entries(SHARED) as [Kind, string][]) {
      const server = sharedServer(type, url);
      for (const name of await server.tenants(prefix)) await server.drop(name);
    }
  });

  const base = (w: TestWorkspace) => `/api/workspaces/${w.slug}/databases`;

  async function settled(w: TestWorkspace, slug: string): Promise<DatabaseDetail> {
    const end = Date.now() + 120_000;
    for (;;) {
      const r = await s.request<DatabaseDetail>('GET', `${base(w)}/${slug}`, { key: w.member.key });
      const d = r.body.data;
      if (d !== undefined && d.status !== 'provisioning') return d;
      if (Date.now() > end) throw new Error(`database ${slug} still provisioning: ${r.text}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  async function poll<T extends { status?: string; verify_status?: string | null }>(w: TestWorkspace, path: string, done: (x: T) => boolean): Promise<T> {
    const end = Date.now() + 150_000;
    for (;;) {
      const r = await s.request<T>('GET', path, { key: w.member.key });
      const x = r.body.data;
      if (x !== undefined && done(x)) return x;
      if (Date.now() > end) throw new Error(`${path} did not end: ${r.text}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  async function create(w: TestWorkspace, name: string, type: Kind, restoreFrom?: string): Promise<{ d: DatabaseDetail; t: Tenant }> {
    const made = await s.request<Database>('POST', base(w), { key: w.member.key, body: { name, type, ...(restoreFrom === undefined ? {} : { restore_from: restoreFrom }) } });
    expect(made.status, made.text).toBe(202);
    const created = made.body.data;
    if (created === undefined) throw new Error(made.text);
    expect(created.provisioner).toBe('shared');
    const d = await settled(w, created.slug);
    expect(d.status, `${d.error ?? ''}\n${d.events.map((e) => e.message).join('\n')}`).toBe('running');
    const url = (d.external_connection_string ?? '').replace('********', encodeURIComponent(created.password));
    return { d, t: { url, prefix: d.key_prefix ?? '' } };
  }

  describe.each(Object.keys(SHARED) as Kind[])('%s', (type) => {
    it("backs up one tenant with its own credentials: its own data only, restored into a new database, verified, and in place without touching the other tenant", async () => {
      const mine = await create(a, `${type} shared prod`, type);
      const theirs = await create(b, `${type} shared prod`, type);
      await seed(type, mine.t, 'mine', ROWS);
      await seed(type, theirs.t, 'theirs', 7);
      const before = await fingerprint(type, mine.t);
      const theirsBefore = await fingerprint(type, theirs.t);

      const taken = await s.request<Backup>('POST', `${base(a)}/${mine.d.slug}/backups`, { key: a.member.key, body: {} });
      expect(taken.status, taken.text).toBe(202);
      const id = taken.body.data?.id ?? '';
      const done = await poll<BackupDetail>(a, `${base(a)}/${mine.d.slug}/backups/${id}`, (x) => x.status === 'succeeded' || x.status === 'failed');
      expect(done.status, done.error ?? '').toBe('succeeded');
      // its own data only: the other tenant's rows or keys are not in it
      if (type === 'redis') {
        expect(done.manifest?.contents).toEqual({ kind: 'keys', keys: ROWS });
        expect(done.manifest?.tool).toMatch(/SCAN of the key prefix/);
      } else {
        const contents = done.manifest?.contents as { kind: string; tables?: { name: string; rows: number }[] } | undefined;
        const tables = contents?.tables ?? [];
        expect(tables.map((t) => t.name).sort()).toEqual(type === 'postgresql' ? ['public.empty_one', 'public.items'] : ['empty_one', 'items']);
        expect(tables.find((t) => t.name.endsWith('items'))?.rows).toBe(ROWS);
        expect(done.manifest?.tool).toMatch(type === 'postgresql' ? /pg_dump/ : /mariadb-dump|mysqldump/);
      }

      // the download holds none of the other tenant's data
      const got = await fetch(`${s.url}${base(a)}/${mine.d.slug}/backups/${id}/download`, { headers: { 'x-api-key': a.owner.key } });
      expect(got.status).toBe(200);
      const body = Buffer.from(await got.arrayBuffer()).toString('latin1');
      expect(body).not.toContain('theirs');
      if (type === 'redis') {
        expect(body.startsWith('SLIPWAY-REDIS-KEYS/1\n')).toBe(true);
        expect(body).not.toContain(prefix);
      }
      if (type !== 'postgresql') expect(body).toContain('mine 1');

      // proof: restored into a scratch server of its own
      expect((await s.request('POST', `${base(a)}/${mine.d.slug}/backups/${id}/verify`, { key: a.member.key })).status).toBe(202);
      const verified = await poll<BackupDetail>(a, `${base(a)}/${mine.d.slug}/backups/${id}`, (x) => x.verify_status === 'succeeded' || x.verify_status === 'failed');
      expect(verified.verify_status, verified.verify_error ?? '').toBe('succeeded');

      // restored into a new database on the same shared server: exactly what was backed up
      const restored = await create(a, `${type} shared restored`, type, id);
      expect(restored.d.events.map((e) => e.message).join('\n')).toMatch(new RegExp(`Restored from backup ${id} in [0-9.]+ s: .*, as in the manifest\\.`));
      expect(await fingerprint(type, restored.t)).toBe(before);

      // in place, after a safety backup; the other tenant is left as it was
      await change(type, mine.t);
      expect(await fingerprint(type, mine.t)).not.toBe(before);
      const asked = await s.request<Restore>('POST', `${base(a)}/${mine.d.slug}/restore`, { key: a.owner.key, body: { backup_id: id, confirm: mine.d.slug } });
      expect(asked.status, asked.text).toBe(202);
      const ended = await poll<Restore>(a, `${base(a)}/${mine.d.slug}/restores/${asked.body.data?.id ?? ''}`, (x) => x.status === 'succeeded' || x.status === 'failed');
      expect(ended.status, ended.error ?? '').toBe('succeeded');
      expect(await fingerprint(type, mine.t)).toBe(before);
      expect(await fingerprint(type, theirs.t)).toBe(theirsBefore);
      if (type !== 'redis') expect(await sql(type, mine.t.url, type === 'postgresql' ? "select 1 from pg_tables where tablename = 'stray'" : "select 1 from information_schema.tables where table_schema = database() and table_name = 'stray'")).toEqual([]);

      for (const [w, slug] of [[a, mine.d.slug], [a, restored.d.slug], [b, theirs.d.slug]] as const) await s.request('DELETE', `${base(w)}/${slug}`, { key: w.member.key });
    }, 300_000);
  });
});
