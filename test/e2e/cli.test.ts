// The built launcher `bin/slipway`, run as child processes: what a user sees on stdout, stderr,
// in the exit code, in the data directory and through the API. Needs `npx tsc -p tsconfig.build.json`.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idSource, iso, systemClock, systemRandom } from '../../src/domain/clock.js';
import { createStore, type Store } from '../../src/store/db.js';
import { assertBuilt, freePort, killAll, runSlipway, sleep, startSlipway, waitFor, waitHealthy, type SlipwayProcess } from '../factories/process.js';
import { serveArgs, startServed } from '../factories/served.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

const KEYS = /svc_sk_[0-9a-f]{40}/g;
const ONLY_KEY = /^svc_sk_[0-9a-f]{40}\n$/;

interface Envelope<T> {
  success: boolean;
  data?: T;
  error?: string;
}
interface Workspace {
  slug: string;
  role?: string;
}

async function api<T>(base: string, method: string, path: string, key?: string, body?: unknown): Promise<{ status: number; body: Envelope<T> }> {
  const headers: Record<string, string> = key === undefined ? {} : { 'x-api-key': key };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: (await res.json()) as Envelope<T> };
}

const mode = (file: string): number => statSync(file).mode & 0o777;
const keysIn = (text: string): string[] => text.match(KEYS) ?? [];
const storeArgs = (db: TestDatabase): string[] => ['--data-dir', db.dir, ...(db.kind === 'postgres' ? ['--database-url', db.url] : [])];

/** `slipway serve` over the test's store (the shared fixture, served.ts), its API as `base`. */
async function serve(db: TestDatabase): Promise<{ proc: SlipwayProcess; base: string }> {
  const { proc, api } = await startServed({ database: db });
  return { proc, base: api };
}

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

describe.each(STORE_KINDS)('payments on %s: the gateways off by default, the sandbox only when turned on, admin grant-credit', (kind) => {
  let db: TestDatabase;
  let key = '';
  beforeAll(async () => {
    db = await freshDatabase(kind);
  });
  afterAll(async () => {
    await killAll();
    await db.drop();
  });

  interface LogLine {
    level: number;
    msg: string;
    gateways?: string[];
  }
  const logLines = (stdout: string): LogLine[] =>
    stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
  const sandboxWarnings = (stdout: string) => logLines(stdout).filter((l) => l.msg.startsWith('payments sandbox is on'));
  const balance = async (base: string) => (await api<{ balance: number }>(base, 'GET', '/api/workspaces/default/wallet', key)).body.data?.balance;

  it('by default both top-up paths answer 503 naming the settings, credit nothing, and no sandbox is announced', { timeout: 90_000 }, async () => {
    const { proc, base } = await serve(db);
    key = await waitFor('the bootstrap key on stdout', () => keysIn(proc.stdout())[0], proc);
    const a = await api(base, 'POST', '/api/workspaces/default/wallet/topup/gatewaya', key, { amount: 10_000 });
    expect(a).toEqual({
      status: 503,
      body: { success: false, error: 'Top-ups through gatewaya are not available on this installation: its operator has configured no payment gateway for it (--stripe-secret-key with --stripe-webhook-secret (Stripe)) and has not turned on the sandbox (--payments sandbox).' },
    });
    const b = await api(base, 'POST', '/api/workspaces/default/wallet/topup/gatewayb', key, { amount: 1_000_000 });
    expect(b.status).toBe(503);
    expect(b.body.error).toContain('(--paystack-secret-key (Paystack))');
    expect(await balance(base)).toBe(500);
    expect(await proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(sandboxWarnings(proc.stdout())).toEqual([]);
  });

  it('with --payments sandbox every start logs one warning and the sandbox credits at once', { timeout: 90_000 }, async () => {
    for (const turnOn of [['--payments', 'sandbox'], []]) {
      const { proc, api: base } = await startServed({ database: db, args: turnOn, env: turnOn.length === 0 ? { SLIPWAY_PAYMENTS: 'sandbox' } : {} });
      const warnings = sandboxWarnings(proc.stdout());
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 40, gateways: ['gatewaya', 'gatewayb'] });
      expect(warnings[0]?.msg).toContain('WITHOUT ANY PAYMENT');
      const before = (await balance(base)) ?? NaN;
      const r = await api<{ status: string; provider: string }>(base, 'POST', '/api/workspaces/default/wallet/topup/gatewaya', key, { amount: 10 });
      expect(r.status).toBe(200);
      expect(r.body.data).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
      expect(await balance(base)).toBe(before + 1000);
      expect(await proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    }
  });

  it('admin grant-credit, run next to the server, credits the wallet with one ledger row of type grant and says so', { timeout: 90_000 }, async () => {
    const { proc, base } = await serve(db);
    const before = (await balance(base)) ?? NaN;
    const r = await runSlipway(['admin', 'grant-credit', '--workspace', 'default', '--amount', '12.50', '--reason', 'support ticket 42', ...storeArgs(db)]);
    expect(r.stdout).toBe('');
    expect(r.code).toBe(0);
    const after = before + 1250;
    const fmt = (minor: number) => `${Math.floor(minor / 100).toString()}.${(minor % 100).toString().padStart(2, '0')}`;
    expect(r.stderr).toMatch(new RegExp(`^Granted 12\\.50 USD to workspace default: its balance is now ${fmt(after).replace('.', '\\.')} USD \\(ledger row [0-9a-f-]{36}, type grant, \\d{4}-\\d\\d-\\d\\dT[^)]+\\)\\.\\n$`));
    expect(await balance(base)).toBe(after);
    const tx = await api<{ transactions: { id: string; type: string; amount: number; balance_after: number; description: string }[] }>(base, 'GET', '/api/workspaces/default/wallet/transactions', key);
    expect(tx.body.data?.transactions[0]).toMatchObject({ type: 'grant', amount: 1250, balance_after: after, description: 'Credit granted by the operator: support ticket 42' });
    expect(r.stderr).toContain(tx.body.data?.transactions[0]?.id ?? 'missing');
    // the sandbox stays off on this server: the grant is the only way credit came
    expect((await api(base, 'POST', '/api/workspaces/default/wallet/topup/gatewayb', key, { amount: 1000 })).status).toBe(503);
    await proc.stop('SIGTERM');
  });

  it.each([
    [['--workspace', 'default', '--amount', '0.999999999'], /^slipway: --amount must be a positive amount in major units of USD with at most 2 decimals, like 25 or 12\.50 \(got "0\.999999999"\)\.\n$/],
    [['--workspace', 'default', '--amount', '1.005'], /^slipway: --amount must be a positive amount in major units of USD with at most 2 decimals/],
    [['--workspace', 'default', '--amount', '0'], /^slipway: --amount must be a positive amount in major units of USD/],
    [['--workspace', 'default', '--amount', '1e3'], /^slipway: --amount must be a positive amount in major units of the wallet's currency, like 25 or 12\.50 \(got "1e3"\)\.\n$/],
    [['--workspace', 'default', '--amount', '99999999999'], /^slipway: --amount 99999999999 would take the balance of workspace "default" past what Slipway keeps exactly; grant less\.\n$/],
    [['--workspace', 'nope', '--amount', '5'], /^slipway: There is no workspace "nope"\.\n$/],
    [['--workspace', 'default', '--amount', '5', '--reason', 'two\nlines'], /^slipway: --reason must be one line of at most 500 characters\.\n$/],
  ])('admin grant-credit %j exits 2 with a clear message and writes nothing', async (args, message) => {
    const store = await createStore(kind === 'postgres' ? db.url : join(db.dir, 'slipway.db'));
    const rows = async () => (await store.db.selectFrom('wallet_transactions').select('id').execute()).length;
    try {
      const before = await rows();
      const r = await runSlipway(['admin', 'grant-credit', ...args, ...storeArgs(db)]);
      expect(r.stderr).toMatch(message);
      expect(r).toMatchObject({ code: 2, stdout: '' });
      expect(await rows()).toBe(before);
    } finally {
      await store.close();
    }
  });
});

describe('configuration errors', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'slipway-cli-'));
  });
  afterEach(killAll);
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    [['--listen', 'nonsense'], {}, /--listen must be \[host\]:port, like :3000 or 127\.0\.0\.1:3000 \(got "nonsense"\)/],
    [['--listen', '127.0.0.1:70000'], {}, /--listen must be \[host\]:port/],
    [['--log-level', 'loud'], {}, /--log-level must be one of fatal, error, warn, info, debug, trace, silent/],
    [[], { SLIPWAY_LISTEN: 'bad' }, /SLIPWAY_LISTEN must be \[host\]:port, like :3000 or 127\.0\.0\.1:3000 \(got "bad"\)/],
    [[], { SLIPWAY_LOG_LEVEL: 'loud' }, /SLIPWAY_LOG_LEVEL must be one of/],
    [['--database-url', 'mysql://db/x'], {}, /--database-url must be a postgres:\/\/ URL or an SQLite file path \(got a mysql URL\)/],
    [['--rate-limit', '0'], {}, /--rate-limit must be a positive number \(got "0"\)/],
    [[], { SLIPWAY_ADMIN_EMAIL: 'nobody' }, /SLIPWAY_ADMIN_EMAIL must be an e-mail address/],
  ])('serve %j with env %j exits 2 and names the setting', async (args, env: Record<string, string>, message) => {
    const data = mkdtempSync(join(dir, 'd-'));
    const r = await runSlipway(['serve', ...args, '--data-dir', data], env);
    expect(r.stderr).toMatch(/^slipway: Invalid configuration:\n {2}- /);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(2);
    expect(existsSync(join(data, 'slipway.db'))).toBe(false);
  });

  it('reports every problem at once', async () => {
    const r = await runSlipway(['serve', '--listen', 'nonsense', '--log-level', 'loud', '--data-dir', dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--listen must be');
    expect(r.stderr).toContain('--log-level must be');
  });

  it('admin create-user validates the configuration too', async () => {
    const r = await runSlipway(['admin', 'create-user', '--email', 'e@example.com', '--data-dir', dir], { SLIPWAY_LOG_LEVEL: 'loud' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/SLIPWAY_LOG_LEVEL must be one of/);
  });

  it('serves /metrics on the operator\'s loopback listener, not on the API (issue 26 item 8)', async () => {
    const metricsPort = await freePort();
    const { proc, api: base } = await startServed({ dataDir: mkdtempSync(join(dir, 'm-')), env: { SLIPWAY_METRICS_LISTEN: `127.0.0.1:${metricsPort.toString()}` } });
    const onApi = await fetch(`${base}/metrics`);
    expect(onApi.status).toBe(404);
    expect(((await onApi.json()) as { error: string }).error).toMatch(/^Metrics are served to the operator only/);
    const metrics = await fetch(`http://127.0.0.1:${metricsPort.toString()}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('slipway_http_request_duration_seconds');
    expect(proc.stdout()).toContain(`metrics for the operator at http://127.0.0.1:${metricsPort.toString()}/metrics`);
  });

  it('refuses a taken metrics port before bootstrapping, naming --metrics-listen', async () => {
    const blocker = createServer();
    const taken = await new Promise<number>((resolve) => blocker.listen(0, '127.0.0.1', () => { resolve((blocker.address() as AddressInfo).port); }));
    const data = mkdtempSync(join(dir, 'mb-'));
    try {
      const r = await runSlipway(['serve', '--listen', `127.0.0.1:${(await freePort()).toString()}`, '--data-dir', data], { SLIPWAY_METRICS_LISTEN: `127.0.0.1:${taken.toString()}` });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/cannot listen for metrics on 127\.0\.0\.1:\d+ \(--metrics-listen; off turns it off\): EADDRINUSE\./);
      expect(existsSync(join(data, 'bootstrap-key'))).toBe(false);
    } finally {
      blocker.close();
    }
  });

  it('lets a flag win over its environment variable', async () => {
    const { proc } = await startServed({ dataDir: mkdtempSync(join(dir, 'f-')), args: ['--log-level', 'warn'], env: { SLIPWAY_LISTEN: 'bad', SLIPWAY_LOG_LEVEL: 'loud' } });
    expect(proc.exit()).toBeNull();
  });

  it('refuses a taken port before bootstrapping, so the first key is shown on the next start', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const taken = (blocker.address() as AddressInfo).port;
    const data = mkdtempSync(join(dir, 'busy-'));
    try {
      const r = await runSlipway(['serve', '--listen', `127.0.0.1:${taken.toString()}`, '--data-dir', data]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^slipway: cannot listen on 127\.0\.0\.1:\d+: EADDRINUSE\.\n$/);
      expect(existsSync(join(data, 'bootstrap-key'))).toBe(false);
    } finally {
      blocker.close();
    }
    const { proc } = await startServed({ dataDir: data });
    await waitFor('the bootstrap key on stdout', () => keysIn(proc.stdout())[0], proc);
    expect(readFileSync(join(data, 'bootstrap-key'), 'utf8')).toBe(`${keysIn(proc.stdout())[0] ?? 'missing'}\n`);
  });

  it('uses an environment variable when no flag is given', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const data = mkdtempSync(join(dir, 'e-'));
    const proc = startSlipway(['serve'], { SLIPWAY_LISTEN: `127.0.0.1:${port}`, SLIPWAY_DATA_DIR: data });
    await waitHealthy(proc, base);
    expect(existsSync(join(data, 'bootstrap-key'))).toBe(true);
  });
});

// ---- kill -9 in the middle of a workspace delete ----------------------------------------------

/** The workspace row and the rows that hang off it (users are not the workspace's). */
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
