import { join } from 'node:path';
import { ACME_CHALLENGE_PATH } from './acme-challenges.js';
import { PAGES, type RouterPage } from './pages.js';
import { upstreamKey, type Route, type RouteTable, type Upstream } from './route-table.js';
import { formatAddress, type ListenAddress } from './router.js';

/**
 * Renders nginx.conf from a route table. Pure: the driver writes, validates (`nginx -t`) and
 * reloads it. Every value that reaches the text is validated first (host names by the table,
 * paths here), so nothing can close a directive.
 */
export interface NginxConfigSettings {
  listen: ListenAddress;
  /** nginx's own directory (absolute): pid, logs, temp paths and the control socket live inside */
  dir: string;
  /** answered on the control socket, so the driver can tell when a reload has taken effect */
  generation: string;
  workerProcesses: number | 'auto';
  connectTimeoutSec: number;
  /** proxy_read_timeout / proxy_send_timeout: how long a WebSocket or a stream may stay silent */
  idleTimeoutSec: number;
  /** worker_shutdown_timeout: how long old workers keep WebSockets and streams after a reload */
  shutdownTimeoutSec: number;
  accessLog: boolean;
  scheme: 'http' | 'https';
  /** temp-path directives exist only for the modules compiled in (`nginx -V`) */
  modules: { fastcgi: boolean; uwsgi: boolean; scgi: boolean };
  /** the HTTPS listener and, per host, the certificate files it serves (ACME on); absent: no TLS */
  tls?: NginxTls | undefined;
  /** Slipway's HTTP-01 responder, which `/.well-known/acme-challenge/` is proxied to on the plain listener */
  acmeResponder?: ListenAddress | undefined;
  /**
   * Staged upstreams by host (the driver's stage()): a host here is proxied to them as soon as
   * its flag file exists, with no reload; until then, to its upstreams in the table. Only for
   * hosts the table serves with upstreams.
   */
  staged?: ReadonlyMap<string, StagedUpstreams> | undefined;
}

export interface StagedUpstreams {
  readonly upstreams: readonly Upstream[];
  /** a file of `<dir>/flags`: its existence switches the host over */
  readonly flag: string;
}

export interface NginxTls {
  listen: ListenAddress;
  /** host → files inside `<dir>/certs` (a host without an entry gets no HTTPS) */
  files: ReadonlyMap<string, CertificateFiles>;
}

export interface CertificateFiles {
  certificate: string;
  privateKey: string;
}

export const nginxPaths = (dir: string) => ({
  conf: join(dir, 'nginx.conf'),
  next: join(dir, 'nginx.conf.next'),
  pid: join(dir, 'nginx.pid'),
  /**
   * nginx makes every unix listener 0666: the control socket lives in a directory only its owner
   * can enter (0700), and the driver narrows the socket itself to 0600. Only the driver connects;
   * the workers accept on the listening socket they inherit, so they need no access to the path.
   */
  controlDir: join(dir, 'control'),
  control: join(dir, 'control', 'control.sock'),
  errorLog: join(dir, 'logs', 'error.log'),
  accessLog: join(dir, 'logs', 'access.log'),
  stderr: join(dir, 'logs', 'stderr.log'),
  temp: join(dir, 'temp'),
  /** the flag files of staged routes (see NginxConfigSettings.staged) */
  flags: join(dir, 'flags'),
  /** copies of the certificates nginx serves, named by content (`<host>.<hash>.crt|key`), 0700 */
  certs: join(dir, 'certs'),
});

/** The unix socket path limit (sun_path) is 108 bytes on Linux, 104 on macOS. */
const MAX_SOCKET_PATH = 100;

/** Paths go into double-quoted nginx strings: refuse what could end or expand them. */
export function assertSafeDir(dir: string): void {
  if (!dir.startsWith('/')) throw new Error(`The nginx router directory must be an absolute path, not "${dir}".`);
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/["\\$;{}\u0000-\u001f]/.test(dir)) throw new Error(`The nginx router directory "${dir}" contains a character nginx paths cannot hold (" \\ $ ; { } or a control character).`);
  if (Buffer.byteLength(nginxPaths(dir).control) > MAX_SOCKET_PATH) {
    throw new Error(`The nginx router directory "${dir}" is too long for its control socket (${MAX_SOCKET_PATH} bytes at most): choose a shorter path.`);
  }
}

const q = (s: string): string => `"${s}"`;

/** A page as the body of `return`: nginx strings expand `$variables`, and ours must stay literal. */
function returnPage(page: RouterPage): string {
  if (page.html.includes('$')) throw new Error(`The router page ${page.file} must not contain "$" (nginx would expand it).`);
  return `default_type "text/html; charset=utf-8";
      add_header Cache-Control no-store always;
      return ${page.status} ${q(page.html.replace(/\\/g, '\\\\').replace(/"/g, '\\"'))};`;
}

const upstreamName = (host: string): string => `slipway.${host}`;
/** "slipway-next." cannot begin another host's `slipway.<host>` */
const stagedUpstreamName = (host: string): string => `slipway-next.${host}`;

function renderUpstream(name: string, upstreams: readonly Upstream[]): string {
  const servers = upstreams.map((u) => `    server ${upstreamKey(u)} max_fails=1 fail_timeout=5s;`).join('\n');
  // keepalive_timeout stays under the 5 s keep-alive of Node's and most apps' servers, so nginx
  // does not reuse a connection the app is closing.
  return `  upstream ${name} {
${servers}
    keepalive 32;
    keepalive_timeout 4s;
  }`;
}

/** A file of one of nginx's own directories, quoted: the path must stay inside it (it goes into the config). */
function fileOf(directory: string, file: string, what: string): string {
  if (!file.startsWith(`${directory}/`) || !/^[a-z0-9.-]+$/.test(file.slice(directory.length + 1))) {
    throw new Error(`The ${what} file ${file} is not a file of ${directory}.`);
  }
  return q(file);
}

const flagPath = (dir: string, file: string): string => fileOf(nginxPaths(dir).flags, file, 'flag');
const certPath = (dir: string, file: string): string => fileOf(nginxPaths(dir).certs, file, 'certificate');

/** A host's locations: the same on the plain and the TLS listener. */
function renderLocations(route: Route, staged: StagedUpstreams | undefined, dir: string): string {
  if (route.upstreams.length === 0) {
    return `    location / {
      ${returnPage(PAGES.notRunning)}
    }`;
  }
  // A staged host switches when its flag file appears: nginx checks it on every request.
  const flip =
    staged === undefined
      ? ''
      : `
      if (-f ${flagPath(dir, staged.flag)}) {
        proxy_pass http://${stagedUpstreamName(route.host)};
      }`;
  return `    location / {${flip}
      proxy_pass http://${upstreamName(route.host)};
    }
    error_page 502 504 @slipway_502;
    location @slipway_502 {
      ${returnPage(PAGES.badGateway)}
    }`;
}

/** Proxied to Slipway's responder before any route applies, for every host (RFC 8555 §8.3). */
function renderChallenge(responder: ListenAddress | undefined): string {
  if (responder === undefined) return '';
  return `
    location ^~ ${ACME_CHALLENGE_PATH} {
      proxy_pass http://${formatAddress(responder)};
    }`;
}

function renderServer(route: Route, listen: string, s: NginxConfigSettings): string {
  return `  server {
    listen ${listen};
    server_name ${route.host};${renderChallenge(s.acmeResponder)}
${renderLocations(route, s.staged?.get(route.host), s.dir)}
  }`;
}

function renderTlsServer(route: Route, listen: string, files: CertificateFiles, s: NginxConfigSettings): string {
  return `  server {
    listen ${listen} ssl;
    server_name ${route.host};
    ssl_certificate ${certPath(s.dir, files.certificate)};
    ssl_certificate_key ${certPath(s.dir, files.privateKey)};
${renderLocations(route, s.staged?.get(route.host), s.dir)}
  }`;
}

/** TLS settings and servers: a default server that refuses the handshake, then one server per host with a certificate. */
function renderTls(routes: readonly Route[], s: NginxConfigSettings): { http: string; servers: string } {
  if (s.tls === undefined) return { http: '', servers: '' };
  const tls = s.tls;
  const listen = formatAddress(tls.listen);
  const served = routes.flatMap((r) => {
    const files = tls.files.get(r.host);
    return files === undefined ? [] : [renderTlsServer(r, listen, files, s)];
  });
  return {
    http: `
  # HTTPS (ACME): TLS 1.2 and 1.3 only.
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_prefer_server_ciphers off;
  ssl_session_cache shared:slipway_tls:10m;
  ssl_session_timeout 1d;
  ssl_session_tickets off;
`,
    servers: `
  # TLS for a name without a certificate (or no SNI): the handshake fails, nothing is served.
  server {
    listen ${listen} ssl default_server;
    server_name _;
    ssl_reject_handshake on;
  }

${served.join('\n\n')}
`,
  };
}

export function renderNginxConfig(table: RouteTable, s: NginxConfigSettings): string {
  assertSafeDir(s.dir);
  const p = nginxPaths(s.dir);
  const listen = formatAddress(s.listen);
  const routes = table.routes();
  const tls = renderTls(routes, s);
  // With a TLS listener the scheme depends on the listener a request came in on.
  const forwardedProto = s.tls === undefined ? s.scheme : '$slipway_forwarded_proto';
  const protoMap =
    s.tls === undefined
      ? ''
      : `
  map $https $slipway_forwarded_proto {
    default ${s.scheme};
    on https;
  }
`;
  const temp = [
    `client_body_temp_path ${q(join(p.temp, 'client_body'))};`,
    `proxy_temp_path ${q(join(p.temp, 'proxy'))};`,
    ...(s.modules.fastcgi ? [`fastcgi_temp_path ${q(join(p.temp, 'fastcgi'))};`] : []),
    ...(s.modules.uwsgi ? [`uwsgi_temp_path ${q(join(p.temp, 'uwsgi'))};`] : []),
    ...(s.modules.scgi ? [`scgi_temp_path ${q(join(p.temp, 'scgi'))};`] : []),
  ];
  return `# Rendered by Slipway from route table version ${table.version}. Do not edit: every route change rewrites it.
daemon off;
master_process on;
worker_processes ${String(s.workerProcesses)};
worker_rlimit_nofile 16384;
worker_shutdown_timeout ${s.shutdownTimeoutSec}s;
pid ${q(p.pid)};
error_log ${q(p.errorLog)} warn;

events {
  worker_connections 4096;
}

http {
  server_tokens off;
  default_type application/octet-stream;
  log_format slipway '$remote_addr [$time_iso8601] "$host" "$request" $status $body_bytes_sent $request_time "$upstream_addr" "$upstream_status"';
  access_log ${s.accessLog ? `${q(p.accessLog)} slipway buffer=64k flush=1s` : 'off'};
  ${temp.join('\n  ')}
  server_names_hash_bucket_size 128;
  server_names_hash_max_size 16384;
  client_max_body_size 0;
  keepalive_timeout 75s;

  # Keep-alive to the apps, except for the requests that ask for an upgrade (WebSockets).
  map $http_upgrade $slipway_connection {
    default upgrade;
    '' '';
  }
${protoMap}${tls.http}
  proxy_http_version 1.1;
  proxy_set_header Host $http_host;
  proxy_set_header Upgrade $http_upgrade;
  proxy_set_header Connection $slipway_connection;
  proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
  proxy_set_header X-Forwarded-Proto ${forwardedProto};
  proxy_set_header X-Forwarded-Host $http_host;
  # Streams (SSE, chunked responses, uploads) pass through as they come.
  proxy_buffering off;
  proxy_request_buffering off;
  proxy_connect_timeout ${s.connectTimeoutSec}s;
  proxy_read_timeout ${s.idleTimeoutSec}s;
  proxy_send_timeout ${s.idleTimeoutSec}s;
  # A replica that refuses or times out is skipped for the next one (idempotent requests only).
  proxy_next_upstream error timeout;

${routes.filter((r) => r.upstreams.length > 0).flatMap((r) => {
  const staged = s.staged?.get(r.host);
  return [renderUpstream(upstreamName(r.host), r.upstreams), ...(staged === undefined ? [] : [renderUpstream(stagedUpstreamName(r.host), staged.upstreams)])];
}).join('\n\n')}

  # Hosts no project serves.
  server {
    listen ${listen} default_server;
    server_name _;${renderChallenge(s.acmeResponder)}
    location / {
      ${returnPage(PAGES.unknownHost)}
    }
  }

${routes.map((r) => renderServer(r, listen, s)).join('\n\n')}
${tls.servers}
  # The driver's own probe: which rendered config the workers that answer are running.
  server {
    listen ${q(`unix:${p.control}`)};
    access_log off;
    location = /generation {
      default_type text/plain;
      return 200 ${q(s.generation)};
    }
    location / {
      return 404;
    }
  }
}
`;
}
