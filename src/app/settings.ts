import { join } from 'node:path';
import type { Writable } from 'node:stream';
import type { RateLimit } from '../http/rate-limit.js';
import { TenantNetworks } from '../http/tenant-guard.js';
import type { AnalysisPoolOptions } from '../modules/logs/analysis-pool.js';
import type { LlmOptions } from '../modules/logs/llm.js';
import { CatalogError, type Catalog } from '../modules/templates/catalog.js';
import { templateCatalog } from '../modules/templates/policy.js';
import type { BackupPolicy } from '../modules/backups/policy.js';
import type { BillingPolicy } from '../modules/billing/policy.js';
import type { DatabasePolicy } from '../modules/databases/policy.js';
import type { DomainPolicy } from '../modules/domains/policy.js';
import type { LogPolicy } from '../modules/logs/policy.js';
import type { ProjectPolicy } from '../modules/projects/policy.js';
import type { InvitationPolicy, StartingWallet, TenantLimits } from '../modules/tenancy/policy.js';
import { DEFAULT_UPTIME_RULES, type NotifyPolicy, type UptimeRules } from '../modules/uptime/policy.js';
import type { Config } from './config.js';

// The configuration (config.ts: flags, environment, defaults) read into the settings the modules
// are built with. Kept apart from server.ts so that the admin commands load neither the API nor
// the deploy engine.

import { StartError } from './errors.js';

/** Each module's settings (its `policy.ts`), each read by that module alone. */
export interface Policies {
  limits: TenantLimits;
  wallet: StartingWallet;
  invitations: InvitationPolicy;
  projects: ProjectPolicy;
  domains: DomainPolicy;
  logs: LogPolicy;
  billing: BillingPolicy;
  databases: DatabasePolicy;
  backups: BackupPolicy;
  templates: Catalog;
  notify: NotifyPolicy;
  uptime: UptimeRules;
}

/** Each module's policy, from the configuration. */
export function policiesOf(config: Config): Policies {
  return {
    limits: config.limits,
    wallet: { currency: config.currency, credit: config.startingCredit },
    invitations: { tokenInResponse: config.invitationTokenInResponse, publicUrl: config.publicUrl },
    projects: { appsDomain: config.appsDomain, routerPort: config.routerListen.port, publicUrl: config.publicUrl },
    domains: { verification: config.domainVerification, dnsServers: config.dnsServers, publicAddresses: config.publicAddresses, maxPerProject: config.maxDomainsPerProject },
    logs: { maxBytesPerProject: config.logMaxBytesPerProject },
    billing: config.billing,
    databases: config.databases,
    backups: { dir: join(config.dataDir, 'backups'), allowPrivate: config.backupAllowPrivate },
    templates: loadCatalog(config),
    notify: { allowPrivate: config.notifyAllowPrivate },
    uptime: { ...DEFAULT_UPTIME_RULES, ...config.uptime },
  };
}

/** The shipped template catalog and `--template-catalog`'s entries, every entry checked: a bad one stops the start. */
function loadCatalog(config: Config): Catalog {
  try {
    return templateCatalog(config.templateCatalog);
  } catch (err) {
    if (err instanceof CatalogError) throw new StartError(err.message);
    throw err;
  }
}

/** The HTTP API's own settings (http.ts): rate limits, proxies, tokens, streams, the request log, the log analysis. */
export interface ApiSettings {
  rateLimit: RateLimit;
  /** Requests from one client address without a valid key (failed auth, invitation accept). */
  anonymousRateLimit: RateLimit;
  /** Signed GitHub deliveries per receiver, counted after the signature check (default 10/s, burst 200). */
  webhookRateLimit?: RateLimit;
  log: { level: string; stream?: Writable };
  /** reverse proxies whose X-Forwarded-For is believed; empty: the TCP peer is the client */
  trustProxy?: string[];
  /** `--metrics-token`: GET /metrics on the API answers to this bearer token only; absent or empty: 404 there (the metrics listener serves it) */
  metricsToken?: string;
  /** the address blocks of tenant containers (the workspace networks), whose connections are refused; absent: none */
  tenantNetworks?: TenantNetworks;
  /** `--github-webhook-secret`: verifies POST /api/webhooks/github; absent or empty refuses every delivery */
  githubWebhookSecret?: string;
  version: string;
  /** how often open streams re-check their caller (default and maximum 10 s; tests use less) */
  streamRecheckMs?: number;
  /** how often open streams ping their clients (default 30 s; tests use less) */
  streamPingMs?: number;
  /** rate-limit refusals are logged once per client per this interval (default 60 s) */
  refusalLogMs?: number;
  /** `--llm-base-url`: the OpenAI-compatible model POST …/logs/analyze also asks (docs/logs-analyzer.md) */
  llm?: Pick<LlmOptions, 'baseUrl' | 'model' | 'apiKey' | 'timeoutMs'> | null;
  /** POST …/logs/analyze: its own per-key rate limit, and the worker pool's size, queue and budget (docs/logs-analyzer.md#cost) */
  analysis?: { rateLimit?: RateLimit | undefined } & AnalysisPoolOptions;
}

/** The HTTP API's settings of `slipway serve`; `log` is where the request log goes (default standard output). */
export function apiSettings(config: Config, version: string, log: { stream?: Writable | undefined } = {}): ApiSettings & { tenantNetworks: TenantNetworks } {
  return {
    rateLimit: config.rateLimit,
    anonymousRateLimit: config.anonymousRateLimit,
    webhookRateLimit: config.webhookRateLimit,
    trustProxy: config.trustProxy,
    githubWebhookSecret: config.githubWebhookSecret,
    metricsToken: config.metricsToken,
    tenantNetworks: new TenantNetworks(config.refuseNetworks),
    log: { level: config.logLevel, ...(log.stream === undefined ? {} : { stream: log.stream }) },
    version,
    llm: config.llm,
    analysis: config.analysis,
  };
}
