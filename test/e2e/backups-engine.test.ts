// Backups of managed databases on the real engine (docs/backups.md): for PostgreSQL, MariaDB (the
// mysql type) and Redis on the locally built images, known rows or keys are written, a backup is
// taken through the API with the engine's own tool (pg_dump, mariadb-dump, BGSAVE), the data is
// changed, and a new database restored from the backup holds exactly what was written, compared
// by the official client; the download is the engine's own format; the roles, the other
// workspace and the bad requests are refused with the envelope.
// Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backup, BackupDetail } from '../../src/modules/backups/backups.schema.js';
import type { Database, DatabaseDetail } from '../../src/modules/databases/databases.schema.js';
import { startDeployFixture, type DeployFixture } from '../factories/engine.js';
import { makeWorkspace, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { ensureDatabaseImages } from '../factories/images.js';

type Kind = 'postgresql' | 'mysql' | 'redis';
const ROWS = 500;

/** Writes the known data: ROWS rows in `items` (and an empty table), or ROWS keys and a hash. */
async function seed(type: Kind, url: string): Promise<void> {
  if (type === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query("create table items (id int primary key, v text not null, b bytea); create table empty_one (x int); create view item_count as select count(*) from items");
      await c.query(`insert into items select g, 'it''s row ' || g || E' with a \\\\ and a\nnewline', decode('00ff', 'hex') from generate_series(1, ${String(ROWS)}) g`);
    } finally {
      await c.end();
    }
  } else if (type === 'mysql') {
    const c = await mysql.createConnection({ uri: url, multipleStatements: true });
    try {
      await c.query('create table items (id int primary key, v text not null, b blob); create table empty_one (x int)');
      const values = Array.from({ length: ROWS }, (_, i) => [i + 1, `it's row ${String(i + 1)} with a \\ and a\nnewline, (parens), ; semicolons`, Buffer.from([0, 0x27, 0x5c, 0xff])]);
      await c.query('insert into items (id, v, b) values ?', [values]);
    } finally {
      await c.end();
    }
  } else {
    const c = new Redis(url);
    try {
      const m = c.multi();
      for (let i = 1; i <= ROWS - 1; i++) m.set(`item:${String(i)}`, `value ${String(i)}`);
      m.hset('profile', { name: 'ada', langs: 'en,fr' });
      await m.exec();
    } finally {
      c.disconnect();
    }
  }
}

/** What the known data looks like now: a fingerprint the restored copy must match. */
async function fingerprint(type: Kind, url: string): Promise<string> {
  if (type === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const r = await c.query<{ n: string; h: string }>("select count(*) as n, md5(string_agg(id || ':' || v || ':' || encode(b, 'hex'), ',' order by id)) as h from items");
      const v = await c.query<{ count: string }>('select * from item_count');
      return `${r.rows[0]?.n ?? ''} ${r.rows[0]?.h ?? ''} view=${v.rows[0]?.count ?? ''}`;
    } finally {
      await c.end();
    }
  }
  if (type === 'mysql') {
    const c = await mysql.createConnection({ uri: url });
    try {
      const [rows] = await c.query("select count(*) as n, md5(group_concat(concat(id, ':', v, ':', hex(b)) order by id separator ',')) as h from items");
      const r = (rows as { n: number; h: string }[])[0];
      return `${String(r?.n)} ${r?.h ?? ''}`;
    } finally {
      await c.end();
    }
  }
  const c = new Redis(url);
  try {
    const keys = (await c.keys('*')).sort();
    const values = await Promise.all(keys.map(async (k) => (k === 'profile' ? JSON.stringify(await c.hgetall(k)) : await c.get(k))));
    return `${String(keys.length)} ${keys.map((k, i) => `${k}=${values[i] ?? ''}`).join(',')}`;
  } finally {
    c.disconnect();
  }
}

/** Changes the data after the backup: the restore must not show these changes. */
async function change(type: Kind, url: string): Promise<void> {
  if (type === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query('delete from items where id > 10').finally(() => c.end());
  } else if (type === 'mysql') {
    const c = await mysql.createConnection({ uri: url });
    await c.query('delete from items where id > 10').finally(() => c.end());
  } else {
    const c = new Redis(url);
    await c.flushdb().finally(() => { c.disconnect(); });
  }
}

describe('database backups on the engine (sqlite)', () => {
  let fx: DeployFixture;
  let s: TestServer;
  let w: TestWorkspace;
  let other: TestWorkspace;
  const base = () => `/api/workspaces/${w.slug}/databases`;

  beforeAll(async () => {
    await ensureDatabaseImages();
    fx = await startDeployFixture('sqlite', 'acme/backups', { engine: { databases: { readyTimeoutMs: 120_000 } } });
    s = fx.s;
    w = fx.w;
    other = await makeWorkspace(s, 'other backups');
  }, 600_000);
  afterAll(async () => {
    await fx.close();
  });

  async function settled(slug: string, ms = 150_000): Promise<DatabaseDetail> {
    const end = Date.now() + ms;
    for (;;) {
      const r = await s.request<DatabaseDetail>('GET', `${base()}/${slug}`, { key: w.member.key });
      const d = r.body.data;
      if (d !== undefined && d.status !== 'provisioning') return d;
      if (Date.now() > end) throw new Error(`database ${slug} still provisioning: ${r.text}`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  async function finished(slug: string, id: string, ms = 120_000): Promise<BackupDetail> {
    const end = Date.now() + ms;
    for (;;) {
      const r = await s.request<BackupDetail>('GET', `${base()}/${slug}/backups/${id}`, { key: w.member.key });
      const b = r.body.data;
      if (b !== undefined && (b.status === 'succeeded' || b.status === 'failed')) return b;
      if (Date.now() > end) throw new Error(`backup ${id} still ${b?.status ?? '?'}: ${r.text}`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  /** Where the host reaches a running database, with the password the create response gave. */
  function urlOf(d: DatabaseDetail, password: string): string {
    const url = d.external_connection_string;
    if (url === null) throw new Error(`database ${d.slug} is not published`);
    return url.replace(encodeURIComponent('********'), encodeURIComponent(password)).replace('********', encodeURIComponent(password));
  }

  async function create(name: string, type: Kind, restoreFrom?: string): Promise<Database> {
    const made = await s.request<Database>('POST', base(), { key: w.member.key, body: { name, type, ...(restoreFrom === undefined ? {} : { restore_from: restoreFrom }) } });
    expect(made.status, made.text).toBe(202);
    if (made.body.data === undefined) throw new Error(made.text);
    return made.body.data;
  }

  describe.each(['postgresql', 'mysql', 'redis'] as const)('%s', (type) => {
    it("backs up with the engine's own tool, and a new database restored from it holds exactly what was backed up", async () => {
      const source = await create(`${type} prod`, type);
      const running = await settled(source.slug);
      expect(running.status, running.error ?? '').toBe('running');
      const url = urlOf(running, source.password);
      await seed(type, url);
      const before = await fingerprint(type, url);

      // a member may take one: 202 and pending, then succeeded only once it was read back
      const taken = await s.request<Backup>('POST', `${base()}/${source.slug}/backups`, { key: w.member.key, body: {} });
      expect(taken.status, taken.text).toBe(202);
      expect(taken.body.data).toMatchObject({ status: 'pending', trigger: 'manual', destination: 'local', size: null, error: null });
      const id = taken.body.data?.id ?? '';
      const done = await finished(source.slug, id);
      expect(done.status, done.error ?? '').toBe('succeeded');
      expect(done.size).toBeGreaterThan(100);
      expect(done.checksum).toMatch(/^[0-9a-f]{64}$/);
      expect(done.started_at).not.toBeNull();
      expect(done.manifest?.engine).toMatch(type === 'postgresql' ? /^PostgreSQL 15/ : type === 'mysql' ? /MariaDB/ : /^Redis 7/);
      expect(done.manifest?.tool).toMatch(type === 'postgresql' ? /pg_dump \(PostgreSQL\) 15/ : type === 'mysql' ? /mariadb-dump|mysqldump/ : /BGSAVE/);
      if (type === 'redis') expect(done.manifest?.contents).toEqual({ kind: 'keys', keys: ROWS });
      else expect(done.manifest?.contents).toMatchObject({ kind: 'tables', tables: expect.arrayContaining([{ name: type === 'postgresql' ? 'public.items' : 'items', rows: ROWS }]) as unknown });

      // listed newest first
      const listed = await s.request<Backup[]>('GET', `${base()}/${source.slug}/backups`, { key: w.member.key });
      expect(listed.body.data?.map((b) => b.id)).toEqual([id]);

      await change(type, url);
      expect(await fingerprint(type, url)).not.toBe(before);

      // restored into a new database: production is never overwritten
      const restored = await create(`${type} restored`, type, id);
      expect(restored.restore_from).toBe(id);
      const r = await settled(restored.slug);
      expect(r.status, `${r.error ?? ''}\n${r.events.map((e) => e.message).join('\n')}`).toBe('running');
      expect(r.events.map((e) => e.message).join('\n')).toMatch(new RegExp(`Restored from backup ${id} in [0-9.]+ s: .*, as in the manifest\\.`));
      expect(await fingerprint(type, urlOf(r, restored.password))).toBe(before);

      // the download is the engine's own format, for owners and admins only
      expect((await s.request('GET', `${base()}/${source.slug}/backups/${id}/download`, { key: w.member.key })).status).toBe(403);
      const got = await fetch(`${s.url}${base()}/${source.slug}/backups/${id}/download`, { headers: { 'x-api-key': w.owner.key } });
      expect(got.status).toBe(200);
      expect(got.headers.get('content-disposition')).toMatch(new RegExp(`attachment; filename="${source.slug}-${id}\\.(dump|sql|rdb)"`));
      const body = Buffer.from(await got.arrayBuffer());
      if (type === 'postgresql') expect(body.subarray(0, 5).toString('latin1')).toBe('PGDMP');
      else if (type === 'mysql') expect(body.toString('utf8')).toContain('INSERT INTO `items` VALUES');
      else expect(body.subarray(0, 5).toString('latin1')).toBe('REDIS');

      // the other workspace sees none of it, and cannot restore from it
      expect((await s.request('GET', `${base()}/${source.slug}/backups`, { key: other.owner.key })).status).toBe(404);
      const stolen = await s.request('POST', `/api/workspaces/${other.slug}/databases`, { key: other.owner.key, body: { name: 'stolen', type, restore_from: id } });
      expect(stolen.status).toBe(400);
      expect(stolen.body.error).toBe('"restore_from" names no backup of this workspace.');

      // deleting is for owners and admins; the record and the artifact go
      expect((await s.request('DELETE', `${base()}/${source.slug}/backups/${id}`, { key: w.member.key })).status).toBe(403);
      expect((await s.request('DELETE', `${base()}/${source.slug}/backups/${id}`, { key: w.owner.key })).status).toBe(200);
      expect((await s.request('GET', `${base()}/${source.slug}/backups/${id}`, { key: w.member.key })).status).toBe(404);

      for (const slug of [source.slug, restored.slug]) await s.request('DELETE', `${base()}/${slug}`, { key: w.member.key });
    }, 300_000);
  });

  it('refuses what cannot be done, with the envelope: a wrong type, an unknown backup, a second one at once, an unknown destination', async () => {
    const db = await create('refusals', 'redis');
    expect((await settled(db.slug)).status).toBe('running');
    const unknown = await s.request('POST', base(), { key: w.member.key, body: { name: 'x', type: 'redis', restore_from: 'nope' } });
    expect(unknown.status).toBe(400);
    const dest = await s.request('POST', `${base()}/${db.slug}/backups`, { key: w.member.key, body: { destination_id: 'elsewhere' } });
    expect(dest.status).toBe(400);
    expect(dest.body.error).toMatch(/destination_id/);
    const first = await s.request<Backup>('POST', `${base()}/${db.slug}/backups`, { key: w.member.key, body: {} });
    expect(first.status).toBe(202);
    const second = await s.request('POST', `${base()}/${db.slug}/backups`, { key: w.member.key, body: {} });
    // the first may already have ended on a fast machine; otherwise one at a time
    expect([202, 409]).toContain(second.status);
    const done = await finished(db.slug, first.body.data?.id ?? '');
    expect(done.status, done.error ?? '').toBe('succeeded');
    const wrongType = await s.request('POST', base(), { key: w.member.key, body: { name: 'y', type: 'postgresql', restore_from: done.id } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error).toBe('"restore_from" names a redis backup; "type" is postgresql.');
    expect((await s.request('GET', `${base()}/nope/backups`, { key: w.member.key })).status).toBe(404);
  }, 200_000);
});
