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
