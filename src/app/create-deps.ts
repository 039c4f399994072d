import { CatalogError, type Catalog } from '../modules/templates/catalog.js';
import { templateCatalog } from '../modules/templates/policy.js';
import { existsSync, readFileSync } from 'node:fs';
import { GitHubApp } from '../adapters/git/index.js';
import { PaystackGateway } from '../modules/billing/gateways/paystack.js';
import { paymentGateways } from '../modules/billing/gateways/sandbox.js';
import { StripeGateway } from '../modules/billing/gateways/stripe.js';
import type { Config } from './config.js';
import type { Clock, IdSource, Random } from '../domain/clock.js';
import type { LogStore } from '../domain/logs.js';
import type { Mailer } from '../adapters/notify/mailer.js';
import type { BillingPolicy } from '../modules/billing/policy.js';
import type { PaymentGateways } from '../modules/billing/wallet.service.js';
import type { DatabasePolicy } from '../modules/databases/policy.js';
import type { DomainPolicy } from '../modules/domains/policy.js';
import type { LogPolicy } from '../modules/logs/policy.js';
import type { ProjectPolicy } from '../modules/projects/policy.js';
import type { InvitationPolicy, StartingWallet, TenantLimits } from '../modules/tenancy/policy.js';
import type { NotifyPolicy, UptimeRules } from '../modules/uptime/policy.js';
import { systemRandom, systemSources } from '../domain/clock.js';
import { DEFAULT_UPTIME_RULES } from '../modules/uptime/policy.js';
import type { GitHubIntegration } from '../modules/github/installations.js';
import { GitHubOAuth } from '../modules/github/oauth.js';
import { openLogStore, sqliteLogFile } from '../store/logs/open.js';
import { createSmtpMailer } from '../adapters/notify/mailer.js';
import { loadOrCreateSecretKey } from '../adapters/secrets/secret-key.js';
import { SecretBox } from '../adapters/secrets/secret-box.js';
import type { Store } from '../store/db.js';

// What `slipway serve` and `slipway admin` share: the dependencies of every service, made from
// the configuration and an open store. Kept apart from server.ts so that the admin commands load
// neither the API nor the deploy engine.

/** A start that failed for a reason the operator can fix (reported without a stack trace). */
export class StartError extends Error {}

/**
 * A store that holds sealed values must never get a fresh key: that would make every secret
 * unreadable without a word. Refuse to start instead, naming the file to restore.
 */
async function guardSecretKey(config: Config, store: Store): Promise<void> {
  if (existsSync(config.secretKeyFile)) return;
  if (await store.repos.meta.holdsSealedValues()) {
    throw new StartError(
      `the secret key file ${config.secretKeyFile} is missing, but the store holds values encrypted with it; restore the file (see docs/operations.md) instead of starting with a new key.`,
    );
  }
}

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
  templates: Catalog;
  notify: NotifyPolicy;
  uptime: UptimeRules;
}

/** What the services and workers are built from: the store, the sources, the adapters and each module's policy. */
export interface Parts {
  store: Store;
  clock: Clock;
  random: Random;
  ids: IdSource;
  secrets: SecretBox;
  /** the apps' runtime logs (docs/logs.md); closed after the store's users stop */
  logs: LogStore;
  /** outgoing e-mail (`--smtp-url`); absent: Slipway sends none */
  mailer?: Mailer | undefined;
  /** the GitHub App (`--github-app-*`); absent: installations cannot be linked or used */
  github?: GitHubIntegration | undefined;
  /** the payment gateway of each top-up path; a path without one answers 503 */
  gateways: PaymentGateways;
  policies: Policies;
}

/** Each module's policy, from the configuration. */
export function policiesOf(config: Config, templates: Catalog): Policies {
  return {
    limits: config.limits,
    wallet: { currency: config.currency, credit: config.startingCredit },
    invitations: { tokenInResponse: config.invitationTokenInResponse, publicUrl: config.publicUrl },
    projects: { appsDomain: config.appsDomain, routerPort: config.routerListen.port, publicUrl: config.publicUrl },
    domains: { verification: config.domainVerification, dnsServers: config.dnsServers, publicAddresses: config.publicAddresses, maxPerProject: config.maxDomainsPerProject },
    logs: { maxBytesPerProject: config.logMaxBytesPerProject },
    billing: config.billing,
    databases: config.databases,
    templates,
    notify: { allowPrivate: config.notifyAllowPrivate },
    uptime: { ...DEFAULT_UPTIME_RULES, ...config.uptime },
  };
}

/** Every service's and worker's dependencies, from the configuration and an open store. */
export async function createDeps(config: Config, store: Store): Promise<Parts> {
  await guardSecretKey(config, store);
  const secrets = new SecretBox(loadOrCreateSecretKey(config.secretKeyFile, systemRandom), systemRandom);
  return {
    store,
    ...systemSources(),
    secrets,
    policies: policiesOf(config, loadCatalog(config)),
    gateways: gateways(config),
    ...(config.smtp === null ? {} : { mailer: await createSmtpMailer(config.smtp) }),
    ...(config.githubApp === null ? {} : { github: createGitHub(config.githubApp) }),
    // last: nothing after it can fail and leave it open. The caller closes it with the store.
    logs: openLogStore(store, sqliteLogFile(config.databaseUrl.replace(/^sqlite:/, ''))),
  };
}

/** The payment gateway of each top-up path that has keys configured; the others are off, or the sandbox with `--payments sandbox`. */
function gateways(config: Config): PaymentGateways {
  return paymentGateways(
    {
      ...(config.stripe === null ? {} : { gatewaya: new StripeGateway({ name: 'gatewaya', ...config.stripe }) }),
      ...(config.paystack === null ? {} : { gatewayb: new PaystackGateway({ name: 'gatewayb', ...config.paystack }) }),
    },
    config.payments,
  );
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

/** The GitHub App of `--github-app-*`: installation tokens, and (with the client id and secret) the link flow. */
function createGitHub(c: NonNullable<Config['githubApp']>): GitHubIntegration {
  let privateKey: string;
  try {
    privateKey = readFileSync(c.privateKeyFile, 'utf8');
  } catch (err) {
    throw new StartError(`the GitHub App private key file ${c.privateKeyFile} (--github-app-private-key-file) cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
  }
  let app: GitHubApp;
  try {
    app = new GitHubApp({ appId: c.id, privateKey, apiUrl: c.apiUrl });
  } catch (err) {
    throw new StartError(err instanceof Error ? err.message : String(err));
  }
  const oauth = c.clientId === '' ? null : new GitHubOAuth({ clientId: c.clientId, clientSecret: c.clientSecret, webUrl: c.webUrl, apiUrl: c.apiUrl });
  return { app, oauth };
}
