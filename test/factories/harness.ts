import { Catalog, SHIPPED_CATALOG } from '../../src/modules/templates/catalog.js';
import { Writable } from 'node:stream';
import { buildApp, type App, type AppDeps } from '../../src/app/http.js';
import { TenantNetworks } from '../../src/http/tenant-guard.js';
import { startMetricsListener } from '../../src/modules/metrics/listener.js';
import type { LeaderLinks, Services } from '../../src/app/compose.js';
import { idSource, iso, systemRandom, type Clock } from '../../src/domain/clock.js';
import type { Role } from '../../src/domain/roles.js';
import { createStore, type Store } from '../../src/store/db.js';
import type { Parts } from '../../src/app/adapters.js';
import type { Policies } from '../../src/app/settings.js';
import { DEFAULT_BILLING_POLICY, type BillingPolicy } from '../../src/modules/billing/policy.js';
import { DEFAULT_DATABASE_POLICY, type DatabasePolicy } from '../../src/modules/databases/policy.js';
import { DEFAULT_DOMAIN_POLICY, type DomainPolicy } from '../../src/modules/domains/policy.js';
import { DEFAULT_LOG_MAX_BYTES } from '../../src/modules/logs/policy.js';
import { DEFAULT_TENANT_LIMITS, type TenantLimits } from '../../src/modules/tenancy/policy.js';
import { DEFAULT_UPTIME_RULES, type UptimeRules } from '../../src/modules/uptime/policy.js';
import type { Mailer } from '../../src/adapters/notify/mailer.js';
import type { GitHubIntegration } from '../../src/modules/github/installations.js';
import type { LogStore } from '../../src/domain/logs.js';
import { openLogStore, sqliteLogFile } from '../../src/store/logs/open.js';
import { SecretBox } from '../../src/adapters/secrets/secret-box.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findOrCreateUser } from '../../src/modules/tenancy/users.js';
import { createWorkspace } from '../../src/modules/tenancy/workspaces.service.js';
import type { RateLimit } from '../../src/http/rate-limit.js';
import { freshDatabase, type StoreKind, type TestDatabase } from './stores.js';
import { LiveLogs } from '../../src/modules/logs/live.js';
import { paymentGateways, type PaymentsMode } from '../../src/modules/billing/gateways/sandbox.js';

/** A clock the test can move; starts at the real time so that expiry maths stays realistic. */
export class TestClock implements Clock {
  private offset = 0;
  now(): Date {
    return new Date(Date.now() + this.offset);
  }
  advance(ms: number): void {
    this.offset += ms;
  }
}

export interface Reply<T = unknown> {
  status: number;
  headers: Headers;
  body: { success: boolean; data?: T; error?: string } & Record<string, unknown>;
  text: string;
}

export interface RequestOptions {
  key?: string | undefined;
  body?: unknown;
  /** sent as is, not JSON-encoded */
  raw?: string | Buffer;
  headers?: Record<string, string>;
}

/**
 * A test server's settings, as the configuration gives them, each optional (the defaults of the
 * modules where absent); the harness makes each module's policy of them, as `serve` does.
 */
export interface TestPlatform {
  appsDomain: string;
  routerPort: number;
  startingCredit: number;
  currency: string;
  publicUrl: string;
  invitationTokenInResponse: boolean;
  limits: Partial<TenantLimits>;
  domains: DomainPolicy;
  /** null: no cap */
  logMaxBytesPerProject: number | null;
  databases: Partial<DatabasePolicy>;
  templates: Catalog;
  billing: Partial<BillingPolicy>;
  notifyAllowPrivate: boolean;
  uptime: Partial<UptimeRules>;
  /** the local backup destination's directory; default a new one under the system's temporary directory */
  backupsDir: string;
  /** S3 backup destinations may point at loopback (a local S3 server) */
  backupAllowPrivate: boolean;
}

/** Each module's policy from a test's settings, over the modules' defaults. */
export function testPolicies(p: Partial<TestPlatform>): Policies {
  const publicUrl = p.publicUrl ?? '';
  return {
    limits: { ...DEFAULT_TENANT_LIMITS, ...p.limits },
    wallet: { currency: p.currency ?? 'USD', credit: p.startingCredit ?? 500 },
    invitations: { tokenInResponse: p.invitationTokenInResponse ?? true, publicUrl },
    projects: { appsDomain: p.appsDomain ?? 'apps.test', routerPort: p.routerPort ?? 8000, publicUrl },
    domains: p.domains ?? DEFAULT_DOMAIN_POLICY,
    logs: { maxBytesPerProject: p.logMaxBytesPerProject === undefined ? DEFAULT_LOG_MAX_BYTES : p.logMaxBytesPerProject },
    billing: { ...DEFAULT_BILLING_POLICY, ...p.billing },
    databases: { ...DEFAULT_DATABASE_POLICY, ...p.databases },
    backups: { dir: p.backupsDir ?? join(tmpdir(), `slipway-test-backups-${randomUUID()}`), allowPrivate: p.backupAllowPrivate ?? false },
    templates: p.templates ?? testCatalog(),
    notify: { allowPrivate: p.notifyAllowPrivate ?? false },
    uptime: { ...DEFAULT_UPTIME_RULES, ...p.uptime },
  };
}

export interface TestServer {
  url: string;
  /** GET /metrics on the operator's metrics listener (loopback), not on the API */
  metricsUrl: string;
  app: App;
  store: Store;
  services: Services;
  /** what the leader's workers set in `serve` (the engine, the database and billing workers): a test's own workers set them */
  leader: LeaderLinks;
  deps: Parts;
  clock: TestClock;
  database: TestDatabase;
  /** the apps' runtime logs (deps.logs): tests append lines straight through it; and the live tail over it (notify it after appending) */
  logStore: LogStore;
  liveLogs: LiveLogs;
  /** every line the server logged */
  logs: string[];
  request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<Reply<T>>;
  close(): Promise<void>;
}

/** A log for the leader's workers in tests: quiet, but errors are shown. */
export const quietLog = { info: () => undefined, warn: () => undefined, error: (obj: object, msg: string) => { console.error(msg, obj); } };

const GENEROUS: RateLimit = { rate: 100_000, burst: 100_000 };

/** The whole API on a real port, over a fresh store of the given kind. */
let catalog: Catalog | null = null;

/** The shipped template catalog with the test entries (test/factories/templates.catalog.json), as `--template-catalog` adds them. */
export function testCatalog(): Catalog {
  catalog ??= Catalog.load([SHIPPED_CATALOG, TEST_CATALOG]);
  return catalog;
}

export const TEST_CATALOG = new URL('./templates.catalog.json', import.meta.url).pathname;

export async function startTestServer(
  kind: StoreKind,
  opts: { rateLimit?: RateLimit; anonymousRateLimit?: RateLimit; webhookRateLimit?: RateLimit; metricsToken?: string; tenantNetworks?: string[]; host?: string; trustProxy?: string[]; platform?: Partial<TestPlatform>; githubWebhookSecret?: string; mailer?: Mailer; github?: GitHubIntegration; streamRecheckMs?: number; streamPingMs?: number; refusalLogMs?: number; replicaOf?: TestServer; llm?: AppDeps['llm']; gateways?: Parts['gateways']; payments?: PaymentsMode; analysis?: AppDeps['analysis'] } = {},
): Promise<TestServer> {
  // a replica: another API process over the same store (its own caches, its own connections)
  const database = opts.replicaOf?.database ?? (await freshDatabase(kind, { migrated: true }));
  const store = await createStore(database.url);
  // SQLite: logs.db next to the fresh store's file, as `slipway serve` keeps it
  const logStore = openLogStore(store, sqliteLogFile(database.url));
  const clock = new TestClock();
  const deps: Parts = {
    store,
    clock,
    random: systemRandom,
    ids: idSource(clock, systemRandom),
    secrets: new SecretBox(randomBytes(32), systemRandom),
    logs: logStore,
    policies: testPolicies(opts.platform ?? {}),
    ...(opts.mailer === undefined ? {} : { mailer: opts.mailer }),
    ...(opts.github === undefined ? {} : { github: opts.github }),
    // as `slipway serve` builds them: the sandbox only where a test turns it on (`payments: 'sandbox'`), as the operator must
    gateways: paymentGateways(opts.gateways ?? {}, opts.payments ?? 'off'),
  };
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      cb();
    },
  });
  const liveLogs = new LiveLogs({ store: logStore, postgresUrl: database.kind === 'postgres' ? database.url : undefined });
  const { app, services, leader, metrics } = await buildApp({
    ...deps,
    rateLimit: opts.rateLimit ?? GENEROUS,
    anonymousRateLimit: opts.anonymousRateLimit ?? GENEROUS,
    ...(opts.webhookRateLimit === undefined ? {} : { webhookRateLimit: opts.webhookRateLimit }),
    ...(opts.metricsToken === undefined ? {} : { metricsToken: opts.metricsToken }),
    ...(opts.tenantNetworks === undefined ? {} : { tenantNetworks: new TenantNetworks(opts.tenantNetworks) }),
    log: { level: 'info', stream },
    ...(opts.trustProxy === undefined ? {} : { trustProxy: opts.trustProxy }),
    ...(opts.githubWebhookSecret === undefined ? {} : { githubWebhookSecret: opts.githubWebhookSecret }),
    ...(opts.streamRecheckMs === undefined ? {} : { streamRecheckMs: opts.streamRecheckMs }),
    ...(opts.streamPingMs === undefined ? {} : { streamPingMs: opts.streamPingMs }),
    ...(opts.refusalLogMs === undefined ? {} : { refusalLogMs: opts.refusalLogMs }),
    version: 'test',
    liveLogs,
    ...(opts.llm === undefined ? {} : { llm: opts.llm }),
    // the analysis limit is generous unless a test asks for one (like the general limit)
    analysis: { rateLimit: GENEROUS, ...opts.analysis },
  });
  // `host`: every interface, for a test whose client is a container; the URL stays on loopback
  const listened = await app.listen({ host: opts.host ?? '127.0.0.1', port: 0 });
  const url = opts.host === undefined ? listened : `http://127.0.0.1:${new URL(listened).port}`;
  // the operator's metrics listener, as `slipway serve` starts it beside the API (loopback)
  const metricsListener = await startMetricsListener({ host: '127.0.0.1', port: 0, registry: metrics, tenants: new TenantNetworks(opts.tenantNetworks ?? []), log: app.log });

  const request = async <T>(method: string, path: string, o: RequestOptions = {}): Promise<Reply<T>> => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.key !== undefined) headers['x-api-key'] = o.key;
    let body: string | Buffer | undefined;
    if (o.raw !== undefined) body = o.raw;
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    // an absolute URL the API showed (a webhook_url) as is; a path under this server
    const target = /^https?:\/\//.test(path) ? path : url + path;
    const res = await fetch(target, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await res.text();
    let parsed: Reply<T>['body'];
    try {
      parsed = JSON.parse(text) as Reply<T>['body'];
    } catch {
      parsed = { success: false, error: `(not JSON) ${text.slice(0, 200)}` };
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  return {
    url,
    app,
    store,
    services,
    leader,
    deps,
    clock,
    database,
    logStore,
    liveLogs,
    logs,
    request,
    metricsUrl: `${metricsListener.url}/metrics`,
    close: async () => {
      await metricsListener.close();
      await app.close();
      await liveLogs.close();
      await logStore.close();
      await store.close();
      if (opts.replicaOf === undefined) await database.drop();
    },
  };
}

export interface TestUser {
  id: string;
  email: string;
  key: string;
  keyId: string;
}

let counter = 0;
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;

/** A user with a live key listed under `workspaceId` (created straight in the store). */
export async function makeUser(s: TestServer, workspaceId: string, email = `u${unique()}@example.com`): Promise<TestUser> {
  const user = await findOrCreateUser(s.deps, s.store.repos, email);
  const key = await s.services.apiKeys.issue(s.store.repos, { userId: user.id, workspaceId, name: 'test', expiresInDays: 30 });
  return { id: user.id, email: user.email, key: key.key, keyId: key.id };
}

export interface TestWorkspace {
  id: string;
  slug: string;
  owner: TestUser;
  admin: TestUser;
  member: TestUser;
}

/** A workspace with one owner, one admin and one member, each holding a key. */
export async function makeWorkspace(s: TestServer, slug = `ws-${unique()}`): Promise<TestWorkspace> {
  const { members } = s.store.repos;
  const ownerRow = await findOrCreateUser(s.deps, s.store.repos, `u${unique()}@example.com`);
  // not counted against the owner's --max-workspaces-per-user, like the bootstrap's
  const { id, created_at: now } = await s.store.transaction((tx) => createWorkspace(s.deps, s.deps.policies.wallet, tx, { name: slug, slug, ownerId: ownerRow.id, countedFor: null }));
  const ownerKey = await s.services.apiKeys.issue(s.store.repos, { userId: ownerRow.id, workspaceId: id, name: 'test', expiresInDays: 30 });
  const owner: TestUser = { id: ownerRow.id, email: ownerRow.email, key: ownerKey.key, keyId: ownerKey.id };
  const people: Partial<Record<Exclude<Role, 'owner'>, TestUser>> = {};
  for (const role of ['admin', 'member'] as const) {
    const u = await makeUser(s, id);
    await members.add({ workspace_id: id, user_id: u.id, role, joined_at: now });
    people[role] = u;
  }
  const { admin, member } = people as Record<Exclude<Role, 'owner'>, TestUser>;
  return { id, slug, owner, admin, member };
}

export interface TestProject {
  id: string;
  slug: string;
  name: string;
}

/** A project straight in the store, with the defaults of docs/decisions.md#projects. */
export async function makeProject(s: TestServer, w: { id: string }, name = `app-${unique()}`): Promise<TestProject> {
  const now = iso(s.clock.now());
  const id = s.deps.ids.id();
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  const ws = await s.store.db.selectFrom('workspaces').select('slug').where('id', '=', w.id).executeTakeFirstOrThrow();
  await s.store.db
    .insertInto('projects')
    .values({ id, workspace_id: w.id, name, slug, port: 8080, replicas: 1, cpu: '0.5', ram: '0.5', status: 'pending', created_at: now, updated_at: now, host_label: `${slug}-${ws.slug}` })
    .execute();
  return { id, slug, name };
}
