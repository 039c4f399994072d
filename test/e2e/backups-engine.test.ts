// Backups of managed databases on the real engine (docs/backups.md): for PostgreSQL, MariaDB (the
// mysql type) and Redis on the locally built images, known rows or keys are written, a backup is
// taken through the API with the engine's own tool (pg_dump, mariadb-dump, BGSAVE), the data is
// changed, and a new database restored from the backup holds exactly what was written, compared
// by the official client; the download is the engine's own format; the roles, the other
// workspace and the bad requests are refused with the envelope.
// Uses Docker Engine: run under `flock /tmp/slipway-docker.lock`.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Docker from 'dockerode';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backup, BackupDetail } from '../../src/modules/backups/backups.schema.js';
import type { Database, DatabaseDetail } from '../../src/modules/databases/databases.schema.js';
import { startDeployFixture, type DeployFixture } from '../factories/engine.js';
import { makeWorkspace, type TestServer, type TestWorkspace } from '../factories/harness.js';
import { ensureDatabaseImages } from '../factories/images.js';
import { BACKUP_LABEL } from '../../src/modules/backups/policy.js';
import type { BackupDestination, BackupPolicy, DestinationTest, Restore } from '../../src/modules/backups/backups.schema.js';
import { S3_KEYS, startLocalS3, type LocalS3 } from '../factories/s3.js';

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

/** Something the backup does not have (a table, a key): an in-place restore must leave none of it. */
async function addStray(type: Kind, url: string): Promise<void> {
  if (type === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query('create table stray (x int); insert into stray values (1)').finally(() => c.end());
  } else if (type === 'mysql') {
    const c = await mysql.createConnection({ uri: url, multipleStatements: true });
    await c.query('create table stray (x int); insert into stray values (1)').finally(() => c.end());
  } else {
    const c = new Redis(url);
    await c.set('stray', '1').finally(() => { c.disconnect(); });
  }
}

async function strayLeft(type: Kind, url: string): Promise<boolean> {
  if (type === 'postgresql') {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const r = await c.query<{ t: string | null }>("select to_regclass('public.stray')::text as t").finally(() => c.end());
    return r.rows[0]?.t !== null;
  }
  if (type === 'mysql') {
    const c = await mysql.createConnection({ uri: url });
    const [rows] = await c.query("select count(*) as n from information_schema.tables where table_schema = database() and table_name = 'stray'").finally(() => c.end());
    return Number((rows as { n: number }[])[0]?.n) > 0;
  }
  const c = new Redis(url);
  const n = await c.exists('stray').finally(() => { c.disconnect(); });
  return n > 0;
}

describe('database backups on the engine (sqlite)', () => {
  let fx: DeployFixture;
  let s: TestServer;
  let w: TestWorkspace;
  let other: TestWorkspace;
  let s3: LocalS3;
  const base = () => `/api/workspaces/${w.slug}/databases`;

  beforeAll(async () => {
    await ensureDatabaseImages();
    s3 = await startLocalS3();
    fx = await startDeployFixture('sqlite', 'acme/backups', { engine: { databases: { readyTimeoutMs: 120_000 } }, server: { platform: { backupAllowPrivate: true } } });
    s = fx.s;
    w = fx.w;
    other = await makeWorkspace(s, 'other backups');
  }, 600_000);
  afterAll(async () => {
    await fx.close();
    await s3.close();
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

  async function verification(slug: string, id: string, ms = 150_000): Promise<BackupDetail> {
    const end = Date.now() + ms;
    for (;;) {
      const r = await s.request<BackupDetail>('GET', `${base()}/${slug}/backups/${id}`, { key: w.member.key });
      const b = r.body.data;
      if (b !== undefined && (b.verify_status === 'succeeded' || b.verify_status === 'failed')) return b;
      if (Date.now() > end) throw new Error(`backup ${id}'s verification still ${b?.verify_status ?? '?'}: ${r.text}`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  /** No scratch server or tool container outlives its work. */
  async function noScratchLeft(): Promise<void> {
    const docker = new Docker();
    const end = Date.now() + 20_000;
    for (;;) {
      const left = await docker.listContainers({ all: true, filters: { label: [BACKUP_LABEL] } });
      const volumes = (await docker.listVolumes({ filters: { label: [BACKUP_LABEL] } })).Volumes as unknown[] | null;
      if (left.length === 0 && (volumes ?? []).length === 0) return;
      if (Date.now() > end) throw new Error(`left behind: ${left.map((c) => c.Names.join(',')).join(' ')} and ${String((volumes ?? []).length)} volumes`);
      await new Promise((res) => setTimeout(res, 250));
    }
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

      // proof: restored into a scratch server of the same engine and compared with the manifest
      const asked = await s.request<Backup>('POST', `${base()}/${source.slug}/backups/${id}/verify`, { key: w.member.key });
      expect(asked.status, asked.text).toBe(202);
      expect(asked.body.data?.verify_status).toBe('pending');
      const verified = await verification(source.slug, id);
      expect(verified.verify_status, verified.verify_error ?? '').toBe('succeeded');
      expect(verified.verified_at).not.toBeNull();
      expect(verified.restore_seconds).toBeGreaterThan(0);
      await noScratchLeft();

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

      // in place: only with the slug typed again, for owners and admins, after a safety backup of what it holds now
      const restoreUrl = `${base()}/${source.slug}/restore`;
      expect((await s.request('POST', restoreUrl, { key: w.member.key, body: { backup_id: id, confirm: source.slug } })).status).toBe(403);
      const unconfirmed = await s.request('POST', restoreUrl, { key: w.owner.key, body: { backup_id: id, confirm: `${source.slug}-not` } });
      expect(unconfirmed.status).toBe(400);
      expect(unconfirmed.body.error).toBe(`"confirm" must be the database's slug ("${source.slug}"): an in-place restore replaces everything it holds now.`);
      await addStray(type, url);
      const changed = await fingerprint(type, url);
      const asked2 = await s.request<Restore>('POST', restoreUrl, { key: w.admin.key, body: { backup_id: id, confirm: source.slug } });
      expect(asked2.status, asked2.text).toBe(202);
      expect(asked2.body.data).toMatchObject({ status: 'pending', backup_id: id, step: 'Taking a safety backup of what the database holds now.' });
      const restoreId = asked2.body.data?.id ?? '';
      const steps = new Set<string>();
      let done2: Restore | undefined;
      for (const end = Date.now() + 150_000; done2 === undefined; ) {
        const r = (await s.request<Restore>('GET', `${base()}/${source.slug}/restores/${restoreId}`, { key: w.member.key })).body.data;
        if (r?.step !== null && r?.step !== undefined) steps.add(r.step);
        if (r?.status === 'succeeded' || r?.status === 'failed') done2 = r;
        else if (Date.now() > end) throw new Error(`restore still ${r?.status ?? '?'}`);
        else await new Promise((res) => setTimeout(res, 100));
      }
      expect(done2.status, done2.error ?? '').toBe('succeeded');
      expect(done2.result).toMatch(new RegExp(`as in the manifest of backup ${id}; restored in [0-9.]+ s\\.$`));
      expect([...steps].join('\n')).toMatch(type === 'redis' ? /by replication from the scratch server/ : /Replacing the database's contents/);
      expect(await fingerprint(type, url)).toBe(before);
      expect(await strayLeft(type, url)).toBe(false);
      // the safety backup holds what it held before
      const safety = await finished(source.slug, done2.safety_backup_id);
      expect(safety).toMatchObject({ status: 'succeeded', trigger: 'safety' });
      expect(changed).not.toBe(before);
      if (type === 'redis') expect(safety.manifest?.contents).toEqual({ kind: 'keys', keys: 1 });
      else expect(safety.manifest?.contents).toMatchObject({ kind: 'tables', tables: expect.arrayContaining([{ name: type === 'postgresql' ? 'public.items' : 'items', rows: 10 }, { name: type === 'postgresql' ? 'public.stray' : 'stray', rows: 1 }]) as unknown });
      const listedRestores = await s.request<Restore[]>('GET', `${base()}/${source.slug}/restores`, { key: w.member.key });
      expect(listedRestores.body.data?.map((r) => r.id)).toEqual([restoreId]);
      await noScratchLeft();

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

  it('runs the schedule on the leader, keeps what the retention says, verifies after each, and alerts when no backup succeeded in time', async () => {
    const db = await create('scheduled', 'redis');
    const running = await settled(db.slug);
    expect(running.status).toBe('running');
    const dbId = running.id;
    await seed('redis', urlOf(running, db.password));
    const policyUrl = `${base()}/${db.slug}/backup-policy`;
    expect((await s.request('PUT', policyUrl, { key: w.member.key, body: { schedule: '0 3 * * *' } })).status).toBe(403);
    const put = await s.request<BackupPolicy>('PUT', policyUrl, { key: w.admin.key, body: { schedule: '0 3 * * *', keep_count: 2, verify: 'after-each' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data).toMatchObject({ schedule: '0 3 * * *', timezone: 'UTC', keep_count: 2, keep_days: null, destination_id: 'local', verify: 'after-each', alert: null, last_success_at: null });
    expect(Date.parse(put.body.data?.next_run_at ?? '')).toBeGreaterThan(Date.now());

    // three runs come due one after the other (as if Slipway had been down over them: each runs once)
    const ids: string[] = [];
    for (let run = 0; run < 3; run++) {
      await s.store.db.updateTable('backup_policies').set({ next_run_at: new Date(Date.now() - 60_000).toISOString() }).where('database_id', '=', dbId).execute();
      let b: Backup | undefined;
      const end = Date.now() + 60_000;
      while (b === undefined) {
        if (Date.now() > end) throw new Error('the scheduled backup never came');
        const listed = await s.request<Backup[]>('GET', `${base()}/${db.slug}/backups`, { key: w.member.key });
        b = listed.body.data?.find((x) => x.trigger === 'scheduled' && !ids.includes(x.id));
        await new Promise((res) => setTimeout(res, 200));
      }
      ids.push(b.id);
      const done = await finished(db.slug, b.id);
      expect(done.status, done.error ?? '').toBe('succeeded');
      const v = await verification(db.slug, b.id);
      expect(v.verify_status, v.verify_error ?? '').toBe('succeeded');
      const policy = await s.request<BackupPolicy>('GET', policyUrl, { key: w.member.key });
      expect(Date.parse(policy.body.data?.next_run_at ?? '')).toBeGreaterThan(Date.now());
    }
    // the oldest went: two kept, the artifact of the first removed from the destination too
    const listed = await s.request<Backup[]>('GET', `${base()}/${db.slug}/backups`, { key: w.member.key });
    expect(listed.body.data?.map((x) => x.id)).toEqual([ids[2], ids[1]]);
    const dir = s.deps.policies.backups.dir;
    await expect(readFile(join(dir, w.id, dbId, `${ids[0] ?? ''}.slwb`))).rejects.toThrow(/ENOENT/);
    const policy = await s.request<BackupPolicy>('GET', policyUrl, { key: w.member.key });
    expect(policy.body.data?.last_success_at).not.toBeNull();
    expect(policy.body.data?.last_verified_at).not.toBeNull();

    // a damaged artifact: the verification (and a download) say so, and an alert is raised
    const newest = ids[2] ?? '';
    const file = join(dir, w.id, dbId, `${newest}.slwb`);
    const bytes = await readFile(file);
    const mid = Math.floor(bytes.length / 2);
    bytes[mid] = (bytes[mid] ?? 0) ^ 0xff;
    await writeFile(file, bytes);
    expect((await s.request('POST', `${base()}/${db.slug}/backups/${newest}/verify`, { key: w.member.key })).status).toBe(202);
    const broken = await verification(db.slug, newest);
    expect(broken.verify_status).toBe('failed');
    expect(broken.verify_error).toMatch(/does not match its checksum/);
    const download = await s.request('GET', `${base()}/${db.slug}/backups/${newest}/download`, { key: w.owner.key });
    expect(download.status).toBe(409);
    await noScratchLeft();
    const alerted = await s.request<BackupPolicy>('GET', policyUrl, { key: w.member.key });
    expect(alerted.body.data?.alert).toMatch(/^The verification of backup .* failed: /);

    // a schedule with no success within 1.5 times its interval (hourly, set 2 hours ago, not due yet)
    const quiet = await create('quiet', 'redis');
    expect((await settled(quiet.slug)).status).toBe('running');
    expect((await s.request('PUT', `${base()}/${quiet.slug}/backup-policy`, { key: w.owner.key, body: { schedule: '0 * * * *', verify: 'never' } })).status).toBe(200);
    const quietId = (await s.store.repos.databases.bySlug(w.id, quiet.slug))?.id ?? '';
    await s.store.db.updateTable('backup_policies').set({ created_at: new Date(Date.now() - 2 * 3600_000).toISOString(), next_run_at: new Date(Date.now() + 3600_000).toISOString() }).where('database_id', '=', quietId).execute();
    const end = Date.now() + 20_000;
    let alert: string | null = null;
    while (alert === null && Date.now() < end) {
      await new Promise((res) => setTimeout(res, 250));
      alert = (await s.request<BackupPolicy>('GET', `${base()}/${quiet.slug}/backup-policy`, { key: w.member.key })).body.data?.alert ?? null;
    }
    expect(alert).toMatch(/^No backup of this database has succeeded since its schedule was set/);
    const events = (await s.request<DatabaseDetail>('GET', `${base()}/${quiet.slug}`, { key: w.member.key })).body.data?.events.map((e) => e.message) ?? [];
    expect(events.filter((e) => e.startsWith('Backup alert: No backup'))).toHaveLength(1);
  }, 400_000);

  it('keeps backups in S3: a refused upload and a corrupted read-back fail the run (local copy kept, alerted), then it succeeds; retention prunes both destinations', async () => {
    const db = await create('offsite', 'redis');
    const running = await settled(db.slug);
    expect(running.status).toBe('running');
    const dbId = running.id;
    await seed('redis', urlOf(running, db.password));
    const dests = `/api/workspaces/${w.slug}/backup-destinations`;
    const body = { name: 'offsite', endpoint: s3.endpoint, bucket: s3.bucket, prefix: 'slipway', path_style: true, ...S3_KEYS };
    expect((await s.request('POST', dests, { key: w.member.key, body })).status).toBe(403);
    const made = await s.request<BackupDestination>('POST', dests, { key: w.admin.key, body });
    expect(made.status, made.text).toBe(201);
    expect(made.body.data).toMatchObject({ name: 'offsite', kind: 's3', bucket: s3.bucket, prefix: 'slipway/', path_style: true, access_key_id: 'S3RV…' });
    expect(made.text).not.toContain(S3_KEYS.secret_access_key);
    const destId = made.body.data?.id ?? '';
    const tested = await s.request<DestinationTest>('POST', `${dests}/${destId}/test`, { key: w.owner.key });
    expect(tested.body.data, tested.text).toMatchObject({ ok: true, code: null });
    // a bucket that is not there: the provider's own code, from the same path
    const wrong = await s.request<BackupDestination>('POST', dests, { key: w.owner.key, body: { ...body, name: 'wrong bucket', bucket: 'no-such-bucket' } });
    const wrongTest = await s.request<DestinationTest>('POST', `${dests}/${wrong.body.data?.id ?? ''}/test`, { key: w.owner.key });
    expect(wrongTest.body.data).toMatchObject({ ok: false, code: 'NoSuchBucket', steps: [{ step: 'write', ok: false }] });
    // another workspace never sees it
    expect((await s.request('GET', `/api/workspaces/${other.slug}/backup-destinations/${destId}`, { key: other.owner.key })).status).toBe(404);

    const policyUrl = `${base()}/${db.slug}/backup-policy`;
    const put = await s.request<BackupPolicy>('PUT', policyUrl, { key: w.admin.key, body: { schedule: '0 3 * * *', keep_count: 1, destination_id: destId, verify: 'never' } });
    expect(put.status, put.text).toBe(200);
    expect((await s.request('DELETE', `${dests}/${destId}`, { key: w.owner.key })).status).toBe(409);
    const seen: string[] = [];
    const scheduledRun = async (): Promise<BackupDetail> => {
      await s.store.db.updateTable('backup_policies').set({ next_run_at: new Date(Date.now() - 60_000).toISOString() }).where('database_id', '=', dbId).execute();
      const end = Date.now() + 60_000;
      for (;;) {
        if (Date.now() > end) throw new Error('the scheduled backup never came');
        const listed = await s.request<Backup[]>('GET', `${base()}/${db.slug}/backups`, { key: w.member.key });
        const b = listed.body.data?.find((x) => x.trigger === 'scheduled' && !seen.includes(x.id));
        if (b !== undefined) {
          seen.push(b.id);
          return finished(db.slug, b.id);
        }
        await new Promise((res) => setTimeout(res, 200));
      }
    };
    const dir = s.deps.policies.backups.dir;
    const localFile = (id: string) => join(dir, w.id, dbId, `${id}.slwb`);
    const remoteKey = (id: string) => `slipway/${w.id}/${dbId}/${id}.slwb`;
    const alertOf = async () => (await s.request<BackupPolicy>('GET', policyUrl, { key: w.member.key })).body.data?.alert ?? null;

    // 1. the provider refuses the upload: failed with its code, nothing there, the local copy kept, one alert
    s3.refuseNextUpload();
    const refused = await scheduledRun();
    expect(refused.status).toBe('failed');
    expect(refused.error).toMatch(new RegExp(`^uploading to ${destId}: AccessDenied \\(HTTP 403\\): .* The local copy is kept`));
    expect(refused.destination).toBe(destId);
    await readFile(localFile(refused.id));
    expect((await s3.keys()).filter((k) => k.includes(refused.id))).toEqual([]);
    expect(await alertOf()).toMatch(/^The scheduled backup .* failed: uploading to/);
    const alertEvents = async () => ((await s.request<DatabaseDetail>('GET', `${base()}/${db.slug}`, { key: w.member.key })).body.data?.events.map((e) => e.message) ?? []).filter((e) => e.startsWith('Backup alert: The scheduled backup'));
    expect(await alertEvents()).toHaveLength(1);

    // 2. it takes the upload but gives back something else: the read-back fails it, the object is removed
    s3.corruptNextRead();
    const corrupted = await scheduledRun();
    expect(corrupted.status).toBe('failed');
    expect(corrupted.error).toMatch(new RegExp(`^reading back from ${destId}: the stored artifact does not match what was written`));
    await readFile(localFile(corrupted.id));
    expect((await s3.keys()).filter((k) => k.includes(corrupted.id))).toEqual([]);
    expect(await alertEvents()).toHaveLength(2);

    // 3. then it works: in S3 with its manifest, the local copy gone, the alert lifted; restores and downloads read it from S3
    const good = await scheduledRun();
    expect(good.status, good.error ?? '').toBe('succeeded');
    expect(await s3.keys()).toEqual(expect.arrayContaining([remoteKey(good.id), `${remoteKey(good.id)}.manifest.json`]));
    await expect(readFile(localFile(good.id))).rejects.toThrow(/ENOENT/);
    expect(await alertOf()).toBeNull();
    const download = await s.request('GET', `${base()}/${db.slug}/backups/${good.id}/download`, { key: w.owner.key });
    expect(download.status).toBe(200);
    expect(download.text.startsWith('REDIS')).toBe(true);
    expect((await s.request('POST', `${base()}/${db.slug}/backups/${good.id}/verify`, { key: w.member.key })).status).toBe(202);
    const verified = await verification(db.slug, good.id);
    expect(verified.verify_status, verified.verify_error ?? '').toBe('succeeded');

    // a failed backup's kept local copy goes with its record
    expect((await s.request('DELETE', `${base()}/${db.slug}/backups/${refused.id}`, { key: w.owner.key })).status).toBe(200);
    await expect(readFile(localFile(refused.id))).rejects.toThrow(/ENOENT/);

    // 4. retention (keep 1) at each destination: two local backups leave one; the next scheduled run replaces the one in S3
    const locals: string[] = [];
    for (let i = 0; i < 2; i++) {
      const taken = await s.request<Backup>('POST', `${base()}/${db.slug}/backups`, { key: w.member.key, body: { destination_id: 'local' } });
      expect(taken.status, taken.text).toBe(202);
      const done = await finished(db.slug, taken.body.data?.id ?? '');
      expect(done.status, done.error ?? '').toBe('succeeded');
      expect(done.destination).toBe('local');
      locals.push(done.id);
    }
    const newer = await scheduledRun();
    expect(newer.status, newer.error ?? '').toBe('succeeded');
    // retention runs right after the success is recorded: it is seen a moment later
    const want = [locals[1] ?? '', newer.id].sort();
    let kept: string[] = [];
    for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((res) => setTimeout(res, 100))) {
      kept = ((await s.request<Backup[]>('GET', `${base()}/${db.slug}/backups`, { key: w.member.key })).body.data ?? []).filter((b) => b.status === 'succeeded').map((b) => b.id).sort();
      if (JSON.stringify(kept) === JSON.stringify(want)) break;
    }
    expect(kept).toEqual(want);
    await expect(readFile(localFile(locals[0] ?? ''))).rejects.toThrow(/ENOENT/);
    const keys = await s3.keys();
    expect(keys).toContain(remoteKey(newer.id));
    expect(keys.filter((k) => k.includes(good.id))).toEqual([]);
    await noScratchLeft();

    // the database deleted: its backup records go with it, and the sweep removes its artifacts, locally and in S3
    await readFile(localFile(locals[1] ?? ''));
    expect((await s.request('DELETE', `${base()}/${db.slug}`, { key: w.member.key })).status).toBe(202);
    const gone = Date.now() + 30_000;
    const remoteLeft = async () => (await s3.keys()).filter((k) => k.includes(`/${dbId}/`));
    while ((await readdir(join(dir, w.id, dbId)).then(() => true, () => false)) || (await remoteLeft()).length > 0) {
      if (Date.now() > gone) throw new Error(`the deleted database's artifacts are still there (in S3: ${(await remoteLeft()).join(', ')})`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }, 300_000);
});
