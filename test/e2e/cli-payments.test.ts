// The built launcher `bin/slipway`: the payment gateways off by default, the sandbox only when the
// operator turns it on, and `admin grant-credit`, on SQLite and PostgreSQL. Needs `make build`.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/db.js';
import { api, keysIn, serve, storeArgs } from '../factories/cli.js';
import { assertBuilt, killAll, runSlipway, waitFor } from '../factories/process.js';
import { startServed } from '../factories/served.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

beforeAll(assertBuilt);
afterAll(killAll);

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
