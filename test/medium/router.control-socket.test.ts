import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nginxPaths } from '../../src/adapters/router/nginx.config.js';
import { NginxDriver } from '../../src/adapters/router/nginx.driver.js';
import { RouteTable } from '../../src/adapters/router/route-table.js';
import { freePort } from '../factories/process.js';

/**
 * Issue 9, item 13: nginx makes its unix listeners 0666, so any local user could talk to the
 * router's control socket. It lives in a 0700 directory and is narrowed to 0600, and nginx
 * (workers that drop to nobody when run as root) still serves and reloads.
 */

const scratch = mkdtempSync(join(tmpdir(), 'slipway-ctl-'));
chmodSync(scratch, 0o755);
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

function get(port: number, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => {
        resolve(body);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('nginx control socket', () => {
  it('is owner-only (0600, in a 0700 directory) after start and after a reload, and nginx still serves', async () => {
    const app = createServer((_req, res) => res.end('app'));
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    const upstream = { host: '127.0.0.1', port: (app.address() as { port: number }).port };
    const dir = join(scratch, 'nginx');
    const driver = new NginxDriver({ listen: { host: '127.0.0.1', port: await freePort() }, dir, workerProcesses: 1 });
    const paths = nginxPaths(dir);
    try {
      await driver.start();
      expect(statSync(paths.controlDir).mode & 0o777).toBe(0o700);
      expect(statSync(paths.control).isSocket()).toBe(true);
      expect(statSync(paths.control).mode & 0o777).toBe(0o600);
      await driver.apply(RouteTable.empty().setProject('p', { hosts: ['one.test'], upstreams: [upstream] }));
      expect(await get(driver.address().port, 'one.test')).toBe('app');
      await driver.apply(RouteTable.empty().setProject('p', { hosts: ['two.test'], upstreams: [upstream] }));
      expect(await get(driver.address().port, 'two.test')).toBe('app');
      expect(statSync(paths.control).mode & 0o777).toBe(0o600);
      expect(statSync(paths.controlDir).mode & 0o777).toBe(0o700);
    } finally {
      await driver.stop();
      await new Promise((r) => app.close(r));
    }
  });
});
