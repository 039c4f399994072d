// The built launcher `bin/slipway` as a user runs it: the first start's bootstrap key, the secret
// key file, and `admin create-user` / `verify-user` beside a running server, on SQLite and PostgreSQL.
// Needs `make build`.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iso, systemClock } from '../../src/domain/clock.js';
import { createStore } from '../../src/store/db.js';
import { api, keysIn, mode, ONLY_KEY, serve, storeArgs, type Workspace } from '../factories/cli.js';
import { assertBuilt, freePort, killAll, runSlipway, waitFor } from '../factories/process.js';
import { serveArgs } from '../factories/served.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

beforeAll(assertBuilt);
afterAll(killAll);

describe.each(STORE_KINDS)('bootstrap and admin create-user on %s', (kind) => {
  let db: TestDatabase;
  let key = '';
  let running = '';
  beforeAll(async () => {
    db = await freshDatabase(kind);
  });
  afterAll(async () => {
    await killAll();
    await db.drop();
  });

  it('prints exactly one key on the first start, saves it with mode 0600, and the key works', async () => {
    const { proc, base } = await serve(db);
    key = await waitFor('the bootstrap key on stdout', () => keysIn(proc.stdout())[0], proc);
    const listed = await api<Workspace[]>(base, 'GET', '/api/workspaces', key);
    expect(listed.status).toBe(200);
    expect(listed.body.data?.map((w) => [w.slug, w.role])).toEqual([['default', 'owner']]);
    expect(await api(base, 'GET', '/api/workspaces')).toMatchObject({ status: 401 });

    expect(readFileSync(join(db.dir, 'bootstrap-key'), 'utf8').trim()).toBe(key);
    expect(mode(join(db.dir, 'bootstrap-key'))).toBe(0o600);
    expect(readFileSync(join(db.dir, 'secret.key'), 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
    expect(mode(join(db.dir, 'secret.key'))).toBe(0o600);
    expect(existsSync(join(db.dir, 'slipway.db'))).toBe(kind === 'sqlite');

    // SIGTERM shuts down cleanly; afterwards the whole of stdout is known.
    expect(await proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(keysIn(proc.stdout())).toEqual([key]);
  });

  it('prints no key on a second start and the first key still works', async () => {
    const secret = readFileSync(join(db.dir, 'secret.key'), 'utf8');
    const { proc, base } = await serve(db);
    const listed = await api<Workspace[]>(base, 'GET', '/api/workspaces', key);
    expect(listed.status).toBe(200);
    expect(listed.body.data?.map((w) => w.slug)).toEqual(['default']);
    expect(await proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(keysIn(proc.stdout())).toEqual([]);
    expect(proc.stdout()).not.toContain('bootstrapped');
    expect(readFileSync(join(db.dir, 'bootstrap-key'), 'utf8').trim()).toBe(key);
    expect(readFileSync(join(db.dir, 'secret.key'), 'utf8')).toBe(secret);
  });

  it('refuses to start with a new secret key when the store holds values sealed with the lost one', async () => {
    const { proc, base } = await serve(db);
    await api(base, 'POST', '/api/workspaces/default/projects', key, { name: 'sealed' });
    const env = await api(base, 'POST', '/api/workspaces/default/projects/sealed/env', key, { key: 'TOKEN', value: 'hush', is_secret: true });
    expect(env.status).toBe(201);
    await proc.stop('SIGTERM');
    const keyFile = join(db.dir, 'secret.key');
    const secret = readFileSync(keyFile, 'utf8');
    rmSync(keyFile);
    const port = await freePort();
    const r = await runSlipway(serveArgs({ database: db, port }));
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`slipway: the secret key file ${keyFile} is missing, but the store holds values encrypted with it; restore the file (see docs/operations.md) instead of starting with a new key.\n`);
    expect(existsSync(keyFile)).toBe(false);
    // Restoring the file is all it takes.
    writeFileSync(keyFile, secret, { mode: 0o600 });
    const again = await serve(db);
    expect((await api(again.base, 'GET', '/api/workspaces/default/projects/sealed/env', key)).status).toBe(200);
    await again.proc.stop('SIGTERM');
  });

  it('admin create-user, run next to the server, prints a key that acts with the given role', async () => {
    const { base } = await serve(db);
    running = base;
    const alice = await runSlipway(['admin', 'create-user', '--email', 'alice@example.com', ...storeArgs(db)]);
    expect(alice.code).toBe(0);
    expect(alice.stdout).toMatch(ONLY_KEY);
    expect(alice.stderr).toMatch(/^Created user [0-9a-f-]{36}; the key expires at \d{4}-/);
    const aliceKey = alice.stdout.trim();
    const own = await api<Workspace>(base, 'GET', '/api/workspaces/default', aliceKey);
    expect(own.status).toBe(200);
    expect(own.body.data).toMatchObject({ slug: 'default', role: 'member' });

    expect((await api(base, 'POST', '/api/workspaces', key, { name: 'Team', slug: 'team' })).status).toBe(201);
    const bob = await runSlipway(['admin', 'create-user', '--email', 'bob@example.com', '--workspace', 'team', '--role', 'admin', ...storeArgs(db)]);
    expect(bob.code).toBe(0);
    expect(bob.stdout).toMatch(ONLY_KEY);
    const bobKey = bob.stdout.trim();
    expect((await api<Workspace>(base, 'GET', '/api/workspaces/team', bobKey)).body.data).toMatchObject({ slug: 'team', role: 'admin' });
    const bobs = await api<Workspace[]>(base, 'GET', '/api/workspaces', bobKey);
    expect(bobs.body.data?.map((w) => [w.slug, w.role])).toEqual([['team', 'admin']]);
    expect((await api(base, 'GET', '/api/workspaces/default', bobKey)).status).toBe(404);
  });

  it.each([
    [['--email', 'ALICE@Example.com'], /^slipway: A user with e-mail alice@example\.com already exists\.\n$/],
    [['--email', 'admin@localhost'], /^slipway: A user with e-mail admin@localhost already exists\.\n$/],
    [['--email', 'carol@example.com', '--workspace', 'nope'], /^slipway: There is no workspace "nope"\.\n$/],
    [['--email', 'dave@example.com', '--role', 'superuser'], /^slipway: --role must be one of owner, admin, member \(got "superuser"\)\.\n$/],
    [['--email', 'not-an-email'], /^slipway: --email must be an e-mail address/],
  ])('admin create-user %j exits 2 with a clear message', async (args, message) => {
    const r = await runSlipway(['admin', 'create-user', ...args, ...storeArgs(db)]);
    expect(r.stderr).toMatch(message);
    expect(r).toMatchObject({ code: 2, stdout: '' });
  });

  it('admin create-user touches only the store: no log store, no secret key file in a data directory without them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slipway-admin-'));
    try {
      const store = await createStore(kind === 'postgres' ? db.url : join(dir, 'slipway.db'));
      try {
        await store.db.insertInto('workspaces').values({ id: 'w-admin', slug: 'ops', name: 'Ops', settings: '{}', created_at: iso(systemClock.now()), updated_at: iso(systemClock.now()) }).execute();
      } finally {
        await store.close();
      }
      const r = await runSlipway(['admin', 'create-user', '--email', 'ops@localhost', '--workspace', 'ops', '--data-dir', dir, ...(kind === 'postgres' ? ['--database-url', db.url] : [])]);
      expect(r.stderr).toMatch(/^Created user/);
      expect(r).toMatchObject({ code: 0, stdout: expect.stringMatching(ONLY_KEY) });
      expect(existsSync(join(dir, 'logs.db'))).toBe(false);
      expect(existsSync(join(dir, 'secret.key'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('accepts an e-mail refused only for its workspace, here as a second owner', async () => {
    const r = await runSlipway(['admin', 'create-user', '--email', 'carol@example.com', '--role', 'owner', ...storeArgs(db)]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(ONLY_KEY);
    const got = await api<Workspace>(running, 'GET', '/api/workspaces/default', r.stdout.trim());
    expect(got.body.data).toMatchObject({ slug: 'default', role: 'owner' });
  });

  it('admin verify-user lets a user made from a handed-back invitation token create a workspace, with the starting credit', async () => {
    const inv = await api<{ token: string }>(running, 'POST', '/api/workspaces/default/invitations', key, { email: 'dan@example.com', role: 'member' });
    expect(inv.status).toBe(201);
    const accepted = await api<{ key: string }>(running, 'POST', '/api/invitations/accept', undefined, { token: inv.body.data?.token });
    expect(accepted.status).toBe(201);
    const danKey = accepted.body.data?.key ?? '';
    const refused = await api(running, 'POST', '/api/workspaces', danKey, { name: 'Dan', slug: 'dan' });
    expect(refused).toMatchObject({ status: 403, body: { error: expect.stringContaining('slipway admin verify-user --email dan@example.com') } });

    const r = await runSlipway(['admin', 'verify-user', '--email', 'Dan@Example.com', ...storeArgs(db)]);
    expect(r).toMatchObject({ code: 0, stdout: '' });
    expect(r.stderr).toMatch(/^Verified user [0-9a-f-]{36} \(dan@example\.com\)\.\n$/);
    // the running server sees it at once: the check reads the store, not a cache
    expect((await api(running, 'POST', '/api/workspaces', danKey, { name: 'Dan', slug: 'dan' })).status).toBe(201);
    expect((await api<{ balance: number }>(running, 'GET', '/api/workspaces/dan/wallet', danKey)).body.data?.balance).toBe(500);

    const again = await runSlipway(['admin', 'verify-user', '--email', 'dan@example.com', ...storeArgs(db)]);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/^User [0-9a-f-]{36} \(dan@example\.com\) was already verified, at \d{4}-/);
    expect(await runSlipway(['admin', 'verify-user', '--email', 'nobody@example.com', ...storeArgs(db)])).toMatchObject({ code: 2, stdout: '', stderr: 'slipway: There is no user with e-mail nobody@example.com.\n' });
  });
});
