// The disaster-recovery runbook (docs/operations.md#disaster-recovery), followed by the built
// launcher on SQLite and PostgreSQL: data made through the API, `slipway admin backup` while the
// server runs, the data dir (and the database) destroyed, `slipway admin restore` into a new data
// dir, and `slipway serve` on it: every workspace, key, project and sealed value is back.
// Needs `make build`.
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, keysIn, storeArgs, type Workspace } from '../factories/cli.js';
import { assertBuilt, killAll, runSlipway, waitFor } from '../factories/process.js';
import { startServed } from '../factories/served.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

beforeAll(assertBuilt);
afterAll(killAll);

describe.each(STORE_KINDS)('disaster recovery on %s', (kind) => {
  let db: TestDatabase;
  let restored: TestDatabase;
  const work = mkdtempSync(join(tmpdir(), 'slipway-dr-'));
  const archive = join(work, 'control-plane.slwcp');
  const pass = join(work, 'passphrase');
  const wrongPass = join(work, 'wrong-passphrase');
  beforeAll(async () => {
    db = await freshDatabase(kind);
    restored = await freshDatabase(kind);
    writeFileSync(pass, 'correct horse battery staple\n', { mode: 0o600 });
    writeFileSync(wrongPass, 'not the passphrase at all\n', { mode: 0o600 });
  });
  afterAll(async () => {
    await killAll();
    await db.drop();
    await restored.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('backs up while serving, and a new data dir restored from the archive serves every workspace, key, project and sealed value', async () => {
    const first = await startServed({ database: db });
    const owner = await first.bootstrapKey();
    const base = first.api;
    expect((await api(base, 'POST', '/api/workspaces', owner, { name: 'Acme', slug: 'acme' })).status).toBe(201);
    const key = await api<{ key: string }>(base, 'POST', '/api/workspaces/acme/api-keys', owner, { name: 'ci' });
    expect(key.status).toBe(201);
    const ciKey = key.body.data?.key ?? '';
    for (const name of ['web', 'worker']) expect((await api(base, 'POST', '/api/workspaces/acme/projects', owner, { name })).status).toBe(201);
    expect((await api(base, 'POST', '/api/workspaces/acme/projects/web/env', owner, { key: 'TOKEN', value: 'hush', is_secret: true })).status).toBe(201);
    expect((await api(base, 'PUT', '/api/workspaces/acme/projects/web/uptime', owner, { enabled: true, chat_webhook_url: 'https://hooks.example.com/dr-check' })).status).toBe(200);

    // the backup, while the server runs
    const made = await runSlipway(['admin', 'backup', ...storeArgs(db), '--out', archive, '--passphrase-file', pass]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toMatch(new RegExp(`^Wrote ${archive} \\(\\d+ bytes\\): the ${kind === 'sqlite' ? 'sqlite' : 'postgresql'} store with 2 workspaces, 1 users, 2 API keys, 2 projects, 0 databases; `));
    expect(made.stdout).toBe('');
    expect(statSync(archive).mode & 0o777).toBe(0o600);
    expect(keysIn(made.stderr)).toEqual([]);
    expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    // the disaster: the data dir (and the database) gone
    rmSync(db.dir, { recursive: true, force: true });
    await db.drop();

    const target = mkdtempSync(join(tmpdir(), 'slipway-dr-target-'));
    rmSync(target, { recursive: true });
    const targetArgs = ['--data-dir', target, ...(kind === 'postgres' ? ['--database-url', restored.url] : [])];
    // a wrong passphrase opens nothing and writes nothing
    const wrong = await runSlipway(['admin', 'restore', ...targetArgs, '--passphrase-file', wrongPass, archive]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toBe('slipway: the archive does not open with this passphrase (or it was changed since it was made).\n');
    const back = await runSlipway(['admin', 'restore', ...targetArgs, '--passphrase-file', pass, archive]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stderr).toMatch(/^Restored the (sqlite|postgresql) store of .* into .*: 2 workspaces, 1 users, 2 API keys, 2 projects, 0 databases, as in the archive's manifest\./);
    expect(statSync(join(target, 'secret.key')).mode & 0o777).toBe(0o600);
    // and never over a data dir that holds one
    const again = await runSlipway(['admin', 'restore', ...targetArgs, '--passphrase-file', pass, archive]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is not empty/);

    const second = await startServed({ database: { ...restored, dir: target } });
    const b2 = second.api;
    expect((await api<Workspace[]>(b2, 'GET', '/api/workspaces', owner)).body.data?.map((w) => w.slug).sort()).toEqual(['acme', 'default']);
    expect((await api<{ slug: string }[]>(b2, 'GET', '/api/workspaces/acme/projects', ciKey)).body.data?.map((p) => p.slug).sort()).toEqual(['web', 'worker']);
    expect((await api<{ key: string }[]>(b2, 'GET', '/api/workspaces/acme/projects/web/env', ciKey)).body.data?.map((e) => e.key)).toEqual(['TOKEN']);
    // a sealed value opens: the secret key came back with the store
    expect((await api<{ chat_webhook_url: string | null }>(b2, 'GET', '/api/workspaces/acme/projects/web/uptime', owner)).body.data?.chat_webhook_url).toBe('https://hooks.example.com/dr-check');
    await waitFor('no bootstrap on a restored store', () => (second.proc.stdout().includes('bootstrapped') ? undefined : true), second.proc);
    expect(keysIn(second.proc.stdout())).toEqual([]);
    expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  }, 120_000);
});
