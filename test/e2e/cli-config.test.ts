// The built launcher `bin/slipway`: configuration errors (exit 2, the setting named), the operator's
// metrics listener, a taken port, flags over variables. Needs `make build`.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keysIn } from '../factories/cli.js';
import { assertBuilt, freePort, killAll, runSlipway, startSlipway, waitFor, waitHealthy } from '../factories/process.js';
import { startServed } from '../factories/served.js';

beforeAll(assertBuilt);
afterAll(killAll);

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
