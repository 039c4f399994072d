import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { LogStore } from '../domain/logs.js';
import type { Engine } from '../domain/ports.js';
import { GitSource } from '../adapters/git/index.js';
import { createRouterDriver, type RouterDriver, type RouterLog } from '../adapters/router/index.js';
import { DockerRuntime } from '../adapters/runtime/docker/docker.runtime.js';
import { dockerClient } from '../adapters/runtime/docker/client.js';
import { allWork, BillingWorker } from '../modules/billing/billing.worker.js';
import { engineContainers } from '../modules/billing/meter.js';
import { DatabaseWorker } from '../modules/databases/databases.worker.js';
import { BackupWorker } from '../modules/backups/backups.worker.js';
import { sharedPrefix } from '../modules/databases/shared.js';
import { instanceLabels } from '../modules/deployments/engine/containers.js';
import type { LeaderEngine } from '../modules/deployments/engine/engine-supervisor.js';
import { Orchestrator } from '../modules/deployments/engine/orchestrator.js';
import { standbyEngine } from '../modules/deployments/engine/standby.js';
import type { Parts } from './adapters.js';
import { LogCollector } from '../modules/logs/collector.js';
import type { LiveLogs } from '../modules/logs/live.js';
import { LogWriter } from '../modules/logs/log-writer.js';
import { ResourceSampler } from '../modules/metrics/metrics.worker.js';
import { CrashAlerts } from '../modules/uptime/crash-alerts.js';
import { routerProbe, UptimeChecker } from '../modules/uptime/uptime.worker.js';
import { instanceId, type Store } from '../store/db.js';
import { LEASE_MS, type LeaderLinks, type Services } from './compose.js';
import type { Config } from './config.js';
import { StartError } from './errors.js';

// The work of the process that holds the deploy-engine lease (engine-supervisor.ts): the
// orchestrator and its router, and the workers beside it. The API-side services reach them
// through the leader links, set here while this process leads.

/** What the leader's workers are built over. */
export interface LeaderContext {
  config: Config;
  deps: Parts;
  services: Services;
  leader: LeaderLinks;
  /** the live tail's hub, told of every batch the log collector stores */
  liveLogs: LiveLogs;
  log: FastifyBaseLogger;
}

/**
 * Starts the deploy engine of `--engine docker` (the Docker runtime, the router, the
 * orchestrator) and the leader's workers: the log collector, the database worker, billing, crash
 * alerts, the resource sampler, the uptime checker and the notifications' delivery.
 */
export async function startLeader(c: LeaderContext): Promise<LeaderEngine> {
  const { config, deps, services, leader, log } = c;
  const runtime = new DockerRuntime({ docker: await dockerClient(), builder: config.builder, networkPool: config.networkPool, pidsLimit: config.pidsLimit });
  try {
    await runtime.check();
  } catch (err) {
    throw new StartError(`no usable Docker Engine answers (${err instanceof Error ? err.message : String(err)}); start dockerd or set DOCKER_HOST, or run with --engine none for the API alone.`);
  }
  // cross-network isolation Docker cannot lift (docs/security.md#network-isolation); without it, said loudly
  const guard = await runtime.isolation();
  if (guard.on) log.info({ rules: guard.rules }, 'network isolation guard: on (mangle FORWARD rules between slw-* bridges)');
  else log.warn({ why: guard.why }, `network isolation guard: OFF: ${guard.why}. Workspace networks are then kept apart by Docker's own rules alone, which Docker Engine 20.10 lifts for an instant whenever any network is created (docs/security.md#network-isolation).`);
  // what this installation's engine objects carry (docs/operations.md#several-installations-on-one-engine)
  const instance = await instanceId(deps.store);
  const labels = instanceLabels(instance);
  // uptime notifications: transitions, tests and crash alerts (the engine reports crashes)
  const { notifier } = services;
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
    githubApp: deps.github?.app,
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
  const collector = await startCollector(config, deps.logs, deps.store, runtime, c.liveLogs, log, labels);
  const backups = new BackupWorker({
    repos: deps.store.repos,
    clock: deps.clock,
    ids: deps.ids,
    secrets: deps.secrets,
    runtime,
    destinations: services.backupDestinations,
    databases: deps.policies.databases,
    labels,
    network: (ws) => orchestrator.workspaceNetwork(ws),
    upstreamMode: config.upstreamMode,
    mailer: deps.mailer,
    log,
  });
  const databases = new DatabaseWorker({
    restorer: backups,
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
  leader.databases.set(databases);
  backups.start();
  leader.backups.set(backups);
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
  leader.billing.set(billing);
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
      leader.databases.clear();
      leader.billing.clear();
      leader.backups.clear();
      await checker.stop();
      await crashes.stop();
      await sampler.stop();
      await notifier.wake();
      await billing.stop();
      await backups.stop();
      await databases.stop();
      await collector.stop();
      await orchestrator.shutdown();
    },
  };
}

/**
 * The engine of a standby (another process holds the deploy-engine lease): the status view
 * reads the pods from the engine it reaches; restarts go to the leader's reconciler.
 */
export async function observeEngine(config: Config, deps: Parts): Promise<Engine> {
  return standbyEngine(new DockerRuntime({ docker: await dockerClient(), builder: config.builder, networkPool: config.networkPool, pidsLimit: config.pidsLimit }), await instanceId(deps.store), { deployments: deps.store.repos.deployments, clock: deps.clock });
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

/** Where this machine reaches a listener on `host` (every interface: the loopback). */
const loopbackOf = (host: string): string => (host === '' || host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host);

/** The apps' output into the log store (docs/logs.md#collection); a failing first scan is retried by the collector itself. */
async function startCollector(
  config: Config,
  logs: LogStore,
  store: Store,
  runtime: DockerRuntime,
  liveLogs: LiveLogs,
  log: FastifyBaseLogger,
  labels: Record<string, string>,
): Promise<LogCollector> {
  const writer = new LogWriter({
    logs,
    onStored: (projects) => { for (const p of projects) liveLogs.notify(p); },
    onError: (err) => { log.error({ err }, 'log batch not stored; retrying'); },
  });
  const collector = new LogCollector({
    runtime,
    logs,
    writer,
    labels,
    // a project's, or a managed database's (its server's lines are kept under its id)
    projectExists: async (id) => (await store.repos.projects.status(id)) !== undefined || (await store.repos.databases.byId(id)) !== undefined,
    log,
    ratePerSecond: config.logRateLimit,
  });
  await collector.start();
  return collector;
}
