import { totalmem } from 'node:os';
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

  it('keeps the payments sandbox off unless the operator turns it on, and refuses other values (issue 26 item 4)', () => {
    expect(resolveConfig({}, {}, '/srv').payments).toBe('off');
    expect(resolveConfig({ payments: 'sandbox' }, {}, '/srv').payments).toBe('sandbox');
    expect(resolveConfig({}, { SLIPWAY_PAYMENTS: 'sandbox' }, '/srv').payments).toBe('sandbox');
    expect(() => resolveConfig({ payments: 'free' }, {}, '/srv')).toThrow('--payments must be one of off, sandbox (got "free").');
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

  it('takes the administrative URL of a shared database server per type, and refuses a wrong one without echoing it', () => {
    const c = resolveConfig({ 'database-shared-postgresql': 'postgresql://admin:s3cret@pg.internal:5432/postgres' }, { SLIPWAY_DATABASE_SHARED_REDIS: 'redis://default:pw@cache:6379' }, '/srv');
    expect(c.databases.shared).toEqual({ postgresql: 'postgresql://admin:s3cret@pg.internal:5432/postgres', redis: 'redis://default:pw@cache:6379' });
    expect(resolveConfig({}, {}, '/srv').databases.shared).toEqual({});
    let err: unknown;
    try {
      resolveConfig({ 'database-shared-mysql': 'postgresql://root:hunter2@db' }, { SLIPWAY_DATABASE_SHARED_MONGO: 'not a url hunter2' }, '/srv');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems).toEqual(['--database-shared-mysql must start with mysql:// or mariadb://.', 'SLIPWAY_DATABASE_SHARED_MONGO is not a URL.']);
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

describe('SMTP and invitation tokens', () => {
  it('sends no e-mail by default, and shows invitation tokens then', () => {
    const c = resolveConfig({}, {}, '/srv');
    expect(c.smtp).toBeNull();
    expect(c.invitationTokenInResponse).toBe(true);
  });

  it('reads an smtp(s):// URL with credentials, and the From address', () => {
    const c = resolveConfig({ 'smtp-url': 'smtps://mailer%40corp:p%3Ass@mail.example.com', 'smtp-from': 'Ops <ops@example.com>' }, { SLIPWAY_INVITATION_TOKEN_IN_RESPONSE: 'no' }, '/srv');
    expect(c.smtp).toEqual({ host: 'mail.example.com', port: 465, secure: true, user: 'mailer@corp', password: 'p:ss', from: 'Ops <ops@example.com>' });
    expect(c.invitationTokenInResponse).toBe(false);
    expect(resolveConfig({ 'smtp-url': 'smtp://127.0.0.1:2525' }, {}, '/srv').smtp).toMatchObject({ host: '127.0.0.1', port: 2525, secure: false, user: null, password: null, from: 'Slipway <slipway@localhost>' });
  });

  it('refuses a bad URL, From or yes/no without ever echoing the SMTP password', () => {
    let message = '';
    try {
      resolveConfig({ 'smtp-url': 'http://user:hunter2secret@mail.example.com', 'smtp-from': 'nobody', 'invitation-token-in-response': 'maybe' }, {}, '/srv');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('--smtp-url must be an smtp:// or smtps:// URL (got a http URL).');
    expect(message).toContain('--smtp-from must be an e-mail address');
    expect(message).toContain('--invitation-token-in-response must be one of yes, no (got "maybe").');
    expect(message).not.toContain('hunter2secret');
  });

  it('takes the GitHub App client id and secret together, with the App, and never echoes the secret', () => {
    const c = resolveConfig({ 'github-app-id': '12', 'github-app-private-key-file': 'app.pem' }, { SLIPWAY_GITHUB_APP_CLIENT_ID: 'Iv1.abc', SLIPWAY_GITHUB_APP_CLIENT_SECRET: 's3cr3t-value' }, '/srv');
    expect(c.githubApp).toEqual({ id: '12', privateKeyFile: '/srv/app.pem', apiUrl: 'https://api.github.com', clientId: 'Iv1.abc', clientSecret: 's3cr3t-value', webUrl: 'https://github.com' });
    const problems = (flags: Record<string, string>, env: Record<string, string>) => {
      try {
        resolveConfig(flags, env, '/srv');
      } catch (err) {
        return (err as Error).message;
      }
      return '';
    };
    const half = problems({ 'github-app-id': '12', 'github-app-private-key-file': 'app.pem' }, { SLIPWAY_GITHUB_APP_CLIENT_SECRET: 's3cr3t-value' });
    expect(half).toContain('SLIPWAY_GITHUB_APP_CLIENT_ID is needed too: linking installations takes both the client id and the client secret of the GitHub App.');
    expect(half).not.toContain('s3cr3t-value');
    expect(problems({ 'github-app-client-id': 'Iv1.abc' }, { SLIPWAY_GITHUB_APP_CLIENT_SECRET: 's3cr3t-value' })).toContain('--github-app-client-id needs the GitHub App itself too');
    expect(problems({ 'github-app-id': '12', 'github-app-private-key-file': 'app.pem', 'github-web-url': 'github.com' }, {})).toContain('--github-web-url must be an http(s):// URL');
  });
});

describe('tenant limits and the network pool', () => {
  const problems = (flags: Record<string, string>) => {
    try {
      resolveConfig(flags, {}, '/srv');
    } catch (err) {
      return (err as Error).message;
    }
    return '';
  };

  it('limits 10 workspaces per user, 50 projects and 10 databases per workspace, reserved memory to the host\'s, and pools networks in 10.213.0.0/16 by default', () => {
    const c = resolveConfig({}, {}, '/srv');
    expect(c.limits).toEqual({ maxWorkspacesPerUser: 10, maxProjectsPerWorkspace: 50, maxDatabasesPerWorkspace: 10, maxReservedMemoryMb: Math.floor(totalmem() / 1024 ** 2) });
    expect(c.networkPool).toEqual({ cidr: '10.213.0.0/16', size: 24 });
    const custom = resolveConfig(
      { 'max-workspaces-per-user': '0', 'max-databases-per-workspace': '3', 'max-reserved-memory': '1.5', 'network-pool': '10.200.0.0/14', 'network-size': '26' },
      { SLIPWAY_MAX_PROJECTS_PER_WORKSPACE: '7' },
      '/srv',
    );
    expect(custom.limits).toEqual({ maxWorkspacesPerUser: 0, maxProjectsPerWorkspace: 7, maxDatabasesPerWorkspace: 3, maxReservedMemoryMb: 1536 });
    expect(resolveConfig({ 'max-reserved-memory': '0' }, {}, '/srv').limits.maxReservedMemoryMb).toBe(0);
    expect(custom.networkPool).toEqual({ cidr: '10.200.0.0/14', size: 26 });
    expect(resolveConfig({ 'network-pool': '' }, {}, '/srv').networkPool).toBeNull();
  });

  it.each([
    [{ 'max-workspaces-per-user': '-1' }, '--max-workspaces-per-user must be a whole number from 0 to 1000000 (got "-1").'],
    [{ 'max-databases-per-workspace': '2.5' }, '--max-databases-per-workspace must be a whole number from 0 to 1000000 (got "2.5").'],
    [{ 'max-reserved-memory': 'lots' }, '--max-reserved-memory must be a number of GiB from 0 to 1048576 (0: no bound), or auto (got "lots").'],
    [{ 'network-pool': '10.213.0.0' }, '--network-pool with SLIPWAY_NETWORK_SIZE must be an IPv4 CIDR block like 10.213.0.0/16 (got "10.213.0.0").'],
    [{ 'network-pool': 'fd00::/64' }, 'must be an IPv4 CIDR block'],
    [{ 'network-pool': '10.213.1.0/16' }, 'must start at its block\'s first address (10.213.0.0/16, not "10.213.1.0/16")'],
    [{ 'network-size': '30' }, 'needs a network size from /16 (the pool\'s own) to /28 (got /30)'],
    [{ 'network-pool': '10.0.0.0/24', 'network-size': '16' }, 'needs a network size from /24'],
  ])('refuses %j', (flags, message) => {
    expect(problems(flags)).toContain(message);
  });
});

describe('the operator\'s metrics and the control plane\'s ports (issue 26 item 8)', () => {
  const problems = (flags: Record<string, string>): string => {
    try {
      resolveConfig(flags, {}, '/srv');
    } catch (err) {
      return (err as Error).message;
    }
    return '';
  };

  it('serves metrics on a loopback listener of their own, not on the API, and refuses the workspace pool by default', () => {
    const c = resolveConfig({}, {}, '/srv');
    expect(c.metricsListen).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(c.metricsToken).toBe('');
    expect(c.refuseNetworks).toEqual(['10.213.0.0/16']);
    expect(c.webhookRateLimit).toEqual({ rate: 10, burst: 200 });
  });

  it('takes off, a token, Docker\'s default bridges without a pool, none, and added blocks', () => {
    const token = 'x'.repeat(32);
    const c = resolveConfig({ 'metrics-listen': 'off', 'metrics-token': token, 'network-pool': '' }, {}, '/srv');
    expect(c.metricsListen).toBeNull();
    expect(c.metricsToken).toBe(token);
    expect(c.refuseNetworks).toHaveLength(15);
    expect(c.refuseNetworks[0]).toBe('172.17.0.0/16');
    expect(c.refuseNetworks).not.toContain('192.168.0.0/16');
    expect(resolveConfig({ 'api-refuse-networks': 'none' }, {}, '/srv').refuseNetworks).toEqual([]);
    expect(resolveConfig({ 'api-refuse-networks': 'workspaces,172.16.0.0/16' }, {}, '/srv').refuseNetworks).toEqual(['10.213.0.0/16', '172.16.0.0/16']);
    expect(resolveConfig({ 'api-refuse-networks': '192.0.2.0/24' }, {}, '/srv').refuseNetworks).toEqual(['192.0.2.0/24']);
  });

  it.each([
    [{ 'metrics-token': 'short' }, '--metrics-token must be at least 32 characters without spaces (got 5 characters).'],
    [{ 'metrics-listen': '127.0.0.1:3000' }, '--metrics-listen must be another port than the API\'s 3000 (or off).'],
    [{ 'metrics-listen': 'loopback' }, '--metrics-listen must be [host]:port'],
    [{ 'api-refuse-networks': 'workspaces,10.0.0.0' }, '--api-refuse-networks must be workspaces, none, or IPv4 CIDR blocks like 10.0.0.0/8 (got "10.0.0.0").'],
  ])('refuses %j', (flags, message) => {
    expect(problems(flags)).toContain(message);
  });
});
