import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../src/app/config.js';
import type { Clock } from '../../src/domain/clock.js';
import { RouteTable, type RouterDriver, type RouterLog } from '../../src/adapters/router/index.js';
import { createRouter } from '../../src/app/leader.js';
import { createStore, type Store } from '../../src/store/db.js';
import { createAcmeRouter, type CertificateManager } from '../../src/adapters/tls/index.js';
import { startPebble, type Pebble } from '../factories/pebble.js';
import { handshakes, httpsGet } from '../factories/tls.js';
import { freePort } from '../factories/process.js';

/**
 * The certificate manager against a real ACME CA (Debian's pebble, every name resolving to
 * 127.0.0.1 through pebble-challtestsrv), with the real nginx router answering HTTP-01 on the
 * port pebble validates and serving the certificates it got over HTTPS with SNI.
 */

const DAY = 86_400_000;
const scratch = mkdtempSync(join(tmpdir(), 'slipway-acme-'));
// nginx workers drop to `nobody` when run as root and must reach their temp paths.
chmodSync(scratch, 0o755);

let pebble: Pebble;
let routerPort: number;
let tlsPort: number;
let app: Server;
let appPort: number;

const lines: string[] = [];
const log: RouterLog = {
  info: (o, m) => lines.push(`info ${m} ${JSON.stringify(o)}`),
  warn: (o, m) => lines.push(`warn ${m} ${JSON.stringify(o)}`),
  error: (o, m) => lines.push(`error ${m} ${JSON.stringify(o)}`),
};
const logged = (msg: string, host: string) => lines.filter((l) => l.includes(msg) && l.includes(`"host":"${host}"`));

/** Time as the manager sees it: moved by the tests, never by the wall clock. */
class TestClock implements Clock {
  constructor(private t: number) {}
  now(): Date {
    return new Date(this.t);
  }
  set(d: Date | number): void {
    this.t = typeof d === 'number' ? d : d.getTime();
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

beforeAll(async () => {
  [routerPort, tlsPort] = await Promise.all([freePort(), freePort()]);
  const pebbleDir = join(scratch, 'pebble');
  mkdirSync(pebbleDir);
  pebble = await startPebble({ httpPort: routerPort, dir: pebbleDir });
  app = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ app: 'shop', host: req.headers.host, proto: req.headers['x-forwarded-proto'] }));
  });
  await new Promise<void>((resolve) => { app.listen(0, '127.0.0.1', resolve); });
  appPort = (app.address() as { port: number }).port;
});

afterAll(async () => {
  await pebble.stop();
  await new Promise<void>((resolve) => { app.close(() => { resolve(); }); });
  rmSync(scratch, { recursive: true, force: true });
});

function plain(port: number, host: string, path = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { body += d; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }); });
    });
    req.on('error', reject);
    req.end();
  });
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect({ host: '127.0.0.1', port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => { resolve(false); });
  });
}

async function seedDomain(store: Store, domain: string): Promise<void> {
  const now = new Date().toISOString();
  await store.db.insertInto('workspaces').values({ id: 'ws-1', name: 'Main', slug: 'main', settings: '{}', created_at: now, updated_at: now }).execute();
  await store.db
    .insertInto('projects')
    .values({ id: 'p-shop', workspace_id: 'ws-1', name: 'web', slug: 'web', port: 8080, replicas: 1, cpu: '0.5', ram: '0.5', status: 'running', created_at: now, updated_at: now, host_label: 'web-main' })
    .execute();
  await store.db.insertInto('domains').values({ id: 'd-1', project_id: 'p-shop', domain, verified: 1, verification_token: 'token', verified_at: now, created_at: now }).execute();
}


describe('ACME against pebble, through the nginx router', () => {
  const clock = new TestClock(Date.now());
  const custom = 'shop.example.com';
  const builtIn = 'web-main.apps.example.net';
  const tlsDir = join(scratch, 'data', 'tls');
  let store: Store;
  let router: RouterDriver;
  let manager: CertificateManager;
  let root: string;
  let table = RouteTable.empty();

  beforeAll(async () => {
    store = await createStore(join(scratch, 'slipway.db'));
    await seedDomain(store, custom);
    ({ router, manager } = createAcmeRouter(
      {
        driver: 'nginx',
        listen: { host: '127.0.0.1', port: routerPort },
        nginxDir: join(scratch, 'data', 'router'),
        tls: { listen: { host: '127.0.0.1', port: tlsPort } },
        log,
        nginx: { workerProcesses: 1 },
      },
      {
        directoryUrl: pebble.directoryUrl,
        ca: pebble.apiCa,
        email: 'ops@example.com',
        dir: tlsDir,
        clock,
        log,
        pollMinMs: 100,
        pollMaxMs: 1_000,
        // Long real-time timers: only the tests' check() calls run passes here.
        timing: { retryMinMs: 10 * 60_000, retryMaxMs: 60 * 60_000, checkEveryMs: 3_600_000 },
      },
    ));
    await router.start();
    root = await pebble.issuingRoot();
  });

  afterAll(async () => {
    await router.stop();
    await store.close();
  });

  it('orders a certificate when a host appears and serves it over HTTPS with SNI through nginx', async () => {
    table = table.setProject('p-shop', { hosts: [custom, builtIn], upstreams: [{ host: '127.0.0.1', port: appPort }] });
    await router.apply(table);
    // check() runs after the pass the new hosts started (apply() never waits for the CA).
    await manager.check();
    // Booleans, not the certificates: a failure message must not print a private key.
    expect(manager.certificate(custom) !== undefined, `${pebble.output()}\n${lines.join('\n')}`).toBe(true);
    expect(manager.certificate(builtIn) !== undefined).toBe(true);
    for (const host of [custom, builtIn]) {
      const r = await httpsGet(tlsPort, host, root);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ app: 'shop', host, proto: 'https' });
      expect(r.issuer).toMatch(/^Pebble Intermediate CA/);
    }
    expect(logged('tls: certificate issued', custom)).toHaveLength(1);
    // Plain HTTP is served as before: no redirect.
    expect(JSON.parse((await plain(routerPort, custom)).body)).toMatchObject({ proto: 'http' });
  });

  it('keeps the account key and the certificates under <data-dir>/tls, keys 0600, and never logs a key', () => {
    expect(statSync(tlsDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(tlsDir, 'account.key')).mode & 0o777).toBe(0o600);
    for (const host of [custom, builtIn]) {
      expect(statSync(join(tlsDir, 'certs', `${host}.key`)).mode & 0o777).toBe(0o600);
      expect(existsSync(join(tlsDir, 'certs', `${host}.crt`))).toBe(true);
    }
    const text = lines.join('\n');
    expect(text).not.toContain('PRIVATE KEY');
    const keyBody = manager.certificate(custom)?.privateKeyPem.split('\n')[1] ?? 'missing';
    expect(text).not.toContain(keyBody);
  });

  it('renews when less than 30 days are left, judged by the clock it is given', async () => {
    const first = manager.certificate(custom);
    if (first === undefined) throw new Error('no certificate from the first test');
    const servedSerial = (await httpsGet(tlsPort, custom, root)).serial;
    clock.set(first.notAfter.getTime() - 31 * DAY);
    await manager.check();
    expect(manager.certificate(custom) === first).toBe(true);
    clock.set(first.notAfter.getTime() - 29 * DAY);
    await manager.check();
    const renewed = manager.certificate(custom);
    expect(renewed !== undefined && renewed.certificatePem !== first.certificatePem).toBe(true);
    expect(logged('tls: certificate renewed', custom)).toHaveLength(1);
    // The next handshake gets the new certificate (nginx reloaded with it).
    expect((await httpsGet(tlsPort, custom, root)).serial).not.toBe(servedSerial);
    // Back to the present, where the renewed certificate (issued now, by the real CA) is young.
    clock.set(Date.now());
    await manager.check();
    expect(logged('tls: certificate renewed', custom)).toHaveLength(1);
  });

  it('logs a failed order, retries it with a doubling back-off, and routes the host over HTTP meanwhile', async () => {
    const host = 'broken.example.com';
    // The CA looks for the token at an address where nothing listens: validation fails.
    await pebble.resolve(host, '127.0.0.2');
    table = table.setProject('p-broken', { hosts: [host], upstreams: [{ host: '127.0.0.1', port: appPort }] });
    await router.apply(table);
    await manager.check();
    expect(manager.certificate(host) === undefined).toBe(true);
    const failed = () => logged('tls: certificate order failed', host);
    expect(failed()).toHaveLength(1);
    expect(failed()[0]).toContain('"retryInMs":600000');
    expect(JSON.parse((await plain(routerPort, host)).body)).toMatchObject({ app: 'shop', host });
    expect(await handshakes(tlsPort, host)).toBe(false);
    // Not before its time...
    clock.advance(9 * 60_000);
    await manager.check();
    expect(failed()).toHaveLength(1);
    // ...then again, with twice the wait.
    clock.advance(2 * 60_000);
    await manager.check();
    expect(failed()).toHaveLength(2);
    expect(failed()[1]).toContain('"retryInMs":1200000');
    // The name points here again: the next retry gets the certificate.
    await pebble.resolve(host, undefined);
    clock.advance(21 * 60_000);
    await manager.check();
    expect(manager.certificate(host) !== undefined).toBe(true);
    expect((await httpsGet(tlsPort, host, root)).status).toBe(200);
  });

  it('starts from the certificates on disk instead of ordering them again (here with the Node driver)', async () => {
    const before = manager.certificate(custom)?.certificatePem;
    const issuedBefore = lines.filter((l) => l.includes('tls: certificate issued') || l.includes('tls: certificate renewed')).length;
    const second = createAcmeRouter(
      { driver: 'node', listen: { host: '127.0.0.1', port: 0 }, nginxDir: join(scratch, 'unused'), tls: { listen: { host: '127.0.0.1', port: 0 } }, log },
      { directoryUrl: pebble.directoryUrl, ca: pebble.apiCa, dir: tlsDir, clock, log, timing: { checkEveryMs: 3_600_000 } },
    );
    await second.router.start();
    try {
      await second.router.apply(RouteTable.empty().setProject('p-shop', { hosts: [custom], upstreams: [{ host: '127.0.0.1', port: appPort }] }));
      await second.manager.check();
      expect(second.manager.certificate(custom)?.certificatePem === before).toBe(true);
      expect(lines.filter((l) => l.includes('tls: certificate issued') || l.includes('tls: certificate renewed')).length).toBe(issuedBefore);
      const port = second.router.tlsAddress?.()?.port ?? 0;
      const r = await httpsGet(port, custom, root);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toMatchObject({ proto: 'https' });
    } finally {
      await second.router.stop();
    }
  });
});

describe('the router as `slipway serve` builds it (createRouter)', () => {
  const clock = new TestClock(Date.now());
  let store: Store;
  beforeAll(async () => {
    store = await createStore(join(scratch, 'compose.db'));
  });
  afterAll(async () => {
    await store.close();
  });

  it('listens on nothing but plain HTTP with ACME off (the default)', async () => {
    const [plainPort, tls] = await Promise.all([freePort(), freePort()]);
    const dataDir = join(scratch, 'off');
    const config = resolveConfig({ 'data-dir': dataDir, router: 'nginx', 'router-listen': `127.0.0.1:${plainPort}`, 'router-tls-listen': `127.0.0.1:${tls}` }, {});
    expect(config.acme).toBeNull();
    const router = await createRouter(config, { store, clock }, log);
    await router.start();
    try {
      expect((await plain(plainPort, 'anything.test')).status).toBe(503);
      expect(await tcpOpen(tls)).toBe(false);
      expect((await plain(plainPort, 'anything.test', '/.well-known/acme-challenge/abc')).status).toBe(503);
      expect(existsSync(join(dataDir, 'tls'))).toBe(false);
    } finally {
      await router.stop();
    }
  });

  it('adds the TLS listener, the HTTP-01 responder and <data-dir>/tls with ACME on', async () => {
    const [plainPort, tls] = await Promise.all([freePort(), freePort()]);
    const dataDir = join(scratch, 'on');
    const caFile = join(scratch, 'pebble-api-ca.pem');
    writeFileSync(caFile, pebble.apiCa);
    const config = resolveConfig(
      { 'data-dir': dataDir, router: 'nginx', 'router-listen': `127.0.0.1:${plainPort}`, 'router-tls-listen': `127.0.0.1:${tls}`, 'acme-directory-url': pebble.directoryUrl, 'acme-ca-file': caFile },
      {},
    );
    const router = await createRouter(config, { store, clock }, log);
    await router.start();
    try {
      expect(await tcpOpen(tls)).toBe(true);
      expect(await handshakes(tls, 'anything.test')).toBe(false);
      expect((await plain(plainPort, 'anything.test', '/.well-known/acme-challenge/abc')).status).toBe(404);
      expect(statSync(join(dataDir, 'tls', 'account.key')).mode & 0o777).toBe(0o600);
    } finally {
      await router.stop();
    }
    expect(await tcpOpen(tls)).toBe(false);
  });

  it('refuses to start with an unreadable --acme-ca-file, naming it', async () => {
    const config = resolveConfig({ 'data-dir': join(scratch, 'bad'), 'acme-directory-url': 'https://127.0.0.1:1/dir', 'acme-ca-file': join(scratch, 'missing.pem') }, {});
    await expect(createRouter(config, { store, clock }, log)).rejects.toThrow(/ACME CA file .*missing\.pem \(--acme-ca-file\) cannot be read: ENOENT/);
  });
});
