import { existsSync, readFileSync } from 'node:fs';
import { buildApp, type App } from './api/app.js';
import { bootstrap, type Bootstrapped } from './bootstrap.js';
import type { Config } from './config.js';
import { idSource, systemClock, systemRandom } from './domain/clock.js';
import { loadOrCreateSecretKey } from './secret-key.js';
import { SecretBox } from './secrets/secret-box.js';
import { createStore, type Store } from './store/db.js';
import type { Deps } from './deps.js';

export const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** A start that failed for a reason the operator can fix (reported without a stack trace). */
export class StartError extends Error {}

export interface Running {
  app: App;
  store: Store;
  url: string;
  bootstrapped: Bootstrapped | null;
  close(): Promise<void>;
}

/**
 * A store that holds sealed values must never get a fresh key: that would make every secret
 * unreadable without a word. Refuse to start instead, naming the file to restore.
 */
async function guardSecretKey(config: Config, store: Store): Promise<void> {
  if (existsSync(config.secretKeyFile)) return;
  const { db } = store;
  const sealedEnv = await db.selectFrom('env_vars').select('id').where('is_secret', '=', 1).limit(1).executeTakeFirst();
  const sealedHook = await db.selectFrom('uptime_monitors').select('project_id').where('chat_webhook_url', 'is not', null).limit(1).executeTakeFirst();
  if (sealedEnv !== undefined || sealedHook !== undefined) {
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
    clock: systemClock,
    random: systemRandom,
    ids: idSource(systemClock, systemRandom),
    secrets,
    platform: {
      appsDomain: config.appsDomain,
      routerPort: config.routerListen.port,
      startingCredit: config.startingCredit,
      currency: config.currency,
    },
  };
}

/** The composition root of `slipway serve`: every adapter is built here and injected. */
export async function startServer(config: Config, log: { stream?: NodeJS.WritableStream } = {}): Promise<Running> {
  const store = await createStore(config.databaseUrl);
  try {
    const deps = await createDeps(config, store);
    const { app, services } = await buildApp({
      ...deps,
      rateLimit: config.rateLimit,
      anonymousRateLimit: config.anonymousRateLimit,
      trustProxy: config.trustProxy,
      githubWebhookSecret: config.githubWebhookSecret,
      log: { level: config.logLevel, ...(log.stream === undefined ? {} : { stream: log.stream as never }) },
      version: VERSION,
    });
    // Listen first: a port that is taken must fail the start before anything is bootstrapped,
    // or the one-time key would be created and never shown.
    let url: string;
    try {
      url = await app.listen({ host: config.listen.host, port: config.listen.port });
    } catch (err) {
      await app.close();
      throw new StartError(`cannot listen on ${config.listen.host}:${config.listen.port.toString()}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
    }
    const bootstrapped = await bootstrap(deps, services.apiKeys, { adminEmail: config.adminEmail, dataDir: config.dataDir });
    return {
      app,
      store,
      url,
      bootstrapped,
      close: async () => {
        await app.close();
        await store.close();
      },
    };
  } catch (err) {
    await store.close();
    throw err;
  }
}
