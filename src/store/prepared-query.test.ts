import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type Store } from './db.js';
import { PreparedQuery } from './prepared-query.js';

describe('PreparedQuery', () => {
  let store: Store;
  beforeAll(async () => {
    store = await createStore(':memory:');
    const now = new Date().toISOString();
    for (const [id, email] of [['u1', 'a@example.com'], ['u2', 'b@example.com']] as const) {
      await store.db.insertInto('users').values({ id, email, name: id, created_at: now }).execute();
    }
  });
  afterAll(async () => {
    await store.close();
  });

  it('runs the query built once with each call\'s arguments, keeping the constants the builder put in', async () => {
    let builds = 0;
    const q = new PreparedQuery(1, (db, email: string) => {
      builds += 1;
      return db.selectFrom('users').select(['id', 'email']).where('email', '=', email).where('name', '!=', 'nobody');
    });
    expect(await q.first(store.db, 'sqlite', 'a@example.com')).toEqual({ id: 'u1', email: 'a@example.com' });
    expect(await q.first(store.db, 'sqlite', 'b@example.com')).toEqual({ id: 'u2', email: 'b@example.com' });
    expect(await q.first(store.db, 'sqlite', 'c@example.com')).toBeUndefined();
    expect(builds).toBe(1);
  });

  it('refuses a query that does not use each argument once', async () => {
    const q = new PreparedQuery(2, (db, email: string, _unused: string) => db.selectFrom('users').select('id').where('email', '=', email));
    await expect(q.rows(store.db, 'sqlite', 'a@example.com', 'x')).rejects.toThrow(/each of its arguments exactly once/);
  });
});

describe('PreparedQuery on an SQLite file store (its own read connection)', () => {
  let dir: string;
  let store: Store;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'slipway-pq-'));
    store = await createStore(join(dir, 'slipway.db'));
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sees committed rows at once, and never the rows of a transaction still open', async () => {
    const q = new PreparedQuery(1, (db, email: string) => db.selectFrom('users').select(['id', 'email']).where('email', '=', email));
    const now = new Date().toISOString();
    await store.db.insertInto('users').values({ id: 'c1', email: 'committed@example.com', name: 'c', created_at: now }).execute();
    expect(await q.first(store.db, 'sqlite', 'committed@example.com')).toEqual({ id: 'c1', email: 'committed@example.com' });

    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => { release = r; });
    let inserted: () => void = () => undefined;
    const insertedYet = new Promise<void>((r) => { inserted = r; });
    const open = store.db.transaction().execute(async (trx) => {
      await trx.insertInto('users').values({ id: 'u1', email: 'uncommitted@example.com', name: 'u', created_at: now }).execute();
      // inside the transaction the row is there, read through Kysely
      expect(await q.first(trx, 'sqlite', 'uncommitted@example.com')).toEqual({ id: 'u1', email: 'uncommitted@example.com' });
      inserted();
      await held;
    });
    await insertedYet;
    expect(await q.first(store.db, 'sqlite', 'uncommitted@example.com')).toBeUndefined();
    release();
    await open;
    expect(await q.first(store.db, 'sqlite', 'uncommitted@example.com')).toEqual({ id: 'u1', email: 'uncommitted@example.com' });
  });

  it('answers again after any commit: this process\'s writes, and another connection\'s', async () => {
    const q = new PreparedQuery(1, (db, id: string) => db.selectFrom('users').select(['id', 'name']).where('id', '=', id));
    const now = new Date().toISOString();
    await store.db.insertInto('users').values({ id: 'k1', email: 'k1@example.com', name: 'first', created_at: now }).execute();
    expect(await q.first(store.db, 'sqlite', 'k1')).toEqual({ id: 'k1', name: 'first' });
    expect(await q.first(store.db, 'sqlite', 'k1')).toEqual({ id: 'k1', name: 'first' });

    await store.db.updateTable('users').set({ name: 'second' }).where('id', '=', 'k1').execute();
    expect(await q.first(store.db, 'sqlite', 'k1')).toEqual({ id: 'k1', name: 'second' });

    // a write by another process (slipway admin), through a connection of its own
    const other = await createStore(join(dir, 'slipway.db'));
    try {
      await other.db.updateTable('users').set({ name: 'third' }).where('id', '=', 'k1').execute();
    } finally {
      await other.close();
    }
    expect(await q.first(store.db, 'sqlite', 'k1')).toEqual({ id: 'k1', name: 'third' });

    await store.db.deleteFrom('users').where('id', '=', 'k1').execute();
    expect(await q.first(store.db, 'sqlite', 'k1')).toBeUndefined();
  });

  it('sees a commit of a connection outside this process\'s store from the next event-loop turn on', async () => {
    const q = new PreparedQuery(1, (db, id: string) => db.selectFrom('users').select(['id', 'name']).where('id', '=', id));
    await store.db.insertInto('users').values({ id: 'k3', email: 'k3@example.com', name: 'before', created_at: new Date().toISOString() }).execute();
    expect(await q.first(store.db, 'sqlite', 'k3')).toEqual({ id: 'k3', name: 'before' });
    // a bare connection, as another process (slipway admin, a replica) has
    const outside = new SQLite(join(dir, 'slipway.db'));
    try {
      outside.prepare("UPDATE users SET name = 'after' WHERE id = 'k3'").run();
    } finally {
      outside.close();
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(await q.first(store.db, 'sqlite', 'k3')).toEqual({ id: 'k3', name: 'after' });
  });

  it('shares a kept answer frozen, so that one caller cannot change what the next one reads', async () => {
    const q = new PreparedQuery(1, (db, id: string) => db.selectFrom('users').select(['id', 'name']).where('id', '=', id));
    await store.db.insertInto('users').values({ id: 'k2', email: 'k2@example.com', name: 'kept', created_at: new Date().toISOString() }).execute();
    const row = await q.first(store.db, 'sqlite', 'k2');
    expect(() => { if (row !== undefined) (row as { name: string }).name = 'changed'; }).toThrow(TypeError);
    expect(await q.first(store.db, 'sqlite', 'k2')).toEqual({ id: 'k2', name: 'kept' });
  });
});
