import { describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from './config.js';

describe('resolveConfig', () => {
  it('needs nothing: SQLite under ./data, API on :3000, router on :8000', () => {
    const c = resolveConfig({}, {}, '/srv');
    expect(c.listen).toEqual({ host: '0.0.0.0', port: 3000 });
    expect(c.routerListen).toEqual({ host: '0.0.0.0', port: 8000 });
    expect(c.dataDir).toBe('/srv/data');
    expect(c.databaseUrl).toBe('/srv/data/slipway.db');
    expect(c.secretKeyFile).toBe('/srv/data/secret.key');
    expect(c.appsDomain).toBe('localhost');
    expect(c.gitBaseUrl).toBe('https://github.com');
    expect(c.rateLimit).toEqual({ rate: 20, burst: 100 });
  });

  it('takes flags over SLIPWAY_* variables over defaults', () => {
    const c = resolveConfig({ listen: '127.0.0.1:4000' }, { SLIPWAY_LISTEN: ':5000', SLIPWAY_APPS_DOMAIN: 'apps.example.com' }, '/srv');
    expect(c.listen).toEqual({ host: '127.0.0.1', port: 4000 });
    expect(c.appsDomain).toBe('apps.example.com');
  });

  it('selects PostgreSQL for a postgres:// URL and accepts IPv6 listen addresses', () => {
    const c = resolveConfig({ 'database-url': 'postgres://u:p@db:5432/slipway', listen: '[::1]:3000' }, {}, '/srv');
    expect(c.databaseUrl).toBe('postgres://u:p@db:5432/slipway');
    expect(c.listen).toEqual({ host: '::1', port: 3000 });
  });

  it('reports every problem at once, naming where each came from', () => {
    let err: unknown;
    try {
      resolveConfig({ listen: 'nonsense', 'log-level': 'loud' }, { SLIPWAY_RATE_LIMIT: '-1', SLIPWAY_DATABASE_URL: 'mysql://x' }, '/srv');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems.join('\n');
    expect(problems).toContain('--listen must be [host]:port');
    expect(problems).toContain('--log-level must be one of');
    expect(problems).toContain('SLIPWAY_RATE_LIMIT must be a positive number');
    expect(problems).toContain('SLIPWAY_DATABASE_URL must be a postgres:// URL or an SQLite file path');
  });
});

describe('trust-proxy', () => {
  it('is off by default and takes a comma-separated list', () => {
    expect(resolveConfig({}, {}, '/srv').trustProxy).toEqual([]);
    expect(resolveConfig({ 'trust-proxy': '127.0.0.1, 10.0.0.0/8' }, {}, '/srv').trustProxy).toEqual(['127.0.0.1', '10.0.0.0/8']);
  });
});

describe('ACME (TLS)', () => {
  it('is off by default, with the TLS listener at :8443 for when it is on', () => {
    const c = resolveConfig({}, {}, '/srv');
    expect(c.acme).toBeNull();
    expect(c.routerTlsListen).toEqual({ host: '0.0.0.0', port: 8443 });
  });

  it('turns on with a directory URL, with an optional contact and CA file', () => {
    const c = resolveConfig(
      { 'acme-directory-url': 'https://acme.example.com/dir', 'router-tls-listen': ':443' },
      { SLIPWAY_ACME_EMAIL: 'ops@example.com', SLIPWAY_ACME_CA_FILE: 'ca/root.pem' },
      '/srv',
    );
    expect(c.acme).toEqual({ directoryUrl: 'https://acme.example.com/dir', email: 'ops@example.com', caFile: '/srv/ca/root.pem' });
    expect(c.routerTlsListen).toEqual({ host: '0.0.0.0', port: 443 });
    expect(resolveConfig({ 'acme-directory-url': 'https://acme.example.com/dir' }, {}, '/srv').acme).toEqual({ directoryUrl: 'https://acme.example.com/dir', email: null, caFile: null });
  });

  it('refuses a directory that is not https, a bad contact and a TLS port equal to the plain one', () => {
    let err: unknown;
    try {
      resolveConfig({ 'acme-directory-url': 'http://acme.example.com/dir', 'acme-email': 'nobody', 'router-listen': ':8000', 'router-tls-listen': '127.0.0.1:8000' }, {}, '/srv');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems.join('\n');
    expect(problems).toContain('--acme-directory-url must be an https:// URL');
    expect(problems).toContain('--acme-email must be an e-mail address');
    expect(problems).toContain("--router-tls-listen must be another port than the router's plain HTTP port 8000");
    expect(() => resolveConfig({ 'router-tls-listen': 'nonsense' }, {}, '/srv')).toThrow(/--router-tls-listen must be \[host\]:port/);
  });
});
