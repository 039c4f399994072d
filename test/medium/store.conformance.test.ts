import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createStore, type Store } from '../../src/store/db.js';
import { isUniqueViolation, toNumber } from '../../src/store/dialects.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

/**
 * What the repositories rely on from a store, checked on every backend: a new backend (or a
 * driver upgrade) must pass this file unchanged.
 */
describe.each(STORE_KINDS)('store conformance on %s', (kind) => {
  let database: TestDatabase;
  let store: Store;
  const now = '2026-11-21T10:00:00.000Z';
  let n = 0;
  const id = (p: string) => `${p}-${(n++).toString().padStart(4, '0')}`;

  beforeAll(async () => {
    database = await freshDatabase(kind);
    store = await createStore(database.url);
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
  });

  async function workspace(): Promise<string> {
    const wid = id('w');
    await store.db.insertInto('workspaces').values({ id: wid, name: 'W', slug: wid, settings: '{}', created_at: now, updated_at: now }).execute();
    return wid;
  }
  async function user(): Promise<string> {
    const uid = id('u');
    await store.db.insertInto('users').values({ id: uid, email: `${uid}@example.com`, name: uid, created_at: now }).execute();
    return uid;
  }

  it('reports its dialect', () => {
    expect(store.dialect).toBe(kind);
  });

  it('migrates idempotently: opening the same store again applies nothing twice', async () => {
    const again = await createStore(database.url);
    try {
      const names = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(again.db);
      expect(names.rows.map((r) => r.name)).toEqual([
        '2026-11-21T000000-tenancy',
        '2026-11-21T010000-projects',
        '2026-11-22T000000-deploy-queue',
        '2026-11-23T000000-leases',
        '2026-11-24T000000-restart-requests',
        '2026-11-25T010000-github-installations',
        '2026-11-25T020000-webhook-secrets',
        '2026-11-25T030000-hosts',
        '2026-11-25T090000-workspace-creators',
        '2026-11-26T000000-runtime-logs',
      ]);
    } finally {
      await again.close();
    }
  });

  it('reports unique violations the same way', async () => {
    const wid = await workspace();
    const err = await store.db
      .insertInto('workspaces')
      .values({ id: id('w'), name: 'dup', slug: wid, settings: '{}', created_at: now, updated_at: now })
      .execute()
      .then(() => null, (e: unknown) => e);
    expect(isUniqueViolation(err)).toBe(true);
    expect(isUniqueViolation(new Error('other'))).toBe(false);
  });

  it('enforces foreign keys', async () => {
    const err = await store.db
      .insertInto('members')
      .values({ workspace_id: 'missing', user_id: 'missing', role: 'member', joined_at: now })
      .execute()
      .then(() => null, (e: unknown) => e);
    expect(err).not.toBeNull();
  });

  it('cascades a workspace delete to everything it owns', async () => {
    const wid = await workspace();
    const uid = await user();
    await store.db.insertInto('members').values({ workspace_id: wid, user_id: uid, role: 'owner', joined_at: now }).execute();
    await store.db
      .insertInto('invitations')
      .values({ id: id('i'), workspace_id: wid, email: 'x@example.com', role: 'member', token_hash: id('t'), status: 'pending', invited_by: uid, expires_at: now, created_at: now, accepted_at: null })
      .execute();
    await store.db
      .insertInto('api_keys')
      .values({ id: id('k'), user_id: uid, workspace_id: wid, name: 'k', key_hash: id('h'), key_prefix: 'p', expires_at: now, created_at: now, last_used_at: null, revoked_at: null })
      .execute();
    await store.db.deleteFrom('workspaces').where('id', '=', wid).execute();
    for (const table of ['members', 'invitations', 'api_keys'] as const) {
      const left = await store.db.selectFrom(table).select(store.db.fn.countAll<string | number>().as('n')).where('workspace_id', '=', wid).executeTakeFirstOrThrow();
      expect(toNumber(left.n), table).toBe(0);
    }
    // The user outlives the workspace.
    expect(await store.db.selectFrom('users').select('id').where('id', '=', uid).executeTakeFirst()).toEqual({ id: uid });
  });

  it('rolls a failed transaction back completely', async () => {
    const wid = id('w');
    await expect(
      store.db.transaction().execute(async (trx) => {
        await trx.insertInto('workspaces').values({ id: wid, name: 'T', slug: wid, settings: '{}', created_at: now, updated_at: now }).execute();
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await store.db.selectFrom('workspaces').select('id').where('id', '=', wid).executeTakeFirst()).toBeUndefined();
  });

  it('skips an insert on conflict when asked', async () => {
    const uid = await user();
    await store.db
      .insertInto('users')
      .values({ id: id('u'), email: `${uid}@example.com`, name: 'again', created_at: now })
      .onConflict((oc) => oc.column('email').doNothing())
      .execute();
    const rows = await store.db.selectFrom('users').selectAll().where('email', '=', `${uid}@example.com`).execute();
    expect(rows).toEqual([{ id: uid, email: `${uid}@example.com`, name: uid, created_at: now }]);
  });

  it('round-trips text timestamps and null exactly, and orders them as time', async () => {
    const wid = await workspace();
    const uid = await user();
    const times = ['2026-11-21T10:00:00.010Z', '2026-11-21T09:59:59.999Z', '2026-11-21T10:00:00.002Z'];
    for (const t of times) {
      await store.db
        .insertInto('api_keys')
        .values({ id: id('k'), user_id: uid, workspace_id: wid, name: t, key_hash: id('h'), key_prefix: 'p', expires_at: t, created_at: t, last_used_at: null, revoked_at: null })
        .execute();
    }
    const rows = await store.db.selectFrom('api_keys').select(['created_at', 'last_used_at']).where('workspace_id', '=', wid).orderBy('created_at').execute();
    expect(rows.map((r) => r.created_at)).toEqual([...times].sort());
    expect(rows.every((r) => r.last_used_at === null)).toBe(true);
  });

  it('gives workspaces that predate wallets an empty wallet when migrating', async () => {
    const old = await freshDatabase(kind);
    try {
      const partial = await createStore(old.url, { upTo: '2026-11-21T000000-tenancy' });
      await partial.db.insertInto('workspaces').values({ id: 'w-old', name: 'Old', slug: 'old', settings: '{}', created_at: now, updated_at: now }).execute();
      await partial.close();
      const full = await createStore(old.url);
      try {
        const wallet = await full.db.selectFrom('wallets').selectAll().where('workspace_id', '=', 'w-old').executeTakeFirstOrThrow();
        expect([toNumber(wallet.balance), wallet.currency, toNumber(wallet.alert_threshold)]).toEqual([0, 'USD', 0]);
      } finally {
        await full.close();
      }
    } finally {
      await old.drop();
    }
  });

  it('gives Git connections that predate per-connection webhook secrets a unique webhook id and no secret when migrating', async () => {
    const old = await freshDatabase(kind);
    try {
      const partial = await createStore(old.url, { upTo: '2026-11-24T000000-restart-requests' });
      await sql`insert into workspaces (id, name, slug, settings, created_at, updated_at) values ('w-old', 'Old', 'old', '{}', ${now}, ${now})`.execute(partial.db);
      for (const p of ['p-a', 'p-b']) {
        await sql`insert into projects (id, workspace_id, name, slug, port, replicas, cpu, ram, status, created_at, updated_at) values (${p}, 'w-old', ${p}, ${p}, 8080, 1, '0.5', '0.5', 'pending', ${now}, ${now})`.execute(partial.db);
        await sql`insert into git_connections (project_id, repo_full_name, branch, installation_id, auto_deploy, dockerfile_path, root_dir, created_at, updated_at) values (${p}, 'acme/web', 'main', 0, 1, 'Dockerfile', '', ${now}, ${now})`.execute(partial.db);
      }
      await sql`insert into deployments (id, project_id, status, source, created_at) values ('d-old', 'p-a', 'running', 'git', ${now})`.execute(partial.db);
      await partial.close();
      const full = await createStore(old.url);
      try {
        const rows = await full.db.selectFrom('git_connections').select(['webhook_id', 'webhook_secret']).orderBy('project_id').execute();
        expect(rows).toHaveLength(2);
        for (const r of rows) {
          expect(r.webhook_id).toMatch(/^[0-9a-f]{32}$/);
          expect(r.webhook_secret).toBeNull();
        }
        expect(rows[0]?.webhook_id).not.toBe(rows[1]?.webhook_id);
        const d = await full.db.selectFrom('deployments').select('require_head').where('id', '=', 'd-old').executeTakeFirstOrThrow();
        expect(d.require_head).toBe(0);
        // One URL names one connection: the store refuses a second row with the same webhook id.
        const dup = await sql`update git_connections set webhook_id = ${rows[0]?.webhook_id ?? ''} where project_id = 'p-b'`.execute(full.db).then(() => null, (e: unknown) => e);
        expect(isUniqueViolation(dup)).toBe(true);
      } finally {
        await full.close();
      }
    } finally {
      await old.drop();
    }
  });

  it('answers ping, and fails it once closed', async () => {
    await expect(store.ping()).resolves.toBeUndefined();
    const other = await createStore(database.url);
    await other.close();
    await expect(other.ping()).rejects.toThrow();
  });
});
