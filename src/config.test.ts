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
