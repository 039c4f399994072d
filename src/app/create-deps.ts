import { Catalog, CatalogError, SHIPPED_CATALOG } from '../modules/templates/catalog.js';
import { existsSync, readFileSync } from 'node:fs';
import { GitHubApp } from '../adapters/git/index.js';
import { PaystackGateway } from '../modules/billing/gateways/paystack.js';
import { paymentGateways } from '../modules/billing/gateways/sandbox.js';
import { StripeGateway } from '../modules/billing/gateways/stripe.js';
import type { Config } from './config.js';
import type { Deps } from '../modules/deps.js';
import { systemRandom, systemSources } from '../domain/clock.js';
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

/** Every service's dependencies, from the configuration and an open store. */
export async function createDeps(config: Config, store: Store): Promise<Deps> {
  await guardSecretKey(config, store);
  const secrets = new SecretBox(loadOrCreateSecretKey(config.secretKeyFile, systemRandom), systemRandom);
  return {
    store,
    ...systemSources(),
    secrets,
    platform: {
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
    },
    gateways: gateways(config),
    ...(config.smtp === null ? {} : { mailer: await createSmtpMailer(config.smtp) }),
    ...(config.githubApp === null ? {} : { github: createGitHub(config.githubApp) }),
    // last: nothing after it can fail and leave it open. The caller closes it with the store.
    logs: openLogStore(store, sqliteLogFile(config.databaseUrl.replace(/^sqlite:/, ''))),
  };
}

/** The payment gateway of each top-up path that has keys configured; the others are off, or the sandbox with `--payments sandbox`. */
function gateways(config: Config): Deps['gateways'] {
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
    return Catalog.load([SHIPPED_CATALOG, ...(config.templateCatalog === '' ? [] : [config.templateCatalog])]);
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
