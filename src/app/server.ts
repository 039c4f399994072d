import type { Writable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { sandboxPaths } from '../modules/billing/gateways/sandbox.js';
import { superviseEngine } from '../modules/deployments/engine/engine-supervisor.js';
import type { Parts } from './adapters.js';
import { LiveLogs } from '../modules/logs/live.js';
import { startMetricsListener, type MetricsListener } from '../modules/metrics/listener.js';
import type { LogStore } from '../domain/logs.js';
import { createStore, type Store } from '../store/db.js';
import { createDeps } from './adapters.js';
import { bootstrap, type Bootstrapped } from './bootstrap.js';
import type { Config } from './config.js';
import { buildApp, type App } from './http.js';
import { observeEngine, startLeader } from './leader.js';
import { apiSettings } from './settings.js';
import { StartError } from './errors.js';
import { VERSION } from './version.js';


export interface Running {
  app: App;
  store: Store;
  url: string;
  bootstrapped: Bootstrapped | null;
  close(): Promise<void>;
}

/**
 * `--payments sandbox`: one warning line at every start, naming the top-up paths that credit
 * without payment (docs/billing.md#sandbox), so it is never on unnoticed.
 */
function warnIfSandbox(deps: Pick<Parts, 'gateways'>, log: FastifyBaseLogger): void {
  const paths = sandboxPaths(deps.gateways);
  if (paths.length === 0) return;
  log.warn(
    { payments: 'sandbox', gateways: paths },
    `payments sandbox is on (--payments sandbox): top-ups through ${paths.join(' and ')} are credited at once WITHOUT ANY PAYMENT, so any workspace owner or admin can give their wallet free credit; turn it off on an installation whose tenants are not all trusted`,
  );
}

/** How often pending custom domains are checked again in the background. */
const DOMAIN_VERIFY_EVERY_MS = 60_000;
/** How often log retention and the per-project size cap are enforced (docs/logs.md#retention). */
const LOG_RETENTION_EVERY_MS = 3_600_000;

/**
 * `slipway serve`: the store, the adapters (adapters.ts), the HTTP API over every service
 * (http.ts, compose.ts), the deploy engine when this process leads (leader.ts) or a standby's
 * view of it, then the listeners and the background passes.
 */
export async function startServer(config: Config, log: { stream?: NodeJS.WritableStream } = {}): Promise<Running> {
  const store = await createStore(config.databaseUrl);
  let logs: LogStore | undefined;
  let liveLogs: LiveLogs | undefined;
  try {
    const deps = await createDeps(config, store);
    logs = deps.logs;
    const hub = new LiveLogs({ store: deps.logs, postgresUrl: store.dialect === 'postgres' ? config.databaseUrl : undefined });
    liveLogs = hub;
    const settings = apiSettings(config, VERSION, { stream: log.stream as Writable | undefined });
    const { app, services, leader, metrics } = await buildApp({ ...deps, ...settings, liveLogs });
    warnIfSandbox(deps, app.log);
    // The engine and the router start before the API listens, and the API listens before
    // anything is bootstrapped: any of them failing must stop the start before the one-time key
    // is created, or it would never be shown.
    const engine =
      config.engine === 'docker'
        ? await superviseEngine({
            leases: deps.store.repos.leases,
            clock: deps.clock,
            ids: deps.ids,
            log: app.log,
            handle: leader.engine,
            startLeader: () => startLeader({ config, deps, services, leader, liveLogs: hub, log: app.log }),
            standby: () => observeEngine(config, deps),
          })
        : null;
    let url: string;
    try {
      url = await app.listen({ host: config.listen.host, port: config.listen.port });
    } catch (err) {
      await engine?.stop();
      await app.close();
      throw new StartError(`cannot listen on ${config.listen.host}:${config.listen.port.toString()}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
    }
    let metricsListener: MetricsListener | null = null;
    if (config.metricsListen !== null) {
      const at = config.metricsListen;
      try {
        metricsListener = await startMetricsListener({ host: at.host, port: at.port, registry: metrics, tenants: settings.tenantNetworks, log: app.log });
      } catch (err) {
        await engine?.stop();
        await app.close();
        throw new StartError(`cannot listen for metrics on ${at.host}:${at.port.toString()} (--metrics-listen; off turns it off): ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
      }
      app.log.info({ url: metricsListener.url }, `metrics for the operator at ${metricsListener.url}/metrics`);
    }
    const bootstrapped = await bootstrap(deps, services.apiKeys, { adminEmail: config.adminEmail, dataDir: config.dataDir });
    // Pending custom domains are asked about again in the background (with verification off,
    // the ones left from before are trusted at once).
    const stopVerifying = services.domains.startBackground(DOMAIN_VERIFY_EVERY_MS, (err) => {
      app.log.error({ err }, 'domain verification pass failed');
    });
    const stopRetention = services.logs.startBackground(LOG_RETENTION_EVERY_MS, (err) => {
      app.log.error({ err }, 'log retention pass failed');
    });
    return {
      app,
      store,
      url,
      bootstrapped,
      close: async () => {
        await stopVerifying();
        await stopRetention();
        await engine?.stop();
        // before the app, so that open live-log streams get their closing frame
        await liveLogs?.close();
        await metricsListener?.close();
        await app.close();
        await deps.logs.close();
        await store.close();
      },
    };
  } catch (err) {
    await liveLogs?.close();
    await logs?.close();
    await store.close();
    throw err;
  }
}
