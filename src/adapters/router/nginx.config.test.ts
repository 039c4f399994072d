import { describe, expect, it } from 'vitest';
import { assertSafeDir, renderNginxConfig, type NginxConfigSettings } from './nginx.config.js';
import { createRouterDriver, findNginx, parseListenAddress } from './index.js';
import { PAGES } from './pages.js';
import { RouteTable } from './route-table.js';

const settings: NginxConfigSettings = {
  listen: { host: '127.0.0.1', port: 8000 },
  dir: '/var/lib/slipway/router',
  generation: 'g-1',
  workerProcesses: 'auto',
  connectTimeoutSec: 5,
  idleTimeoutSec: 3600,
  shutdownTimeoutSec: 240,
  accessLog: true,
  scheme: 'http',
  modules: { fastcgi: true, uwsgi: false, scgi: false },
};

const table = RouteTable.empty()
  .setProject('p1', { hosts: ['a.test', 'www.a.test'], upstreams: [{ host: '127.0.0.1', port: 4001 }, { host: '::1', port: 4002 }] })
  .setProject('p2', { hosts: ['stopped.test'], upstreams: [] });

describe('renderNginxConfig', () => {
  const conf = renderNginxConfig(table, settings);

  it('runs in the foreground under supervision, with everything inside its directory', () => {
    expect(conf).toContain('daemon off;');
    expect(conf).toContain('master_process on;');
    expect(conf).toContain('pid "/var/lib/slipway/router/nginx.pid";');
    expect(conf).toContain('error_log "/var/lib/slipway/router/logs/error.log" warn;');
    expect(conf).toContain('access_log "/var/lib/slipway/router/logs/access.log" slipway');
    expect(conf).toContain('client_body_temp_path "/var/lib/slipway/router/temp/client_body";');
    expect(conf).toContain('fastcgi_temp_path');
    expect(conf).not.toContain('uwsgi_temp_path');
    expect(conf).not.toContain('/etc/nginx');
    expect(conf).not.toMatch(/\/var\/(log|lib)\/nginx/);
  });

  it('writes one upstream block per served host, with its replicas', () => {
    expect(conf.match(/upstream slipway\.[a-z.]+ \{/g)).toEqual(['upstream slipway.a.test {', 'upstream slipway.www.a.test {']);
    expect(conf).toContain('server 127.0.0.1:4001 max_fails=1 fail_timeout=5s;');
    expect(conf).toContain('server [::1]:4002 max_fails=1 fail_timeout=5s;');
    expect(conf).toContain('proxy_pass http://slipway.www.a.test;');
  });

  it('proxies WebSockets and streams, with the forwarding headers and failover', () => {
    for (const line of [
      'proxy_http_version 1.1;',
      'proxy_set_header Upgrade $http_upgrade;',
      'proxy_set_header Connection $slipway_connection;',
      'proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
      'proxy_set_header X-Forwarded-Proto http;',
      'proxy_set_header X-Forwarded-Host $http_host;',
      'proxy_buffering off;',
      'proxy_next_upstream error timeout;',
      'client_max_body_size 0;',
    ]) {
      expect(conf).toContain(line);
    }
  });

  it('answers unknown hosts, stopped projects and failed replicas with the pages', () => {
    expect(conf).toMatch(/listen 127\.0\.0\.1:8000 default_server;\s*server_name _;\s*location \/ \{\s*default_type "text\/html; charset=utf-8";\s*add_header Cache-Control no-store always;\s*return 503 "/);
    expect(conf).toContain(PAGES.unknownHost.heading);
    expect(conf).toMatch(/server_name stopped\.test;\s*location \/ \{[^}]*return 503 "/);
    expect(conf).toContain(PAGES.notRunning.heading);
    expect(conf).toContain('error_page 502 504 @slipway_502;');
    expect(conf).toContain(PAGES.badGateway.heading);
    // quotes inside the page are escaped for the nginx string
    expect(conf).toContain('<html lang=\\"en\\">');
  });

  it('answers its generation on the control socket only', () => {
    expect(conf).toContain('listen "unix:/var/lib/slipway/router/control/control.sock";');
    expect(conf).toMatch(/location = \/generation \{\s*default_type text\/plain;\s*return 200 "g-1";/);
  });

  it('listens on IPv6 addresses in brackets', () => {
    expect(renderNginxConfig(RouteTable.empty(), { ...settings, listen: { host: '::', port: 80 } })).toContain('listen [::]:80 default_server;');
  });

  it('sends a staged host to its next upstreams once the flag file exists, and refuses a flag outside its directory', () => {
    const flag = '/var/lib/slipway/router/flags/ab12-3';
    const next = [{ host: '127.0.0.1', port: 4101 }];
    const staged = renderNginxConfig(table, { ...settings, staged: new Map([['a.test', { upstreams: next, flag }]]) });
    expect(staged).toMatch(/upstream slipway-next\.a\.test \{\s*server 127\.0\.0\.1:4101 /);
    const server = staged.split('server {').find((b) => b.includes('server_name a.test;')) ?? '';
    expect(server).toMatch(/location \/ \{\s*if \(-f "\/var\/lib\/slipway\/router\/flags\/ab12-3"\) \{\s*proxy_pass http:\/\/slipway-next\.a\.test;\s*\}\s*proxy_pass http:\/\/slipway\.a\.test;/);
    // the project's other host was not staged, and neither is anything without one
    expect(staged.split('server {').find((b) => b.includes('server_name www.a.test;'))).not.toContain('flags');
    expect(renderNginxConfig(table, settings)).not.toContain('slipway-next');
    for (const bad of ['/var/lib/slipway/router/flags/../nginx.conf', '/tmp/flag', '/var/lib/slipway/router/flags/a"b']) {
      expect(() => renderNginxConfig(table, { ...settings, staged: new Map([['a.test', { upstreams: next, flag: bad }]]) })).toThrow(/is not a file of/);
    }
  });

  it('refuses directories that cannot be written into the config safely', () => {
    expect(() => { assertSafeDir('relative/dir'); }).toThrow(/absolute/);
    expect(() => { assertSafeDir('/tmp/a"b'); }).toThrow(/cannot hold/);
    expect(() => { assertSafeDir('/tmp/$x'); }).toThrow(/cannot hold/);
    expect(() => { assertSafeDir(`/tmp/${'d'.repeat(100)}`); }).toThrow(/too long/);
  });
});

describe('renderNginxConfig with TLS and HTTP-01 (ACME on)', () => {
  const certs = '/var/lib/slipway/router/certs';
  const tlsSettings: NginxConfigSettings = {
    ...settings,
    tls: { listen: { host: '127.0.0.1', port: 8443 }, files: new Map([['a.test', { certificate: `${certs}/a.test.0123456789abcdef.crt`, privateKey: `${certs}/a.test.0123456789abcdef.key` }]]) },
    acmeResponder: { host: '127.0.0.1', port: 40123 },
  };
  const conf = renderNginxConfig(table, tlsSettings);

  it('serves HTTPS only for the hosts with a certificate, and refuses the handshake for any other name', () => {
    expect(conf).toMatch(/listen 127\.0\.0\.1:8443 ssl default_server;\s*server_name _;\s*ssl_reject_handshake on;/);
    expect(conf).toMatch(/listen 127\.0\.0\.1:8443 ssl;\s*server_name a\.test;\s*ssl_certificate "\/var\/lib\/slipway\/router\/certs\/a\.test\.0123456789abcdef\.crt";\s*ssl_certificate_key "[^"]+\.key";\s*location \/ \{\s*proxy_pass http:\/\/slipway\.a\.test;/);
    expect(conf.match(/listen 127\.0\.0\.1:8443 ssl;/g)).toHaveLength(1);
    expect(conf).toContain('ssl_protocols TLSv1.2 TLSv1.3;');
  });

  it('says https in X-Forwarded-Proto on the TLS listener only', () => {
    expect(conf).toMatch(/map \$https \$slipway_forwarded_proto \{\s*default http;\s*on https;\s*\}/);
    expect(conf).toContain('proxy_set_header X-Forwarded-Proto $slipway_forwarded_proto;');
  });

  it('proxies /.well-known/acme-challenge/ to the responder on every plain server, the default one included', () => {
    const plainServers = conf.split('server {').filter((b) => /listen 127\.0\.0\.1:8000/.test(b));
    expect(plainServers).toHaveLength(4);
    for (const b of plainServers) expect(b).toMatch(/location \^~ \/\.well-known\/acme-challenge\/ \{\s*proxy_pass http:\/\/127\.0\.0\.1:40123;/);
    expect(conf.split('server {').filter((b) => b.includes(':8443') && b.includes('acme-challenge'))).toEqual([]);
  });

  it('renders none of it when ACME is off', () => {
    const off = renderNginxConfig(table, settings);
    expect(off).not.toContain('ssl');
    expect(off).not.toContain('acme-challenge');
  });

  it('refuses a certificate file outside its certs directory', () => {
    const evil = { ...tlsSettings, tls: { listen: { host: '127.0.0.1', port: 8443 }, files: new Map([['a.test', { certificate: '/etc/passwd', privateKey: `${certs}/k.key` }]]) } };
    expect(() => renderNginxConfig(table, evil)).toThrow(/is not a file of/);
  });
});

describe('parseListenAddress', () => {
  it('reads the --router-listen forms', () => {
    expect(parseListenAddress(':8000')).toEqual({ host: '0.0.0.0', port: 8000 });
    expect(parseListenAddress('8000')).toEqual({ host: '0.0.0.0', port: 8000 });
    expect(parseListenAddress('127.0.0.1:80')).toEqual({ host: '127.0.0.1', port: 80 });
    expect(parseListenAddress('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(() => parseListenAddress('localhost')).toThrow(/must look like/);
    expect(() => parseListenAddress(':70000')).toThrow(/must look like/);
  });
});

describe('createRouterDriver', () => {
  const base = { listen: { host: '127.0.0.1', port: 0 }, nginxDir: '/tmp/slipway-router-choice' };

  it('uses the Node proxy when asked, or when auto finds no nginx', () => {
    expect(createRouterDriver({ ...base, driver: 'node' }).name).toBe('node');
    const warnings: string[] = [];
    const log = { info: () => undefined, warn: (_o: object, m: string) => { warnings.push(m); }, error: () => undefined };
    expect(createRouterDriver({ ...base, driver: 'auto', nginxBinary: '/nonexistent/nginx', log }).name).toBe('node');
    expect(warnings.join()).toMatch(/nginx not found/);
  });

  it('uses nginx when auto finds it, and insists on it when asked', () => {
    if (findNginx() !== undefined) expect(createRouterDriver({ ...base, driver: 'auto' }).name).toBe('nginx');
    expect(createRouterDriver({ ...base, driver: 'nginx', nginxBinary: '/nonexistent/nginx' }).name).toBe('nginx');
  });
});
