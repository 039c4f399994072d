import type { Writable } from 'node:stream';
import type { RateLimit } from '../http/rate-limit.js';
import { TenantNetworks } from '../http/tenant-guard.js';
import type { AnalysisPoolOptions } from '../modules/logs/analysis-pool.js';
import type { LlmOptions } from '../modules/logs/llm.js';
import { Catalog, CatalogError, SHIPPED_CATALOG } from '../modules/templates/catalog.js';
import type { Platform } from '../modules/deps.js';
import type { Config } from './config.js';

// The configuration (config.ts: flags, environment, defaults) read into the settings the modules
// are built with. Kept apart from server.ts so that the admin commands load neither the API nor
// the deploy engine.

/** A start that failed for a reason the operator can fix (reported without a stack trace). */
export class StartError extends Error {}

/** The platform-wide settings the services read. */
export function platformSettings(config: Config): Platform {
  return {
    appsDomain: config.appsDomain,
    routerPort: config.routerListen.port,
    startingCredit: config.startingCredit,
    limits: config.limits,
    currency: config.currency,
    domains: { verification: config.domainVerification, dnsServers: config.dnsServers, publicAddresses: config.publicAddresses, maxPerProject: config.maxDomainsPerProject },
    publicUrl: config.publicUrl,
    invitationTokenInResponse: config.invitationTokenInResponse,
    logMaxBytesPerProject: config.logMaxBytesPerProject,
    databases: config.databases,
    templates: loadCatalog(config),
    billing: config.billing,
    notifyAllowPrivate: config.notifyAllowPrivate,
    uptime: config.uptime,
  };
}

/** The shipped template catalog and `--template-catalog`'s entries, every entry checked: a bad one stops the start. */
function loadCatalog(config: Config): Catalog {
  try {
    return Catalog.load([SHIPPED_CATALOG, ...(config.templateCatalog === '' ? [] : [config.templateCatalog])]);
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
