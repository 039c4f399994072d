import { appendFileSync, chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nginxPaths } from '../../src/adapters/router/nginx.config.js';
import { NginxDriver } from '../../src/adapters/router/nginx.driver.js';
import { RouteTable } from '../../src/adapters/router/route-table.js';
import { closedPort } from '../factories/git-server.js';
import { freePort, sleep } from '../factories/process.js';

/**
 * Issue 10, item 4: the router's nginx error log was read whole on every reload and never
 * rotated. A start or a reload reads only what nginx wrote since it began, and the logs are
 * renamed to `.1` past a size (one old file kept) with nginx told to reopen them (USR1).
 */

const scratch = mkdtempSync(join(tmpdir(), 'slipway-nginx-logs-'));
// nginx workers drop to `nobody` when run as root and must reach their temp paths.
chmodSync(scratch, 0o755);
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

function get(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const read = (file: string): string => (existsSync(file) ? readFileSync(file, 'utf8') : '');

/** Waits (bounded) until `check` holds; the assertion that follows says what was expected. */
async function eventually(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !check(); i++) await sleep(50);
}

const junk = (tag: string): string => `2026/11/23 00:00:00 [emerg] 1#1: ${tag}\n`.repeat(100);

describe('the nginx router logs', () => {
  it('old error lines do not fail a later reload; past the size the logs rotate to .1 (one kept) and nginx writes the new file', async () => {
    const app = createServer((_req, res) => res.end('app'));
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    const live = { host: '127.0.0.1', port: (app.address() as { port: number }).port };
    const dead = { host: '127.0.0.1', port: await closedPort() };
    const dir = join(scratch, 'rotate');
    const paths = nginxPaths(dir);
    const driver = new NginxDriver({ listen: { host: '127.0.0.1', port: await freePort() }, dir, workerProcesses: 1, logRotateBytes: 4096 });
    try {
      await driver.start();
      appendFileSync(paths.errorLog, junk('first old failure'));
      await driver.apply(RouteTable.empty().setProject('p', { hosts: ['one.test'], upstreams: [live] }).setProject('d', { hosts: ['dead.test'], upstreams: [dead] }));
      expect((await get(driver.address().port, 'one.test')).body).toBe('app');
      expect(read(`${paths.errorLog}.1`)).toContain('first old failure');
      expect(read(paths.errorLog)).not.toContain('first old failure');

      // nginx reopened its logs: what it logs now goes to the new file, not the renamed one
      expect((await get(driver.address().port, 'dead.test')).status).toBe(502);
      await eventually(() => read(paths.errorLog).includes('connect() failed'));
      expect(read(paths.errorLog)).toContain('connect() failed');
      expect(read(`${paths.errorLog}.1`)).not.toContain('connect() failed');

      appendFileSync(paths.errorLog, junk('second old failure'));
      await driver.apply(RouteTable.empty().setProject('p', { hosts: ['two.test'], upstreams: [live] }));
      expect((await get(driver.address().port, 'two.test')).body).toBe('app');
      expect(read(`${paths.errorLog}.1`)).toContain('second old failure');
      expect(read(`${paths.errorLog}.1`)).not.toContain('first old failure');
      expect(existsSync(`${paths.errorLog}.2`)).toBe(false);
    } finally {
      await driver.stop();
      await new Promise((r) => app.close(r));
    }
  });

  it('a failed start names what nginx said this time, not the old lines of its logs', async () => {
    const taken = createTcpServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as { port: number }).port;
    const dir = join(scratch, 'taken');
    const paths = nginxPaths(dir);
    const first = new NginxDriver({ listen: { host: '127.0.0.1', port: await freePort() }, dir, workerProcesses: 1 });
    await first.start();
    await first.stop();
    appendFileSync(paths.errorLog, junk('old failure'));
    writeFileSync(paths.stderr, junk('old stderr failure'));
    const driver = new NginxDriver({ listen: { host: '127.0.0.1', port }, dir, workerProcesses: 1 });
    try {
      const err = await driver.start().then(() => undefined, (e: unknown) => e as Error);
      expect(err?.message).toMatch(/Address already in use/);
      expect(err?.message).not.toMatch(/old/);
    } finally {
      await driver.stop();
      await new Promise((r) => taken.close(r));
    }
  });
});
