import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { AcmeChallenges } from '../../src/adapters/router/acme-challenges.js';
import { PAGES } from '../../src/adapters/router/pages.js';
import { RouteTable, type Upstream } from '../../src/adapters/router/route-table.js';
import type { RouterDriver, RouterLog, TlsCertificate, TlsOptions } from '../../src/adapters/router/router.js';
import { NodeProxyDriver } from '../../src/adapters/router/node-proxy.driver.js';
import { findNginx, NginxDriver } from '../../src/adapters/router/nginx.driver.js';
import { freePort } from '../factories/process.js';
import { handshakes, httpsCall, makeCa, makeLeaf, type TestCa, type TestLeaf } from '../factories/tls.js';

/**
 * What Slipway needs from a router data plane, checked on real HTTP with real upstreams on
 * loopback: every driver passes this file unchanged. nginx is not optional here: `make test`
 * installs it, and a machine without it fails the nginx suite instead of skipping it.
 */

const scratch = mkdtempSync(join(tmpdir(), 'slipway-router-'));
// nginx workers drop to `nobody` when run as root and must reach their temp paths.
chmodSync(scratch, 0o755);
afterAll(() => { rmSync(scratch, { recursive: true, force: true }); });

// ---------------------------------------------------------------------------------------------
// Upstreams: small node:http apps, each answering with its name

interface TestUpstream extends Upstream {
  name: string;
  served: number;
  /** resolves the next /stream response's second half */
  releaseStream(): void;
  close(): Promise<void>;
}

const upstreams = new Set<TestUpstream>();
afterAll(async () => { await Promise.all([...upstreams].map((u) => u.close())); });

async function startUpstream(name: string): Promise<TestUpstream> {
  let release: () => void = () => undefined;
  let gate = new Promise<void>((r) => { release = r; });
  const server = createServer((req, res) => {
    u.served += 1;
    const path = req.url ?? '/';
    if (path === '/headers') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(req.headers));
    } else if (path === '/stream') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('chunk-1\n');
      void gate.then(() => {
        gate = new Promise<void>((r) => { release = r; });
        res.end('chunk-2\n');
      });
    } else if (path === '/count') {
      let n = 0;
      req.on('data', (c: Buffer) => { n += c.length; });
      req.on('end', () => { res.end(`${name}:${n}`); });
    } else {
      res.end(name);
    }
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req: IncomingMessage, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data: Buffer) => { ws.send(`${name}:${data.toString('utf8')}`); });
    });
  });
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  const port = (server.address() as { port: number }).port;
  let closing: Promise<void> | undefined;
  const u: TestUpstream = {
    name,
    host: '127.0.0.1',
    port,
    served: 0,
    releaseStream: () => { release(); },
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        // Graceful, like an app on SIGTERM: requests in flight finish, idle connections close.
        server.close(() => { resolve(); });
      });
      return closing;
    },
  };
  upstreams.add(u);
  return u;
}

// ---------------------------------------------------------------------------------------------
// Clients

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** sent again after a keep-alive connection closed under it (see `retryStale`) */
  retried: boolean;
}

interface Call {
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer;
  agent?: Agent | false;
  /**
   * Send a bodyless GET again, once, when a reused keep-alive connection is closed before any
   * byte of the answer: what browsers do and RFC 9112 §9.3.1.1 allows, and Node's documented
   * `reusedSocket` pattern. It is needed with nginx, whose old workers close their idle
   * keep-alive connections on a reload: a request the client writes at that very moment never
   * reached nginx, so nginx cannot answer it.
   */
  retryStale?: boolean;
}

function call(port: number, host: string, c: Call = {}): Promise<Reply> {
  const once = (): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: c.path ?? '/', method: c.method ?? 'GET', headers: { host, ...c.headers }, agent: c.agent ?? false },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => { body += d; });
          res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body, retried: false }); });
          res.on('error', reject);
        },
      );
      req.setTimeout(15_000, () => { req.destroy(new Error(`no answer from the router for ${host}${c.path ?? '/'} within 15 s`)); });
      req.on('error', (err: NodeJS.ErrnoException) => {
        reject(Object.assign(err, { stale: req.reusedSocket && err.code === 'ECONNRESET' }));
      });
      req.end(c.body);
    });
  return once().catch(async (err: unknown) => {
    const stale = (err as { stale?: boolean }).stale === true;
    if (!stale || c.retryStale !== true || (c.method ?? 'GET') !== 'GET' || c.body !== undefined) throw err;
    return { ...(await once()), retried: true };
  });
}

/** One WebSocket round trip through the router; with `ca`, over TLS with SNI = host. */
function wsEcho(port: number, host: string, text: string, ca?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // ws hands its options to tls.connect, which takes the SNI name (its types leave it out).
    const tls = { headers: { host }, servername: host, ca };
    const ws = ca === undefined ? new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host } }) : new WebSocket(`wss://127.0.0.1:${port}/ws`, tls);
    const timer = setTimeout(() => { ws.terminate(); reject(new Error(`no WebSocket echo${ca === undefined ? '' : ' over TLS'} within 10 s`)); }, 10_000);
    ws.on('open', () => { ws.send(text); });
    ws.on('message', (data: Buffer) => {
      clearTimeout(timer);
      ws.close();
      resolve(data.toString('utf8'));
    });
    ws.on('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`upgrade answered ${String(res.statusCode)}`));
    });
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function wsStatus(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host } });
    ws.on('open', () => { ws.terminate(); resolve(101); });
    ws.on('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); res.resume(); });
    ws.on('error', reject);
  });
}

// ---------------------------------------------------------------------------------------------
// The suite

export function routerConformance(name: string, makeDriver: () => RouterDriver | Promise<RouterDriver>): void {
  describe(`router conformance: ${name}`, () => {
    let driver: RouterDriver;
    let port: number;
    let table = RouteTable.empty();
    const routeWith = async (change: (t: RouteTable) => RouteTable): Promise<void> => {
      table = change(table);
      await driver.apply(table);
    };
    const get = (host: string, c?: Call) => call(port, host, c);

    beforeAll(async () => {
      driver = await makeDriver();
      await driver.start();
      port = driver.address().port;
    });
    afterAll(async () => {
      await driver.stop();
    });

    it('answers 503 for every host before the first apply', async () => {
      const r = await get('anything.test');
      expect(r.status).toBe(503);
      expect(r.body).toContain(PAGES.unknownHost.heading);
    });

    it('routes by Host header, in any case and with a port', async () => {
      const [a, b] = await Promise.all([startUpstream('alpha'), startUpstream('beta')]);
      await routeWith((t) =>
        t.setProject('p-alpha', { hosts: ['alpha.test', 'www.alpha.test'], upstreams: [a] }).setProject('p-beta', { hosts: ['beta.test'], upstreams: [b] }),
      );
      expect((await get('alpha.test')).body).toBe('alpha');
      expect((await get('www.alpha.test')).body).toBe('alpha');
      expect((await get('beta.test')).body).toBe('beta');
      expect((await get(`BETA.Test:${port}`)).body).toBe('beta');
      expect((await get('alpha.test', { path: '/some/path?q=1', method: 'DELETE' })).status).toBe(200);
    });

    it('answers an unknown host with 503 and the page', async () => {
      const r = await get('nobody-serves-this.test');
      expect(r.status).toBe(503);
      expect(r.headers['content-type']).toMatch(/^text\/html/);
      expect(r.body).toContain(PAGES.unknownHost.heading);
      expect(await wsStatus(port, 'nobody-serves-this.test')).toBe(503);
    });

    it('answers a project with no running replica with 503 and the page', async () => {
      await routeWith((t) => t.setProject('p-stopped', { hosts: ['stopped.test'], upstreams: [] }));
      const r = await get('stopped.test');
      expect(r.status).toBe(503);
      expect(r.body).toContain(PAGES.notRunning.heading);
      expect(await wsStatus(port, 'stopped.test')).toBe(503);
    });

    it('answers 502 with the page, without hanging, when the replica is dead', async () => {
      const dead = await freePort();
      await routeWith((t) => t.setProject('p-dead', { hosts: ['dead.test'], upstreams: [{ host: '127.0.0.1', port: dead }] }));
      for (let i = 0; i < 3; i++) {
        const r = await get('dead.test');
        expect(r.status).toBe(502);
        expect(r.body).toContain(PAGES.badGateway.heading);
      }
    });

    it('skips a dead replica while another answers', async () => {
      const live = await startUpstream('live');
      const dead = await freePort();
      await routeWith((t) => t.setProject('p-half', { hosts: ['half.test'], upstreams: [{ host: '127.0.0.1', port: dead }, live] }));
      const agent = new Agent({ keepAlive: true });
      try {
        for (let i = 0; i < 10; i++) {
          const r = await get('half.test', { agent });
          expect(r.status).toBe(200);
          expect(r.body).toBe('live');
        }
      } finally {
        agent.destroy();
      }
    });

    it('balances round-robin across replicas', async () => {
      const [r1, r2] = await Promise.all([startUpstream('r1'), startUpstream('r2')]);
      await routeWith((t) => t.setProject('p-rr', { hosts: ['rr.test'], upstreams: [r1, r2] }));
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const seen = { r1: 0, r2: 0 } as Record<string, number>;
      try {
        for (let i = 0; i < 20; i++) {
          const r = await get('rr.test', { agent });
          seen[r.body] = (seen[r.body] ?? 0) + 1;
        }
      } finally {
        agent.destroy();
      }
      expect(Object.keys(seen).sort()).toEqual(['r1', 'r2']);
      expect(seen['r1']).toBeGreaterThanOrEqual(8);
      expect(seen['r2']).toBeGreaterThanOrEqual(8);
    });

    it('passes WebSockets through', async () => {
      const u = await startUpstream('wsapp');
      await routeWith((t) => t.setProject('p-ws', { hosts: ['ws.test'], upstreams: [u] }));
      expect(await wsEcho(port, 'ws.test', 'hello')).toBe('wsapp:hello');
      expect(await wsEcho(port, 'WS.test', 'again')).toBe('wsapp:again');
    });

    it('passes a streamed response through as it comes', async () => {
      const u = await startUpstream('streamer');
      await routeWith((t) => t.setProject('p-stream', { hosts: ['stream.test'], upstreams: [u] }));
      // The app sends its second chunk only once the client has the first: a router that
      // buffered the response would deliver nothing and the test would time out.
      const received = await new Promise<string[]>((resolve, reject) => {
        const parts: string[] = [];
        const req = request({ host: '127.0.0.1', port, path: '/stream', headers: { host: 'stream.test' }, agent: false }, (res) => {
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            parts.push(d);
            if (parts.join('') === 'chunk-1\n') u.releaseStream();
          });
          res.on('end', () => { resolve(parts); });
        });
        req.setTimeout(10_000, () => { req.destroy(new Error(`the first chunk did not arrive on its own (got ${JSON.stringify(parts)})`)); });
        req.on('error', reject);
        req.end();
      });
      expect(received[0]).toBe('chunk-1\n');
      expect(received.join('')).toBe('chunk-1\nchunk-2\n');
    });

    it('streams a large request body to the app', async () => {
      const u = await startUpstream('sink');
      await routeWith((t) => t.setProject('p-sink', { hosts: ['sink.test'], upstreams: [u] }));
      const body = Buffer.alloc(3 * 1024 * 1024, 'x');
      const r = await get('sink.test', { path: '/count', method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
      expect(r.status).toBe(200);
      expect(r.body).toBe(`sink:${body.length}`);
    });

    it('sets X-Forwarded-For, -Proto and -Host and keeps the Host header', async () => {
      const u = await startUpstream('fwd');
      await routeWith((t) => t.setProject('p-fwd', { hosts: ['fwd.test'], upstreams: [u] }));
      const sent = `Fwd.Test:${port}`;
      const seen = JSON.parse((await get(sent, { path: '/headers' })).body) as Record<string, string>;
      expect(seen['x-forwarded-for']).toBe('127.0.0.1');
      expect(seen['x-forwarded-proto']).toBe('http');
      expect(seen['x-forwarded-host']).toBe(sent);
      expect(seen['host']).toBe(sent);
      const chained = JSON.parse((await get('fwd.test', { path: '/headers', headers: { 'x-forwarded-for': '203.0.113.7' } })).body) as Record<string, string>;
      expect(chained['x-forwarded-for']).toBe('203.0.113.7, 127.0.0.1');
    });

    it('switches a host from one replica to another without dropping a request', async () => {
      const [a, b] = await Promise.all([startUpstream('old'), startUpstream('new')]);
      await routeWith((t) => t.setProject('p-switch', { hosts: ['switch.test'], upstreams: [a] }));
      const results: { status: number; body: string; afterSwitch: boolean; retried: boolean }[] = [];
      const failures: string[] = [];
      let switched = false;
      const deadline = Date.now() + 2_000;
      // Three clients keep their connection alive, one opens a new connection for every request.
      const loop = async (keepAlive: boolean) => {
        const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;
        try {
          while (Date.now() < deadline) {
            const afterSwitch = switched;
            try {
              const r = await get('switch.test', { agent, retryStale: keepAlive });
              results.push({ status: r.status, body: r.body, afterSwitch, retried: r.retried });
            } catch (err) {
              failures.push(`${keepAlive ? 'keep-alive' : 'new connection'}: ${String(err)}`);
            }
          }
        } finally {
          if (agent !== false) agent.destroy();
        }
      };
      const loops = [loop(true), loop(true), loop(true), loop(false)];
      // The rollout's order: the new replica serves, the router switches, the old one stops.
      while (results.length < 50 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
      await routeWith((t) => t.setUpstreams('p-switch', [b]));
      switched = true;
      await a.close();
      await Promise.all(loops);

      expect(failures).toEqual([]);
      expect(results.filter((r) => r.status !== 200)).toEqual([]);
      // Only the keep-alive clients may have had to send again, and each at most once.
      expect(results.filter((r) => r.retried).length).toBeLessThanOrEqual(3);
      expect(results.some((r) => r.body === 'old')).toBe(true);
      expect(results.some((r) => r.body === 'new')).toBe(true);
      expect(results.filter((r) => r.afterSwitch && r.body !== 'new')).toEqual([]);
      expect(results.filter((r) => r.afterSwitch).length).toBeGreaterThan(0);
    });

    it('resolves apply() only once the requests in flight on the old replica have finished', async () => {
      const [a, b] = await Promise.all([startUpstream('draining'), startUpstream('fresh')]);
      await routeWith((t) => t.setProject('p-drain', { hosts: ['drain.test'], upstreams: [a] }));
      // A response from the old replica, held open halfway.
      let firstChunk: () => void = () => undefined;
      const gotFirst = new Promise<void>((r) => { firstChunk = r; });
      const streamed = new Promise<string>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/stream', headers: { host: 'drain.test' }, agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            body += d;
            firstChunk();
          });
          res.on('end', () => { resolve(body); });
        });
        req.on('error', reject);
        req.end();
      });
      await gotFirst;
      table = table.setUpstreams('p-drain', [b]);
      let applied = false;
      const applying = driver.apply(table).then(() => { applied = true; });
      // New requests already go to the new replica...
      // (nginx's reload takes its time on a loaded machine: a deadline, not a count of tries)
      let reply = await get('drain.test');
      for (const until = Date.now() + 15_000; reply.body !== 'fresh' && Date.now() < until; ) {
        await new Promise((r) => setTimeout(r, 20));
        reply = await get('drain.test');
      }
      expect(reply.body).toBe('fresh');
      // ...while apply() waits for the old one's response to end.
      expect(applied).toBe(false);
      a.releaseStream();
      expect(await streamed).toBe('chunk-1\nchunk-2\n');
      await applying;
      expect(applied).toBe(true);
    });

    it('answers 503 once a host is removed, and keeps the project’s other hosts', async () => {
      const u = await startUpstream('removable');
      await routeWith((t) => t.setProject('p-rm', { hosts: ['keep.test', 'drop.test'], upstreams: [u] }));
      expect((await get('drop.test')).body).toBe('removable');
      await routeWith((t) => t.removeHost('drop.test'));
      const r = await get('drop.test');
      expect(r.status).toBe(503);
      expect(r.body).toContain(PAGES.unknownHost.heading);
      expect((await get('keep.test')).body).toBe('removable');
      await routeWith((t) => t.removeProject('p-rm'));
      expect((await get('keep.test')).status).toBe(503);
    });

    it('coalesces a burst of applies and ends on the last table', async () => {
      const u = await startUpstream('burst');
      const tables: RouteTable[] = [];
      for (let i = 0; i < 10; i++) {
        table = table.setProject('p-burst', { hosts: [`burst${i}.test`], upstreams: [u] });
        tables.push(table);
      }
      await Promise.all(tables.map((t) => driver.apply(t)));
      expect((await get('burst9.test')).body).toBe('burst');
      expect((await get('burst8.test')).status).toBe(503);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Both drivers

const logLines: string[] = [];
const testLog: RouterLog = {
  info: (o, m) => logLines.push(`info ${m} ${JSON.stringify(o)}`),
  warn: (o, m) => logLines.push(`warn ${m} ${JSON.stringify(o)}`),
  error: (o, m) => logLines.push(`error ${m} ${JSON.stringify(o)}`),
};

routerConformance('node proxy', () => new NodeProxyDriver({ listen: { host: '127.0.0.1', port: 0 }, log: testLog }));

let nginxDirs = 0;
async function makeNginx(extra: { binary?: string; dir?: string } = {}): Promise<NginxDriver> {
  const dir = extra.dir ?? join(scratch, `nginx-${nginxDirs++}`);
  return new NginxDriver({
    listen: { host: '127.0.0.1', port: await freePort() },
    dir,
    // Two workers whatever the machine: round-robin runs per worker.
    workerProcesses: 2,
    log: testLog,
    ...(extra.binary === undefined ? {} : { binary: extra.binary }),
  });
}

routerConformance('nginx', () => makeNginx());

describe('nginx driver', () => {
  const started: NginxDriver[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((d) => d.stop()));
  });
  const start = async (d: NginxDriver) => {
    started.push(d);
    await d.start();
    return d;
  };

  it('is installed here (make test installs nginx-light)', () => {
    expect(findNginx()).toBeDefined();
  });

  it('reports a clear error when nginx is absent', async () => {
    const d = await makeNginx({ binary: join(scratch, 'no-such-nginx') });
    await expect(d.start()).rejects.toThrow(/nginx was not found at .*no-such-nginx.*apt-get install nginx-light/);
  });

  it('restarts nginx when it dies', async () => {
    const u = await startUpstream('survivor');
    const d = await start(await makeNginx());
    await d.apply(RouteTable.empty().setProject('p', { hosts: ['survivor.test'], upstreams: [u] }));
    const before = d.pid();
    expect(before).toBeDefined();
    process.kill(before ?? 0, 'SIGKILL');
    // Its orphaned workers may answer for a moment; what matters is the new master.
    for (let i = 0; i < 200 && (d.pid() === undefined || d.pid() === before); i++) await new Promise((r) => setTimeout(r, 50));
    expect(d.pid()).toBeDefined();
    expect(d.pid()).not.toBe(before);
    // pid() names the new master from its spawn on: give it the moment it takes to bind.
    let reply: Reply | undefined;
    for (let i = 0; i < 100 && reply === undefined; i++) {
      reply = await call(d.address().port, 'survivor.test').catch(async () => {
        await new Promise((r) => setTimeout(r, 50));
        return undefined;
      });
    }
    expect(reply?.body).toBe('survivor');
    // The dead master's workers were killed with it, not left holding the port (init reaps them).
    const groupAlive = () => {
      try {
        process.kill(-(before ?? 0), 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 100 && groupAlive(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(groupAlive()).toBe(false);
  });

  it('keeps the previous routes when nginx rejects a config', async () => {
    const u = await startUpstream('steady');
    const marker = join(scratch, 'refuse-config');
    const wrapper = join(scratch, 'nginx-wrapper');
    // Stands in for a config nginx refuses: `-t` fails while the marker file exists.
    writeFileSync(
      wrapper,
      `#!/bin/sh\nif [ -e '${marker}' ]; then for a in "$@"; do if [ "$a" = -t ]; then echo 'nginx: [emerg] refused by the test' >&2; exit 1; fi; done; fi\nexec '${findNginx() ?? 'nginx'}' "$@"\n`,
      { mode: 0o755 },
    );
    const d = await start(await makeNginx({ binary: wrapper }));
    const t1 = RouteTable.empty().setProject('p', { hosts: ['steady.test'], upstreams: [u] });
    await d.apply(t1);
    writeFileSync(marker, '');
    try {
      await expect(d.apply(t1.removeHost('steady.test'))).rejects.toThrow(/nginx rejected the router config.*refused by the test/);
    } finally {
      rmSync(marker, { force: true });
    }
    expect((await call(d.address().port, 'steady.test')).body).toBe('steady');
    await d.apply(t1.addHost('p', 'steady2.test'));
    expect((await call(d.address().port, 'steady2.test')).body).toBe('steady');
  });

  it('switches a staged project at apply() without dropping a request, and routes as before until then', async () => {
    const [a, b] = await Promise.all([startUpstream('before-stage'), startUpstream('staged')]);
    const d = await start(await makeNginx());
    const port = d.address().port;
    const t1 = RouteTable.empty().setProject('p', { hosts: ['stage.test', 'www.stage.test'], upstreams: [a] }).setProject('q', { hosts: ['other.test'], upstreams: [a] });
    await d.apply(t1);
    await d.stage('p', { hosts: ['www.stage.test', 'stage.test'], upstreams: [b] });
    // staged, not switched: every worker still sends both hosts to the old replica
    for (let i = 0; i < 20; i++) expect((await call(port, i % 2 === 0 ? 'stage.test' : 'www.stage.test')).body).toBe('before-stage');
    expect(b.served).toBe(0);

    const failures: string[] = [];
    const bodies: { body: string; afterSwitch: boolean }[] = [];
    let switched = false;
    let stop = false;
    const loop = async (agent: Agent | false) => {
      while (!stop) {
        const afterSwitch = switched;
        try {
          const r = await call(port, 'stage.test', { agent, retryStale: agent !== false });
          if (r.status !== 200) failures.push(`status ${String(r.status)}`);
          bodies.push({ body: r.body, afterSwitch });
        } catch (err) {
          failures.push(String(err));
        }
      }
    };
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const loops = [loop(agent), loop(false)];
    while (bodies.length < 20) await new Promise((r) => setImmediate(r));
    const logged = logLines.length;
    await d.apply(t1.setUpstreams('p', [b]));
    switched = true;
    await a.close();
    const after = bodies.length;
    while (bodies.length < after + 20) await new Promise((r) => setImmediate(r));
    stop = true;
    await Promise.all(loops);
    agent.destroy();

    expect(failures).toEqual([]);
    expect(bodies.filter((r) => r.afterSwitch && r.body !== 'staged')).toEqual([]);
    expect((await call(port, 'www.stage.test')).body).toBe('staged');
    // the switch was the flag, not the reload that followed it
    const since = logLines.slice(logged);
    const flagged = since.findIndex((l) => l.includes('router: staged routes switched'));
    expect(flagged).toBeGreaterThanOrEqual(0);
    expect(since.findIndex((l) => l.includes('router: routes applied'))).toBeGreaterThan(flagged);
    // the other project was left alone
    expect((await call(port, 'other.test')).status).toBe(502);
  });

  it('drops a stage that an apply does not take, and ignores stages it cannot hold', async () => {
    const [a, b, c] = await Promise.all([startUpstream('kept'), startUpstream('never'), startUpstream('instead')]);
    const d = await start(await makeNginx());
    const port = d.address().port;
    const t1 = RouteTable.empty().setProject('p', { hosts: ['drop-stage.test'], upstreams: [a] });
    // before any apply there is nothing to stage against
    await d.stage('p', { hosts: ['drop-stage.test'], upstreams: [b] });
    await d.apply(t1);
    await d.stage('p', { hosts: ['drop-stage.test'], upstreams: [b] });
    await d.apply(t1.setUpstreams('p', [c]));
    expect((await call(port, 'drop-stage.test')).body).toBe('instead');
    expect(b.served).toBe(0);
    // an unknown project, other hosts, no upstreams: no stage, nothing changes
    await d.stage('nobody', { hosts: ['nobody.test'], upstreams: [b] });
    await d.stage('p', { hosts: ['drop-stage.test', 'more.test'], upstreams: [b] });
    await d.stage('p', { hosts: ['drop-stage.test'], upstreams: [] });
    expect((await call(port, 'nobody.test')).status).toBe(503);
    expect((await call(port, 'more.test')).status).toBe(503);
    // a host another project serves is refused, as the route table refuses it
    await d.apply(t1.setUpstreams('p', [c]).setProject('q', { hosts: ['taken.test'], upstreams: [a] }));
    await expect(d.stage('p', { hosts: ['taken.test'], upstreams: [b] })).rejects.toThrow(/taken\.test/);
    // staged, then unstaged: the next reload leaves it out and the apply reloads as usual
    await d.stage('p', { hosts: ['drop-stage.test'], upstreams: [b] });
    await d.stage('p', null);
    const logged = logLines.length;
    await d.apply(t1.setUpstreams('p', [a]).setProject('q', { hosts: ['taken.test'], upstreams: [a] }));
    expect(logLines.slice(logged).some((l) => l.includes('staged routes switched'))).toBe(false);
    expect((await call(port, 'drop-stage.test')).body).toBe('kept');
    expect(b.served).toBe(0);
    // switched flags are removed once the workers that read them are gone
    await d.stage('p', { hosts: ['drop-stage.test'], upstreams: [c] });
    await d.apply(t1.setUpstreams('p', [c]).setProject('q', { hosts: ['taken.test'], upstreams: [a] }));
    expect((await call(port, 'drop-stage.test')).body).toBe('instead');
    const flags = join(d.directory, 'flags');
    for (let i = 0; i < 100 && readdirSync(flags).length > 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync(flags)).toEqual([]);
  });

  it('stages nothing when its workers cannot reach its directory, and still switches by reload', async () => {
    // make test runs as root (it installs packages): nginx's workers run as nobody
    expect(process.getuid?.()).toBe(0);
    const closed = join(scratch, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    chmodSync(closed, 0o700);
    const [a, b] = await Promise.all([startUpstream('closed-old'), startUpstream('closed-new')]);
    const logged = logLines.length;
    const d = await start(await makeNginx({ dir: join(closed, 'nginx') }));
    expect(logLines.slice(logged).some((l) => l.startsWith('warn router: nginx workers (user nobody) cannot reach the router directory'))).toBe(true);
    const t1 = RouteTable.empty().setProject('p', { hosts: ['closed.test'], upstreams: [a] });
    await d.apply(t1);
    await d.stage('p', { hosts: ['closed.test'], upstreams: [b] });
    await d.apply(t1.setUpstreams('p', [b]));
    expect((await call(d.address().port, 'closed.test')).body).toBe('closed-new');
    expect(logLines.slice(logged).some((l) => l.includes('staged routes switched'))).toBe(false);
  });

  it('hands a running nginx over to the next driver on the same directory', async () => {
    const u = await startUpstream('handover');
    const dir = join(scratch, 'handover');
    const first = await makeNginx({ dir });
    await first.start();
    await first.apply(RouteTable.empty().setProject('p', { hosts: ['handover.test'], upstreams: [u] }));
    const pid = first.pid();
    await first.release();
    const second = await start(new NginxDriver({ listen: first.address(), dir, workerProcesses: 2, log: testLog }));
    expect(second.adopted).toBe(true);
    expect(second.pid()).toBe(pid);
    expect((await call(second.address().port, 'handover.test')).body).toBe('handover');
    await second.apply(RouteTable.empty().setProject('p', { hosts: ['handover2.test'], upstreams: [u] }));
    expect((await call(second.address().port, 'handover2.test')).body).toBe('handover');
    await second.stop();
    await expect(call(second.address().port, 'handover2.test')).rejects.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------
// TLS (ACME on): HTTPS with SNI on a second listener, and HTTP-01 answers on the plain one

interface TlsReply extends Reply {
  /** the serial of the certificate the router presented (hex, uppercase) */
  serial: string;
  subject: string;
}

/** An HTTPS request to the router's TLS listener, with `servername` as SNI ('' sends none). */
async function callTls(port: number, servername: string, host: string, ca: string, path = '/'): Promise<TlsReply> {
  const a = await httpsCall(port, servername, host, ca, path, 15_000);
  return { status: a.status, headers: a.headers, body: a.body, retried: false, serial: a.serial.replace(/^0+/, ''), subject: a.subject };
}

interface TlsDriverOptions {
  tls: TlsOptions;
  challenges: AcmeChallenges;
}

export function routerTlsConformance(name: string, makeDriver: (o: TlsDriverOptions) => RouterDriver | Promise<RouterDriver>): void {
  describe(`router conformance, TLS and HTTP-01: ${name}`, () => {
    let driver: RouterDriver;
    let port: number;
    let tlsPort: number;
    let ca: TestCa;
    let secure: TestLeaf;
    let other: TestLeaf;
    let app: TestUpstream;
    const challenges = new AcmeChallenges();
    let table = RouteTable.empty();
    const give = (certificates: TlsCertificate[]) => driver.setCertificates?.(certificates) ?? Promise.reject(new Error(`${name} has no setCertificates()`));
    const setCertificates = (leaves: [string, TestLeaf][]) => give(leaves.map(([host, l]) => ({ host, certificatePem: l.certificatePem, privateKeyPem: l.privateKeyPem })));

    beforeAll(async () => {
      const certDir = mkdtempSync(join(scratch, 'certs-'));
      ca = await makeCa(certDir);
      [secure, other, app] = await Promise.all([makeLeaf(ca, ['secure.test']), makeLeaf(ca, ['other.test', 'www.other.test']), startUpstream('tlsapp')]);
      driver = await makeDriver({ tls: { listen: { host: '127.0.0.1', port: await freePort() } }, challenges });
      await driver.start();
      port = driver.address().port;
      tlsPort = driver.tlsAddress?.()?.port ?? 0;
      table = table
        .setProject('p-secure', { hosts: ['secure.test', 'nocert.test'], upstreams: [app] })
        .setProject('p-other', { hosts: ['other.test'], upstreams: [app] })
        .setProject('p-down', { hosts: ['down.test'], upstreams: [] });
      await driver.apply(table);
      await setCertificates([['secure.test', secure], ['other.test', other], ['down.test', await makeLeaf(ca, ['down.test'])], ['unrouted.test', await makeLeaf(ca, ['unrouted.test'])]]);
    });
    afterAll(async () => {
      await driver.stop();
    });

    it('listens for TLS where it was asked to', () => {
      expect(tlsPort).toBeGreaterThan(0);
      expect(tlsPort).not.toBe(port);
    });

    it('serves HTTPS with the certificate SNI names, and X-Forwarded-Proto https', async () => {
      const r = await callTls(tlsPort, 'secure.test', 'secure.test', ca.certificatePem);
      expect(r.status).toBe(200);
      expect(r.body).toBe('tlsapp');
      expect(r.serial).toBe(secure.serial);
      const o = await callTls(tlsPort, 'other.test', 'other.test', ca.certificatePem);
      expect(o.body).toBe('tlsapp');
      expect(o.serial).toBe(other.serial);
      const seen = JSON.parse((await callTls(tlsPort, 'secure.test', 'Secure.Test', ca.certificatePem, '/headers')).body) as Record<string, string>;
      expect(seen['x-forwarded-proto']).toBe('https');
      expect(seen['x-forwarded-host']).toBe('Secure.Test');
      expect(seen['host']).toBe('Secure.Test');
      expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    });

    it('answers a project with no running replica with 503 over HTTPS too', async () => {
      const r = await callTls(tlsPort, 'down.test', 'down.test', ca.certificatePem);
      expect(r.status).toBe(503);
      expect(r.body).toContain(PAGES.notRunning.heading);
    });

    it('passes WebSockets through over TLS', async () => {
      expect(await wsEcho(tlsPort, 'secure.test', 'sealed', ca.certificatePem)).toBe('tlsapp:sealed');
    });

    it('fails the handshake for a routed host without a certificate, an unrouted host with one, an unknown name and no SNI', async () => {
      expect(await handshakes(tlsPort, 'secure.test')).toBe(true);
      expect(await handshakes(tlsPort, 'nocert.test')).toBe(false);
      expect(await handshakes(tlsPort, 'unrouted.test')).toBe(false);
      expect(await handshakes(tlsPort, 'nobody.test')).toBe(false);
      expect(await handshakes(tlsPort, '')).toBe(false);
    });

    it('keeps serving plain HTTP as before, with X-Forwarded-Proto http', async () => {
      const seen = JSON.parse((await call(port, 'secure.test', { path: '/headers' })).body) as Record<string, string>;
      expect(seen['x-forwarded-proto']).toBe('http');
      expect((await call(port, 'nocert.test')).body).toBe('tlsapp');
    });

    it('answers HTTP-01 tokens on the plain listener for every host, from what the manager set', async () => {
      const path = '/.well-known/acme-challenge/tok_EN-123';
      expect((await call(port, 'secure.test', { path })).status).toBe(404);
      challenges.set('tok_EN-123', 'tok_EN-123.thumbprint');
      for (const host of ['secure.test', 'nocert.test', 'nobody-serves-this.test', 'down.test']) {
        const r = await call(port, host, { path });
        expect(r.status, host).toBe(200);
        expect(r.body, host).toBe('tok_EN-123.thumbprint');
        expect(r.headers['content-type']).toMatch(/^text\/plain/);
      }
      // Not on the TLS listener: there the path is the app's.
      expect((await callTls(tlsPort, 'secure.test', 'secure.test', ca.certificatePem, path)).body).toBe('tlsapp');
      challenges.delete('tok_EN-123');
      expect((await call(port, 'secure.test', { path })).status).toBe(404);
      // Other paths under /.well-known are the app's.
      expect((await call(port, 'secure.test', { path: '/.well-known/security.txt' })).body).toBe('tlsapp');
    });

    it('serves a renewed certificate from the next handshake on', async () => {
      const renewed = await makeLeaf(ca, ['secure.test']);
      await setCertificates([['secure.test', renewed], ['other.test', other]]);
      expect((await callTls(tlsPort, 'secure.test', 'secure.test', ca.certificatePem)).serial).toBe(renewed.serial);
      expect((await callTls(tlsPort, 'other.test', 'other.test', ca.certificatePem)).serial).toBe(other.serial);
      secure = renewed;
    });

    it('refuses a certificate whose key is not its own, and keeps the ones it serves', async () => {
      const broken = { host: 'secure.test', certificatePem: secure.certificatePem, privateKeyPem: other.privateKeyPem };
      await expect(give([broken])).rejects.toThrow(/private key for secure\.test does not belong to its certificate/);
      await expect(setCertificates([['secure.test', other]])).rejects.toThrow(/does not name it/);
      expect((await callTls(tlsPort, 'secure.test', 'secure.test', ca.certificatePem)).serial).toBe(secure.serial);
      // A route change after the refusal still goes through.
      table = table.addHost('p-other', 'www.other.test');
      await driver.apply(table);
      expect((await call(port, 'www.other.test')).body).toBe('tlsapp');
    });

    it('stops serving TLS for a host once it leaves the table', async () => {
      table = table.removeHost('other.test');
      await driver.apply(table);
      expect(await handshakes(tlsPort, 'other.test')).toBe(false);
      expect(await handshakes(tlsPort, 'secure.test')).toBe(true);
    });
  });
}

routerTlsConformance('node proxy', ({ tls, challenges }) => new NodeProxyDriver({ listen: { host: '127.0.0.1', port: 0 }, tls, challenges, log: testLog }));

const tlsNginxDir = join(scratch, 'nginx-tls');
routerTlsConformance('nginx', async ({ tls, challenges }) =>
  new NginxDriver({ listen: { host: '127.0.0.1', port: await freePort() }, dir: tlsNginxDir, workerProcesses: 2, tls, challenges, log: testLog }),
);

describe('nginx driver, TLS files', () => {
  it('keeps its copies of the certificates in <dir>/certs, keys 0600, and only the ones its config uses', () => {
    // Runs after the nginx TLS suite above (files run their describes in order).
    const certs = join(tlsNginxDir, 'certs');
    const names = readdirSync(certs).sort();
    expect(statSync(certs).mode & 0o777).toBe(0o700);
    // Only the renewed secure.test: its first copy is gone, down.test's certificate was not given
    // again with the renewal, and other.test left the table.
    expect(names.map((n) => n.replace(/\.[0-9a-f]{16}\./, '.*.'))).toEqual(['secure.test.*.crt', 'secure.test.*.key']);
    for (const n of names.filter((x) => x.endsWith('.key'))) expect(statSync(join(certs, n)).mode & 0o777).toBe(0o600);
  });

  it('keeps an adopted nginx serving its routes over HTTP and HTTPS until the first apply, certificates given or not', async () => {
    const u = await startUpstream('adopted-tls');
    const ca = await makeCa(mkdtempSync(join(scratch, 'certs-')));
    const leaf = await makeLeaf(ca, ['kept.test']);
    const certificates = [{ host: 'kept.test', certificatePem: leaf.certificatePem, privateKeyPem: leaf.privateKeyPem }];
    const [port, tlsPort] = await Promise.all([freePort(), freePort()]);
    const options = { listen: { host: '127.0.0.1', port }, dir: join(scratch, 'handover-tls'), workerProcesses: 1, tls: { listen: { host: '127.0.0.1', port: tlsPort } }, log: testLog };
    const routes = RouteTable.empty().setProject('p', { hosts: ['kept.test'], upstreams: [u] });
    const first = new NginxDriver({ ...options, challenges: new AcmeChallenges() });
    await first.start();
    await first.apply(routes);
    await first.setCertificates(certificates);
    await first.release();
    const challenges = new AcmeChallenges();
    const second = new NginxDriver({ ...options, challenges });
    try {
      await second.start();
      expect(second.adopted).toBe(true);
      // What the certificate manager does at its start: this must not reload with no routes.
      await second.setCertificates(certificates);
      expect((await call(port, 'kept.test')).body).toBe('adopted-tls');
      expect((await callTls(tlsPort, 'kept.test', 'kept.test', ca.certificatePem)).body).toBe('adopted-tls');
      // The first apply brings this process's HTTP-01 responder and the certificates along.
      await second.apply(routes);
      challenges.set('handover', 'handover.key');
      expect((await call(port, 'kept.test', { path: '/.well-known/acme-challenge/handover' })).body).toBe('handover.key');
      expect((await callTls(tlsPort, 'kept.test', 'kept.test', ca.certificatePem)).serial).toBe(leaf.serial);
    } finally {
      await second.stop();
    }
  });

  it('renders no TLS listener without the tls option', async () => {
    const d = await makeNginx();
    expect(d.tlsAddress()).toBeUndefined();
  });
});
