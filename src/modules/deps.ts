import type { BillingPolicy } from './billing/policy.js';
import type { GatewayName, PaymentGateway } from './billing/gateways/gateway.js';
import type { Catalog } from './templates/catalog.js';
import type { UptimeRules } from './uptime/uptime.worker.js';
import type { DatabasePolicy } from './databases/policy.js';
import type { Clock, IdSource, Random } from '../domain/clock.js';
import type { LogStore } from '../domain/logs.js';
import type { Mailer } from '../adapters/notify/mailer.js';
import type { GitHubIntegration } from './github/installations.js';
import type { SecretBox } from '../adapters/secrets/secret-box.js';
import type { TenantLimits } from './tenancy/policy.js';
import type { Store } from '../store/db.js';

/** Platform-wide settings the services need (from the configuration). */
export interface Platform {
  /** apps get `<project>-<workspace>.<appsDomain>` */
  appsDomain: string;
  /** the port the router serves apps on, for the URLs shown to users */
  routerPort: number;
  /** credit of a new workspace's wallet, in minor units */
  startingCredit: number;
  currency: string;
  /** `--public-url`: the API's address as GitHub reaches it, for the webhook URLs shown; empty or absent: paths alone */
  publicUrl?: string;
  /** without a mailer: whether the invitation create response carries the token (default yes) */
  invitationTokenInResponse?: boolean;
  /** workspaces per user, projects per workspace (DEFAULT_TENANT_LIMITS where absent) */
  limits?: Partial<TenantLimits>;
  /** custom domains: proof of ownership and the limit per project (DEFAULT_DOMAIN_POLICY when absent) */
  domains?: DomainPolicy;
  /** `--log-max-bytes-per-project`: the bytes of log messages a project keeps; null: no cap; absent: DEFAULT_LOG_MAX_BYTES */
  logMaxBytesPerProject?: number | null;
  /** managed databases: images, publishing, sizes (DEFAULT_DATABASE_POLICY where absent) */
  databases?: Partial<DatabasePolicy>;
  /** the template catalog (the shipped one where absent) */
  templates?: Catalog;
  /** prices, grace period, top-up bounds (DEFAULT_BILLING_POLICY where absent) */
  billing?: Partial<BillingPolicy>;
  /** `--notify-allow-private`: chat webhooks may target loopback, link-local and private addresses */
  notifyAllowPrivate?: boolean;
  /** `--uptime-failures`, `--uptime-successes`: the confirmations a status change needs (DEFAULT_UPTIME_RULES where absent) */
  uptime?: Partial<UptimeRules>;
}

/** 1 GiB of messages per project (`--log-max-bytes-per-project`). */
export const DEFAULT_LOG_MAX_BYTES = 1024 ** 3;

/** How custom domains are trusted (docs/router.md "Custom domains"). */
export interface DomainPolicy {
  /** dns: routed once ownership is proven (TXT record, or the name resolving to a public address); off: trusted and verified at once */
  verification: 'dns' | 'off';
  /** resolvers asked, `ip` or `ip:port`; empty: the system's */
  dnsServers: readonly string[];
  /** this installation's public addresses: a name whose A/AAAA records include one is proven; empty: TXT records only */
  publicAddresses: readonly string[];
  maxPerProject: number;
}

export const DEFAULT_DOMAIN_POLICY: DomainPolicy = { verification: 'dns', dnsServers: [], publicAddresses: [], maxPerProject: 20 };

/** What every service is built from, injected by the composition root (or a test). */
export interface Deps {
  store: Store;
  clock: Clock;
  random: Random;
  ids: IdSource;
  secrets: SecretBox;
  platform: Platform;
  /** the apps' runtime logs (docs/logs.md); closed after the store's users stop */
  logs: LogStore;
  /** outgoing e-mail (`--smtp-url`); absent: Slipway sends none */
  mailer?: Mailer | undefined;
  /** the GitHub App (`--github-app-*`); absent: installations cannot be linked or used */
  github?: GitHubIntegration | undefined;
  /** the payment gateway of each top-up path (`--stripe-*`, `--paystack-*`, or the sandbox with `--payments sandbox`); absent: that path answers 503 */
  gateways?: Partial<Record<GatewayName, PaymentGateway>> | undefined;
}
