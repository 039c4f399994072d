import { existsSync, readFileSync } from 'node:fs';
import { GitHubApp } from '../adapters/git/index.js';
import { PaystackGateway } from '../modules/billing/gateways/paystack.js';
import { paymentGateways } from '../modules/billing/gateways/sandbox.js';
import type { Config } from './config.js';
import { policiesOf, type Policies } from './settings.js';
import { StartError } from './errors.js';
import { systemRandom, systemSources, type Clock, type IdSource, type Random } from '../domain/clock.js';
import type { LogStore } from '../domain/logs.js';
import type { PaymentGateways } from '../modules/billing/wallet.service.js';
import type { Mailer } from '../adapters/notify/mailer.js';
import type { GitHubIntegration } from '../modules/github/installations.js';
import { GitHubOAuth } from '../modules/github/oauth.js';
import { openLogStore, sqliteLogFile } from '../store/logs/open.js';
import { createSmtpMailer } from '../adapters/notify/mailer.js';
import { loadOrCreateSecretKey } from '../adapters/secrets/secret-key.js';
import { SecretBox } from '../adapters/secrets/secret-box.js';
import type { Store } from '../store/db.js';

// The outside world every service is built over (the secret box, e-mail, GitHub, the payment
// gateways, the log store), made from the configuration and an open store: what `slipway serve`
// and `slipway admin` share. Kept apart from server.ts so that the admin commands load neither
// the API nor the deploy engine.

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

/** What the services and the leader's workers are built from: the store, the sources, the adapters and each module's policy. */
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

/** The adapters and settings every service is built from, over an open store. */
export async function createDeps(config: Config, store: Store): Promise<Parts> {
  await guardSecretKey(config, store);
  const secrets = new SecretBox(loadOrCreateSecretKey(config.secretKeyFile, systemRandom), systemRandom);
  return {
    store,
    ...systemSources(),
    secrets,
    policies: policiesOf(config),
    gateways: await gateways(config),
    ...(config.smtp === null ? {} : { mailer: await createSmtpMailer(config.smtp) }),
    ...(config.githubApp === null ? {} : { github: createGitHub(config.githubApp) }),
    // last: nothing after it can fail and leave it open. The caller closes it with the store.
    logs: openLogStore(store, sqliteLogFile(config.databaseUrl.replace(/^sqlite:/, ''))),
  };
}

/**
 * The payment gateway of each top-up path that has keys configured; the others are off, or the
 * sandbox with `--payments sandbox`. Stripe's client (~130 ms and ~15 MiB to load) is loaded only
 * when its keys are set.
 */
async function gateways(config: Config): Promise<PaymentGateways> {
  const stripe = config.stripe === null ? null : (await import('../modules/billing/gateways/stripe.js')).StripeGateway;
  return paymentGateways(
    {
      ...(config.stripe === null || stripe === null ? {} : { gatewaya: new stripe({ name: 'gatewaya', ...config.stripe }) }),
      ...(config.paystack === null ? {} : { gatewayb: new PaystackGateway({ name: 'gatewayb', ...config.paystack }) }),
    },
    config.payments,
  );
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
