import { engineContainers } from '../modules/billing/meter.js';
import { allWork, BillingWorker } from '../modules/billing/billing.worker.js';
import { sandboxPaths } from '../modules/billing/gateways/sandbox.js';
import { routerProbe, UptimeChecker } from '../modules/uptime/uptime.worker.js';
import { UptimeNotifier } from '../modules/uptime/notifier.js';
import { CrashAlerts } from '../modules/uptime/crash-alerts.js';
import { ResourceSampler } from '../modules/metrics/metrics.worker.js';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import type { FastifyBaseLogger } from 'fastify';
import { LEASE_MS, type Services } from './services.js';
import { GitSource } from '../adapters/git/index.js';
import { superviseEngine } from '../modules/deployments/engine/engine-supervisor.js';
import { Orchestrator } from '../modules/deployments/engine/orchestrator.js';
import { standbyEngine } from '../modules/deployments/engine/standby.js';
import { createRouterDriver, type RouterDriver, type RouterLog } from '../adapters/router/index.js';
import { DockerRuntime } from '../adapters/runtime/docker/docker.runtime.js';
import { buildApp, type App } from './http.js';
import { TenantNetworks } from '../http/tenant-guard.js';
import { startMetricsListener, type MetricsListener } from '../modules/metrics/listener.js';
import { bootstrap, type Bootstrapped } from './bootstrap.js';
import type { Config } from './config.js';
import { createStore, instanceId, type Store } from '../store/db.js';
import { sharedPrefix } from '../modules/databases/shared.js';
import { createDeps, StartError, type Parts } from './create-deps.js';
import type { Engine } from '../domain/ports.js';
import type { LogStore } from '../domain/logs.js';
import { LiveLogs } from '../modules/logs/live.js';
import { LogCollector } from '../modules/logs/collector.js';
import { DatabaseWorker } from '../modules/databases/databases.worker.js';
import { LogWriter } from '../modules/logs/log-writer.js';
import { instanceLabels } from '../modules/deployments/engine/containers.js';
import type { LeaderEngine } from '../modules/deployments/engine/engine-supervisor.js';

export const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface Running {
  app: App;
  store: Store;
  url: string;
  bootstrapped: Bootstrapped | null;
  close(): Promise<void>;
}

/**
 * Slipway's own container, when it runs in one that the engine knows (Docker names the host
 * after the container): `--upstream-mode network` attaches it to the workspace networks.
 */
async function ownContainer(runtime: DockerRuntime, log: FastifyBaseLogger): Promise<string | undefined> {
  const self = await runtime.inspect(hostname()).catch(() => null);
  if (self !== null) return self.id;
  log.warn({ hostname: hostname() }, 'upstream mode network: Slipway does not run in a container of this engine; the router reaches containers on their network addresses from the host');
  return undefined;
}

/**
 * The router of the deploy engine. With ACME on (docs/router.md "TLS") it also listens for HTTPS,
 * answers HTTP-01, and carries the certificate manager, which starts after the data plane and
 * stops before it, inside the router's own start() and stop().
 */
export async function createRouter(config: Config, deps: Pick<Parts, 'store' | 'clock'>, log: RouterLog): Promise<RouterDriver> {
  const router = { driver: config.router, listen: config.routerListen, nginxDir: join(config.dataDir, 'router'), log, clock: deps.clock };
  const { acme } = config;
  if (acme === null) return createRouterDriver(router);
  let ca: string | undefined;
  if (acme.caFile !== null) {
    try {
      ca = readFileSync(acme.caFile, 'utf8');
    } catch (err) {
      throw new StartError(`the ACME CA file ${acme.caFile} (--acme-ca-file) cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
    }
  }
  // Loaded only with ACME on: the ACME client and its HTTP stack cost about 25 MiB of memory.
  const { createAcmeRouter } = await import('../adapters/tls/index.js');
  const acmeRouter = createAcmeRouter(
    { ...router, tls: { listen: config.routerTlsListen } },
    {
      directoryUrl: acme.directoryUrl,
      ...(acme.email === null ? {} : { email: acme.email }),
      ...(ca === undefined ? {} : { ca }),
      dir: join(config.dataDir, 'tls'),
      clock: deps.clock,
      // Only routed hosts get certificates, and a custom domain is routed once its ownership is
      // proven (verified): a certificate no longer changes `verified`.
      log,
    },
  );
  return acmeRouter.router;
}

/** The deploy engine of `--engine docker`: the Docker runtime, the router and the workers; and the log collector (the leader's alone). */
async function startEngine(config: Config, deps: Parts, services: Services, log: FastifyBaseLogger, liveLogs: LiveLogs): Promise<LeaderEngine> {
  const runtime = new DockerRuntime({ docker: new Docker(), builder: config.builder, networkPool: config.networkPool, pidsLimit: config.pidsLimit });
  try {
    await runtime.check();
  } catch (err) {
    throw new StartError(`no usable Docker Engine answers (${err instanceof Error ? err.message : String(err)}); start dockerd or set DOCKER_HOST, or run with --engine none for the API alone.`);
  }
  const githubApp = deps.github?.app;
  // what this installation's engine objects carry (docs/operations.md#several-installations-on-one-engine)
  const instance = await instanceId(deps.store);
  const labels = instanceLabels(instance);
  // uptime notifications: transitions, tests and crash alerts (the engine reports crashes)
  const notifier = new UptimeNotifier({
    repos: deps.store.repos,
    clock: deps.clock,
    random: deps.random,
    secrets: deps.secrets,
    mailer: deps.mailer,
    appsDomain: deps.policies.projects.appsDomain,
    routerPort: deps.policies.projects.routerPort,
    policy: deps.policies.notify,
    log,
  });
  const crashes = new CrashAlerts({ uptime: deps.store.repos.uptime, clock: deps.clock, ids: deps.ids, onQueued: () => { void notifier.wake(); }, log });
  const sampler = new ResourceSampler({ runtime, metrics: deps.store.repos.metrics, clock: deps.clock, labels, log });
  const orchestrator = new Orchestrator({
    repos: deps.store.repos,
    dialect: deps.store.dialect,
    clock: deps.clock,
    ids: deps.ids,
    appsDomain: deps.policies.projects.appsDomain,
    queue: services.queue,
    buildLog: services.buildLog,
    envVars: services.envVars,
    runtime,
    router: await createRouter(config, deps, log),
    git: new GitSource({ baseUrl: config.gitBaseUrl }),
    githubApp,
    baseImages: config.baseImages,
    workDir: join(config.dataDir, 'builds'),
    concurrency: config.buildConcurrency,
    healthTimeoutMs: config.healthTimeoutMs,
    shutdownGraceMs: config.shutdownGraceMs,
    keepRouterOnExit: config.routerOnExit === 'keep',
    upstreamMode: config.upstreamMode,
    imageRetention: { keep: config.keepImages, everyMs: 60_000 },
    self: config.upstreamMode === 'network' ? await ownContainer(runtime, log) : undefined,
    leaseMs: LEASE_MS,
    log,
    instanceId: instance,
    crashes,
    usageOf: (id) => sampler.usageOf(id),
  });
  try {
    await orchestrator.start();
  } catch (err) {
    await orchestrator.shutdown().catch(() => undefined);
    throw new StartError(`the deploy engine could not start: ${err instanceof Error ? err.message : String(err)}`);
  }
  const collector = await startCollector(config, deps, runtime, liveLogs, log);
  const databases = new DatabaseWorker({
    repos: deps.store.repos,
    clock: deps.clock,
    random: deps.random,
    ids: deps.ids,
    secrets: deps.secrets,
    runtime,
    policy: deps.policies.databases,
    labels,
    sharedPrefix: sharedPrefix(instance),
    network: (ws) => orchestrator.workspaceNetwork(ws),
    upstreamMode: config.upstreamMode,
    logs: deps.logs,
    log,
  });
  databases.start();
  services.databases.attach(databases);
  const billing = new BillingWorker({
    store: deps.store,
    clock: deps.clock,
    ids: deps.ids,
    policy: deps.policies.billing,
    mailer: deps.mailer,
    work: allWork(services.deploys, services.databases),
    log,
    containers: engineContainers(runtime, labels),
  });
  services.wallets.onCredited = (workspaceId) => { billing.credited(workspaceId); };
  billing.start();
  void crashes.watch(runtime, labels);
  sampler.start();
  const checker = new UptimeChecker({
    store: deps.store,
    clock: deps.clock,
    random: deps.random,
    ids: deps.ids,
    appsDomain: deps.policies.projects.appsDomain,
    probe: routerProbe(loopbackOf(config.routerListen.host), config.routerListen.port),
    onQueued: () => { void notifier.wake(); },
    log,
    rules: deps.policies.uptime,
  });
  checker.start();
  // what a previous leader queued and did not deliver
  void notifier.wake();
  return {
    wake: () => { orchestrator.wake(); },
    stop: (project, deployment) => orchestrator.stop(project, deployment),
    restart: (project, deployment) => orchestrator.restart(project, deployment),
    routesChanged: (projectId) => orchestrator.routesChanged(projectId),
    pods: (projectId, deploymentId) => orchestrator.pods(projectId, deploymentId),
    databaseHealth: (databaseId) => orchestrator.databaseHealth(databaseId),
    shutdown: async () => {
      services.databases.attach(null);
      services.wallets.onCredited = () => undefined;
      await checker.stop();
      await crashes.stop();
      await sampler.stop();
      await notifier.wake();
      await billing.stop();
      await databases.stop();
      await collector.stop();
      await orchestrator.shutdown();
    },
  };
}

/** Where this machine reaches a listener on `host` (every interface: the loopback). */
const loopbackOf = (host: string): string => (host === '' || host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host);

/** The apps' output into the log store (docs/logs.md#collection); a failing first scan is retried by the collector itself. */
async function startCollector(config: Config, deps: Parts, runtime: DockerRuntime, liveLogs: LiveLogs, log: FastifyBaseLogger): Promise<LogCollector> {
  const writer = new LogWriter({
    logs: deps.logs,
    onStored: (projects) => { for (const p of projects) liveLogs.notify(p); },
    onError: (err) => { log.error({ err }, 'log batch not stored; retrying'); },
  });
  const collector = new LogCollector({
    runtime,
    logs: deps.logs,
    writer,
    labels: instanceLabels(await instanceId(deps.store)),
    // a project's, or a managed database's (its server's lines are kept under its id)
    projectExists: async (id) => (await deps.store.repos.projects.status(id)) !== undefined || (await deps.store.repos.databases.byId(id)) !== undefined,
    log,
    ratePerSecond: config.logRateLimit,
  });
  await collector.start();
  return collector;
}

/**
 * The engine of a standby (another process holds the deploy-engine lease): the status view
 * reads the pods from the engine it reaches; restarts go to the leader's reconciler.
 */
async function observeEngine(config: Config, deps: Parts): Promise<Engine> {
  return standbyEngine(new DockerRuntime({ docker: new Docker(), builder: config.builder, networkPool: config.networkPool, pidsLimit: config.pidsLimit }), await instanceId(deps.store), { deployments: deps.store.repos.deployments, clock: deps.clock });
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

/** The composition root of `slipway serve`: every adapter is built here and injected. */
export async function startServer(config: Config, log: { stream?: NodeJS.WritableStream } = {}): Promise<Running> {
  const store = await createStore(config.databaseUrl);
  let logs: LogStore | undefined;
  let liveLogs: LiveLogs | undefined;
  try {
    const deps = await createDeps(config, store);
    logs = deps.logs;
    const hub = new LiveLogs({ store: deps.logs, postgresUrl: store.dialect === 'postgres' ? config.databaseUrl : undefined });
    liveLogs = hub;
    const tenants = new TenantNetworks(config.refuseNetworks);
    const { app, services, metrics } = await buildApp({
      ...deps,
      rateLimit: config.rateLimit,
      anonymousRateLimit: config.anonymousRateLimit,
      webhookRateLimit: config.webhookRateLimit,
      trustProxy: config.trustProxy,
      githubWebhookSecret: config.githubWebhookSecret,
      metricsToken: config.metricsToken,
      tenantNetworks: tenants,
      log: { level: config.logLevel, ...(log.stream === undefined ? {} : { stream: log.stream as never }) },
      version: VERSION,
      liveLogs,
      llm: config.llm,
      analysis: config.analysis,
    });
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
            handle: services.engine,
            startLeader: () => startEngine(config, deps, services, app.log, hub),
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
        metricsListener = await startMetricsListener({ host: at.host, port: at.port, registry: metrics, tenants, log: app.log });
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
