import { Agent, createServer, type ClientRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { Readable, type Duplex } from 'node:stream';
import { createSecureContext, TLSSocket, type SecureContext } from 'node:tls';
import { ProxyServer } from 'http-proxy-3';
import { isChallengePath, type AcmeChallenges } from './acme-challenges.js';
import { answerChallenge } from './acme-responder.js';
import { PAGES, type RouterPage } from './pages.js';
import { normaliseHost, RouteTable, type Route, type Upstream } from './route-table.js';
import { silentLog, type ListenAddress, type RouterDriver, type RouterLog, type TlsCertificate, type TlsOptions } from './router.js';
import { checkCertificates } from './tls-certificates.js';

/**
 * The fallback data plane: an in-process node:http server that proxies with http-proxy-3.
 * Slower than nginx (docs/decisions.md#router) but needs nothing installed. A switch is a
 * pointer swap, so no request is ever refused by apply().
 */
export interface NodeProxyOptions {
  listen: ListenAddress;
  /** a replica that has not accepted the connection by then counts as failed; default 5 s */
  connectTimeoutMs?: number;
  /** how long apply() waits for requests in flight under an older table; default 10 s */
  drainTimeoutMs?: number;
  /** the scheme clients used, for X-Forwarded-Proto (a TLS terminator in front says https) */
  scheme?: 'http' | 'https';
  /** the HTTPS listener, serving the hosts given to setCertificates(); absent: nothing listens for TLS */
  tls?: TlsOptions;
  /** HTTP-01 answers, served from memory on the plain listener */
  challenges?: AcmeChallenges;
  log?: RouterLog;
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) are the client's business with us, not with the app.
 * `Connection` stays: http-proxy-3 answers the client's keep-alive wish from it, and passing a
 * `close` on only costs one pooled connection to the app.
 */
const HOP_BY_HOP = ['keep-alive', 'proxy-connection', 'upgrade', 'te', 'trailer'];
/** Connection failures that happened before the replica saw anything: another replica may answer. */
const NEVER_REACHED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ESLIPWAY_CONNECT_TIMEOUT']);
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS']);

export class NodeProxyDriver implements RouterDriver {
  readonly name = 'node';
  private table = RouteTable.empty();
  /** bumped by every apply() that changes the table; requests remember the one they started in */
  private generation = 0;
  private readonly inflight = new Map<number, number>();
  private drainWaiters: (() => void)[] = [];
  private readonly turns = new Map<string, number>();
  private readonly proxyRequests = new WeakMap<IncomingMessage, ClientRequest>();
  private readonly upgraded = new Set<Duplex>();
  /** client sockets the replica has answered 101 for: from then on they carry WebSocket frames */
  private readonly switched = new WeakSet<Duplex>();
  private readonly server: Server;
  private readonly tlsServer: HttpsServer | undefined;
  /** host → its certificate, for SNI */
  private contexts = new Map<string, SecureContext>();
  private tlsBound: ListenAddress | undefined;
  private readonly challenges: AcmeChallenges | undefined;
  private readonly proxy: ProxyServer;
  /** keep-alive to the replicas; idle sockets are closed before a typical app's 5 s keep-alive ends */
  private readonly agent = new Agent({ keepAlive: true, timeout: 4_000, scheduling: 'lifo' });
  private readonly log: RouterLog;
  private readonly connectTimeoutMs: number;
  private readonly drainTimeoutMs: number;
  private readonly scheme: 'http' | 'https';
  private bound: ListenAddress;
  private state: 'new' | 'started' | 'stopped' = 'new';

  constructor(opts: NodeProxyOptions) {
    this.bound = opts.listen;
    this.log = opts.log ?? silentLog;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 5_000;
    this.drainTimeoutMs = opts.drainTimeoutMs ?? 10_000;
    this.scheme = opts.scheme ?? 'http';
    this.challenges = opts.challenges;
    this.tlsBound = opts.tls?.listen;
    this.proxy = new ProxyServer({ xfwd: false, changeOrigin: false, agent: this.agent });
    // The callbacks passed to web()/ws() get every error; this listener only keeps an error
    // emitted outside them (a client socket failing mid-upgrade) from being thrown.
    this.proxy.on('error', (err) => { this.log.warn({ err: err.message }, 'router: proxy error'); });
    this.proxy.on('proxyReq', (proxyReq, req) => {
      this.proxyRequests.set(req, proxyReq);
      this.guardConnect(proxyReq);
    });
    this.proxy.on('proxyReqWs', (proxyReq, _req, socket) => {
      proxyReq.once('socket', () => { this.guardConnect(proxyReq); });
      proxyReq.once('upgrade', () => { this.switched.add(socket); });
    });
    this.server = createServer({ requestTimeout: 0, keepAliveTimeout: 75_000 }, (req, res) => { this.onRequest(req, res); });
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => { this.onUpgrade(req, socket, head); });
    if (opts.tls !== undefined) {
      // No default certificate: a name without one (or a client without SNI) fails the handshake.
      this.tlsServer = createHttpsServer(
        { requestTimeout: 0, keepAliveTimeout: 75_000, minVersion: 'TLSv1.2', SNICallback: (name, cb) => { this.sni(name, cb); } },
        (req, res) => { this.onRequest(req, res); },
      );
      this.tlsServer.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => { this.onUpgrade(req, socket, head); });
    }
  }

  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`The Node router was already ${this.state}.`);
    this.bound = await listen(this.server, this.bound);
    if (this.tlsServer !== undefined && this.tlsBound !== undefined) {
      try {
        this.tlsBound = await listen(this.tlsServer, this.tlsBound);
      } catch (err) {
        await new Promise<void>((resolve) => { this.server.close(() => { resolve(); }); });
        this.state = 'stopped';
        throw err;
      }
    }
    this.state = 'started';
    this.log.info({ driver: this.name, listen: this.bound, ...(this.tlsServer === undefined ? {} : { tlsListen: this.tlsBound }) }, 'router: listening');
  }

  setCertificates(certificates: readonly TlsCertificate[]): Promise<void> {
    if (this.tlsServer === undefined) return Promise.reject(new Error('The Node router has no TLS listener: certificates cannot be applied.'));
    try {
      const contexts = new Map<string, SecureContext>();
      for (const c of checkCertificates(certificates).values()) {
        contexts.set(c.host, createSecureContext({ cert: c.certificatePem, key: c.privateKeyPem, minVersion: 'TLSv1.2' }));
      }
      // A swap: handshakes from now on use the new set, connections already open keep theirs.
      this.contexts = contexts;
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  tlsAddress(): ListenAddress | undefined {
    return this.tlsServer === undefined ? undefined : this.tlsBound;
  }

  apply(table: RouteTable): Promise<void> {
    if (table === this.table) return Promise.resolve();
    this.table = table;
    this.generation += 1;
    return this.drained();
  }

  async stop(): Promise<void> {
    if (this.state !== 'started') {
      this.state = 'stopped';
      return;
    }
    this.state = 'stopped';
    const servers = this.tlsServer === undefined ? [this.server] : [this.server, this.tlsServer];
    const closed = Promise.all(servers.map((srv) => new Promise<void>((resolve) => { srv.close(() => { resolve(); }); })));
    for (const srv of servers) srv.closeIdleConnections();
    for (const s of this.upgraded) s.destroy();
    const timer = setTimeout(() => { for (const srv of servers) srv.closeAllConnections(); }, 2_000);
    await closed;
    clearTimeout(timer);
    this.agent.destroy();
    for (const w of this.drainWaiters) w();
    this.drainWaiters = [];
  }

  address(): ListenAddress {
    return this.bound;
  }

  /** SNI: a host the table serves and that has a certificate; anything else fails the handshake. */
  private sni(name: string, cb: (err: Error | null, ctx?: SecureContext) => void): void {
    const host = normaliseHost(name) ?? '';
    const ctx = this.contexts.get(host);
    if (ctx === undefined || this.table.lookup(host) === undefined) {
      cb(new Error(`no certificate for ${host}`));
      return;
    }
    cb(null, ctx);
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    if (this.challenges !== undefined && !isEncrypted(req) && isChallengePath(req.url)) {
      answerChallenge(this.challenges, req, res);
      return;
    }
    const route = this.table.lookup(req.headers.host);
    if (route === undefined) {
      sendPage(req, res, PAGES.unknownHost);
      return;
    }
    if (route.upstreams.length === 0) {
      sendPage(req, res, PAGES.notRunning);
      return;
    }
    this.track(res);
    const headers = this.forwardedHeaders(req);
    for (const h of HOP_BY_HOP) Reflect.deleteProperty(req.headers, h);
    this.forward(req, res, route, headers, this.turn(route), 0, undefined);
  }

  private forward(req: IncomingMessage, res: ServerResponse, route: Route, headers: Record<string, string>, turn: number, attempt: number, body: Readable | undefined): void {
    const target = pick(route.upstreams, turn + attempt);
    this.proxy.web(req, res, { target: { host: target.host, port: target.port }, headers, ...(body === undefined ? {} : { buffer: body }) }, (err) => {
      // The client went away: nobody is waiting for a retry or a page.
      if (req.socket.destroyed) return;
      const code = (err as NodeJS.ErrnoException).code ?? '';
      const proxyReq = this.proxyRequests.get(req);
      // A refused connection never reached the app; a reset on a reused keep-alive socket means
      // the app closed it as idle just as we sent. Either way a bodyless request is safe to send
      // again, which is what nginx's proxy_next_upstream does too.
      const tries = attempt + 1;
      const reset = code === 'ECONNRESET' && proxyReq?.reusedSocket === true && IDEMPOTENT.has(req.method ?? '');
      const retry =
        !res.headersSent &&
        !hasBody(req) &&
        ((NEVER_REACHED.has(code) && tries < route.upstreams.length) || (reset && tries <= route.upstreams.length));
      if (retry) {
        this.forward(req, res, route, headers, turn, tries, Readable.from([]));
        return;
      }
      this.log.warn({ host: route.host, upstream: `${target.host}:${target.port}`, err: err.message }, 'router: upstream failed');
      if (res.headersSent) res.destroy();
      else sendPage(req, res, PAGES.badGateway);
    });
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => { socket.destroy(); });
    const route = this.table.lookup(req.headers.host);
    if (route === undefined || route.upstreams.length === 0) {
      writeRawPage(socket, route === undefined ? PAGES.unknownHost : PAGES.notRunning);
      return;
    }
    const target = pick(route.upstreams, this.turn(route));
    this.upgraded.add(socket);
    socket.once('close', () => this.upgraded.delete(socket));
    this.proxy.ws(req, socket, head, { target: { host: target.host, port: target.port }, headers: this.forwardedHeaders(req) }, (err) => {
      this.log.warn({ host: route.host, upstream: `${target.host}:${target.port}`, err: err.message }, 'router: upstream failed (websocket)');
      // Before the 101 nothing was written to the client: it can still get a 502.
      if (!this.switched.has(socket)) writeRawPage(socket, PAGES.badGateway);
    });
  }

  private forwardedHeaders(req: IncomingMessage): Record<string, string> {
    const client = req.socket.remoteAddress ?? '';
    const prior = req.headers['x-forwarded-for'];
    const chain = typeof prior === 'string' && prior !== '' ? `${prior}, ${client}` : client;
    return { 'x-forwarded-for': chain, 'x-forwarded-proto': isEncrypted(req) ? 'https' : this.scheme, 'x-forwarded-host': req.headers.host ?? '' };
  }

  private turn(route: Route): number {
    const n = this.turns.get(route.host) ?? 0;
    this.turns.set(route.host, (n + 1) % 1_000_000_007);
    return n;
  }

  /** Fails a connection attempt that hangs (a replica that dropped off the network) instead of waiting for the OS. */
  private guardConnect(proxyReq: ClientRequest): void {
    const socket = proxyReq.socket;
    if (socket === null || !socket.connecting) return;
    const timer = setTimeout(() => {
      proxyReq.destroy(Object.assign(new Error(`connect timed out after ${this.connectTimeoutMs} ms`), { code: 'ESLIPWAY_CONNECT_TIMEOUT' }));
    }, this.connectTimeoutMs);
    const clear = () => { clearTimeout(timer); };
    socket.once('connect', clear);
    socket.once('close', clear);
  }

  private track(res: ServerResponse): void {
    const gen = this.generation;
    this.inflight.set(gen, (this.inflight.get(gen) ?? 0) + 1);
    res.once('close', () => {
      const left = (this.inflight.get(gen) ?? 1) - 1;
      if (left === 0) this.inflight.delete(gen);
      else this.inflight.set(gen, left);
      if (this.drainWaiters.length > 0 && this.oldInflight() === 0) {
        const waiters = this.drainWaiters;
        this.drainWaiters = [];
        for (const w of waiters) w();
      }
    });
  }

  private oldInflight(): number {
    let n = 0;
    for (const [gen, count] of this.inflight) if (gen < this.generation) n += count;
    return n;
  }

  /** Resolves once no request started under an older table is still running, or after the drain bound. */
  private drained(): Promise<void> {
    if (this.oldInflight() === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.drainWaiters = this.drainWaiters.filter((w) => w !== done);
        resolve();
      }, this.drainTimeoutMs);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.drainWaiters.push(done);
    });
  }
}

const isEncrypted = (req: IncomingMessage): boolean => req.socket instanceof TLSSocket;

/** Listens and answers the address bound (the real port when 0 was asked for). */
async function listen(server: Server | HttpsServer, at: ListenAddress): Promise<ListenAddress> {
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => { reject(new Error(`The Node router cannot listen on ${at.host}:${at.port}: ${err.message}`)); };
    server.once('error', onError);
    server.listen(at.port, at.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address();
  return addr !== null && typeof addr === 'object' ? { host: at.host, port: addr.port } : at;
}

function pick(upstreams: readonly Upstream[], n: number): Upstream {
  const u = upstreams[n % upstreams.length];
  if (u === undefined) throw new Error('no upstream to pick from');
  return u;
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function sendPage(req: IncomingMessage, res: ServerResponse, page: RouterPage): void {
  const body = Buffer.from(page.html, 'utf8');
  res.writeHead(page.status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

const REASONS: Record<RouterPage['status'], string> = { 502: 'Bad Gateway', 503: 'Service Unavailable' };

/** An HTTP response written straight to a socket that asked for an upgrade, then closed. */
function writeRawPage(socket: Duplex, page: RouterPage): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = Buffer.from(page.html, 'utf8');
  socket.end(
    Buffer.concat([
      Buffer.from(
        `HTTP/1.1 ${page.status} ${REASONS[page.status]}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: ${body.length}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n`,
      ),
      body,
    ]),
  );
}
