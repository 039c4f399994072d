// The built launcher `bin/slipway`, killed with SIGKILL in the middle of a workspace delete: the
// store keeps all of the workspace or none of it, on SQLite and PostgreSQL. Needs `make build`.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idSource, iso, systemClock, systemRandom } from '../../src/domain/clock.js';
import { createStore, type Store } from '../../src/store/db.js';
import { api, keysIn, serve } from '../factories/cli.js';
import { assertBuilt, killAll, sleep, waitFor } from '../factories/process.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

beforeAll(assertBuilt);
afterAll(killAll);

type Counts = Record<'workspaces' | 'members' | 'invitations' | 'api_keys', number>;

async function countWorkspace(store: Store, workspaceId: string): Promise<Counts> {
  const n = async (table: string, column: string): Promise<number> => {
    const r = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)} where ${sql.ref(column)} = ${workspaceId}`.execute(store.db);
    return Number(r.rows[0]?.n);
  };
  return { workspaces: await n('workspaces', 'id'), members: await n('members', 'workspace_id'), invitations: await n('invitations', 'workspace_id'), api_keys: await n('api_keys', 'workspace_id') };
}

function chunks<T>(rows: T[], size = 500): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
  return out;
}

const ROWS = 3000;
const USERS = 300;

/** Fills the workspace straight through the store (the server keeps running); answers its id and counts. */
async function fill(url: string, slug: string): Promise<{ id: string; counts: Counts }> {
  const store = await createStore(url);
  try {
    const ids = idSource(systemClock, systemRandom);
    const hex = (): string => randomBytes(32).toString('hex');
    const now = iso(new Date());
    const later = iso(new Date(Date.now() + 7 * 86_400_000));
    const ws = await store.db.selectFrom('workspaces').select('id').where('slug', '=', slug).executeTakeFirstOrThrow();
    const users = Array.from({ length: USERS }, (_, i) => ({ id: ids.id(), email: `${slug}-${i}-${hex().slice(0, 8)}@example.com`, name: `u${i}`, created_at: now }));
    const userId = (i: number): string => users[i % USERS]?.id ?? '';
    await store.db.transaction().execute(async (trx) => {
      for (const part of chunks(users)) await trx.insertInto('users').values(part).execute();
      for (const part of chunks(users.map((u) => ({ workspace_id: ws.id, user_id: u.id, role: 'member' as const, joined_at: now })))) {
        await trx.insertInto('members').values(part).execute();
      }
      const invitations = Array.from({ length: ROWS }, (_, i) => ({
        id: ids.id(), workspace_id: ws.id, email: `inv-${i}@example.com`, role: 'member' as const, token_hash: hex(),
        status: 'pending' as const, invited_by: userId(i), expires_at: later, created_at: now, accepted_at: null,
      }));
      for (const part of chunks(invitations)) await trx.insertInto('invitations').values(part).execute();
      const keys = Array.from({ length: ROWS }, (_, i) => ({
        id: ids.id(), user_id: userId(i), workspace_id: ws.id, name: `k${i}`, key_hash: hex(), key_prefix: 'svc_sk_000000...',
        expires_at: later, created_at: now, last_used_at: null, revoked_at: null,
      }));
      for (const part of chunks(keys)) await trx.insertInto('api_keys').values(part).execute();
    });
    return { id: ws.id, counts: await countWorkspace(store, ws.id) };
  } finally {
    await store.close();
  }
}

async function countsAfterCrash(url: string, workspaceId: string): Promise<Counts> {
  const store = await createStore(url);
  try {
    return await countWorkspace(store, workspaceId);
  } finally {
    await store.close();
  }
}

describe.each(STORE_KINDS)('kill -9 during a workspace delete on %s', (kind) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await freshDatabase(kind);
  });
  afterEach(killAll);
  afterAll(async () => {
    await db.drop();
  });

  it('leaves either the whole workspace or nothing of it, and the store opens again', { timeout: 180_000 }, async () => {
    const url = kind === 'sqlite' ? join(db.dir, 'slipway.db') : db.url;
    let key = '';
    for (const [attempt, delay] of [0, 8, 16, 30].entries()) {
      const { proc, base } = await serve(db);
      if (attempt === 0) key = await waitFor('the bootstrap key', () => keysIn(proc.stdout())[0], proc);
      const slug = `crash-${attempt}`;
      expect((await api(base, 'POST', '/api/workspaces', key, { name: slug, slug })).status).toBe(201);
      const { id, counts } = await fill(url, slug);
      expect(counts).toEqual({ workspaces: 1, members: USERS + 1, invitations: ROWS, api_keys: ROWS });

      const reply = fetch(`${base}/api/workspaces/${slug}`, { method: 'DELETE', headers: { 'x-api-key': key } }).then(
        (r) => r.status,
        () => null,
      );
      // Kill shortly after the server has logged the request, so that some kills land inside the delete.
      await proc.untilStdout(`"method":"DELETE","url":"/api/workspaces/${slug}"`);
      await sleep(delay);
      expect(await proc.stop('SIGKILL')).toMatchObject({ signal: 'SIGKILL' });
      const status = await reply;

      const after = await countsAfterCrash(url, id);
      const gone: Counts = { workspaces: 0, members: 0, invitations: 0, api_keys: 0 };
      expect([counts, gone], `attempt ${attempt} (delay ${delay} ms, reply ${String(status)})`).toContainEqual(after);
      // A delete the server confirmed is never lost.
      if (status === 200) expect(after).toEqual(gone);
    }

    const { base } = await serve(db);
    const ready = await api<{ status: string }>(base, 'GET', '/readyz');
    expect(ready).toEqual({ status: 200, body: { success: true, data: { status: 'ready' } } });
    expect((await api(base, 'GET', '/api/workspaces', key)).status).toBe(200);
    expect(readFileSync(join(db.dir, 'bootstrap-key'), 'utf8').trim()).toBe(key);
  });
});
