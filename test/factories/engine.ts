// The deploy engine of a test server, as `slipway serve --engine docker` composes it: the real
// Docker runtime, a real router driver on a free loopback port and an Orchestrator with short
// poll and reconcile periods. Everything it makes carries the server's instance label and is
// purged by close().
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { GitSource, type GitHubApp } from '../../src/adapters/git/index.js';
import type { DatabasePolicy } from '../../src/modules/databases/policy.js';
import type { DatabaseWorker } from '../../src/modules/databases/databases.worker.js';
import { Orchestrator, type OrchestratorOptions } from '../../src/modules/deployments/engine/orchestrator.js';
import { createRouterDriver, type RouterDriver } from '../../src/adapters/router/index.js';
import { DockerRuntime } from '../../src/adapters/runtime/docker/docker.runtime.js';
import { instanceLabels, workspaceNetworkName } from '../../src/modules/deployments/engine/containers.js';
import { LogCollector } from '../../src/modules/logs/collector.js';
import { LogWriter } from '../../src/modules/logs/log-writer.js';
import { instanceId } from '../../src/store/db.js';
import { RepoRoot, startGitServer, type GitServer, type GitServerOptions, type TestRepo } from './git-server.js';
import { makeWorkspace, startTestServer, type TestServer, type TestWorkspace } from './harness.js';
import { startDatabaseWorker } from './databases.js';
import { BackupWorker } from '../../src/modules/backups/backups.worker.js';
import { ResourceSampler } from '../../src/modules/metrics/metrics.worker.js';
import { ensureBaseImage } from './images.js';
import { freePort } from './process.js';
import type { StoreKind } from './stores.js';

export interface TestEngine {
  orchestrator: Orchestrator;
  router: RouterDriver;
  routerPort: number;
  /** the local base image every generated Dockerfile starts from */
  base: string;
  runtime: DockerRuntime;
  /** the leader's database worker, when `databases` was asked for */
  databases: DatabaseWorker | null;
  /** the leader's backup worker, beside the database worker */
  backups: BackupWorker | null;
  /** the leader's resource sampler, when `sampler` was asked for (the status and health reads answer from it) */
  sampler: ResourceSampler | null;
  /** shuts the engine down and purges its containers, networks and images */
  close(): Promise<void>;
}

export interface TestEngineOptions {
  gitBaseUrl: string;
  githubApp?: GitHubApp;
  driver?: 'nginx' | 'node';
  log?: OrchestratorOptions['log'];
  /** the Docker runtime the engine uses (a subclass that makes the engine fail on purpose); default a plain one */
  runtime?: DockerRuntime;
  /** any other orchestrator option (upstream mode, shutdown grace, …) */
  tune?: Partial<Pick<OrchestratorOptions, 'upstreamMode' | 'self' | 'shutdownGraceMs' | 'healthTimeoutMs' | 'imageRetention' | 'reconcileEveryMs' | 'concurrency' | 'crashes' | 'usageOf'>>;
  /** a database worker too, as `serve` runs it on the leader, with this policy over the server's */
  databases?: Partial<DatabasePolicy>;
  /** the log collector too, as `serve` runs it on the leader (apps' and databases' output, live tail notified) */
  logs?: boolean;
  /** the resource sampler too, as `serve` runs it on the leader, every `sampler` ms (the orchestrator's `usageOf`) */
  sampler?: number;
}

const quiet: OrchestratorOptions['log'] = { info: () => undefined, warn: () => undefined, error: (obj, msg) => { console.error(msg, obj); } };

export async function startTestEngine(s: TestServer, opts: TestEngineOptions): Promise<TestEngine> {
  const base = await ensureBaseImage();
  const routerPort = await freePort();
  const workDir = mkdtempSync(join(tmpdir(), 'slipway-engine-'));
  // open like a default install's ./data, so that nginx's workers reach the router directory
  chmodSync(workDir, 0o755);
  const runtime = opts.runtime ?? new DockerRuntime({ docker: new Docker() });
  const router = createRouterDriver({ driver: opts.driver ?? 'nginx', listen: { host: '127.0.0.1', port: routerPort }, nginxDir: join(workDir, 'router'), clock: s.deps.clock });
  const instance = await instanceId(s.store);
  const sampler = opts.sampler === undefined ? null : new ResourceSampler({ runtime, metrics: s.store.repos.metrics, clock: s.deps.clock, labels: instanceLabels(instance), log: quiet, everyMs: opts.sampler });
  const orchestrator = new Orchestrator({
    repos: s.store.repos,
    dialect: s.store.dialect,
    clock: s.deps.clock,
    ids: s.deps.ids,
    appsDomain: s.deps.policies.projects.appsDomain,
    queue: s.services.queue,
    buildLog: s.services.buildLog,
    envVars: s.services.envVars,
    runtime,
    router,
    git: new GitSource({ baseUrl: opts.gitBaseUrl }),
    githubApp: opts.githubApp,
    baseImages: { node: base, go: base, python: base, static: base },
    workDir: join(workDir, 'checkouts'),
    concurrency: 2,
    healthTimeoutMs: 30_000,
    leaseMs: 60_000,
    log: opts.log ?? quiet,
    instanceId: instance,
    pollMs: 200,
    reconcileEveryMs: 1000,
    ...(sampler === null ? {} : { usageOf: (id: string) => sampler.usageOf(id) }),
    ...opts.tune,
  });
  sampler?.start();
  s.leader.engine.set(orchestrator);
  await orchestrator.start();
  let databases: DatabaseWorker | null = null;
  let backups: BackupWorker | null = null;
  if (opts.databases !== undefined) {
    // as the leader runs it beside the database worker: backups, and restores into new databases
    backups = new BackupWorker({
      repos: s.store.repos,
      clock: s.deps.clock,
      ids: s.deps.ids,
      secrets: s.deps.secrets,
      runtime,
      destinations: s.services.backupDestinations,
      databases: { ...s.deps.policies.databases, ...opts.databases },
      labels: instanceLabels(instance),
      network: (ws) => orchestrator.workspaceNetwork(ws),
      upstreamMode: opts.tune?.upstreamMode ?? 'published',
      log: opts.log ?? quiet,
      pollMs: 200,
      alertsEveryMs: 200,
      sweepEveryMs: 500,
    });
    backups.start();
    s.leader.backups.set(backups);
    databases = await startDatabaseWorker(s, {
      restorer: backups,
      policy: opts.databases,
      runtime,
      network: (ws) => orchestrator.workspaceNetwork(ws),
      upstreamMode: opts.tune?.upstreamMode ?? 'published',
      ...(opts.log === undefined ? {} : { log: opts.log }),
    });
  }
  let collector: LogCollector | null = null;
  if (opts.logs === true) {
    collector = new LogCollector({
      runtime,
      logs: s.logStore,
      writer: new LogWriter({ logs: s.logStore, onStored: (ps) => { for (const p of ps) s.liveLogs.notify(p); } }),
      labels: instanceLabels(instance),
      projectExists: async (id) => (await s.store.repos.projects.status(id)) !== undefined || (await s.store.repos.databases.byId(id)) !== undefined,
      log: opts.log ?? quiet,
      rescanEveryMs: 1000,
    });
    await collector.start();
  }
  return {
    orchestrator,
    router,
    routerPort,
    base,
    runtime,
    databases,
    backups,
    sampler,
    close: async () => {
      await sampler?.stop();
      await collector?.stop();
      s.leader.databases.clear();
      s.leader.backups.clear();
      await backups?.stop();
      await databases?.stop();
      await orchestrator.shutdown();
      await runtime.purge({ labels: { 'slipway.instance': instance } });
      rmSync(workDir, { recursive: true, force: true });
    },
  };
}

/** The engine's name of the workspace network of `slug` on `s`'s installation. */
export async function workspaceNetwork(s: TestServer, slug: string): Promise<string> {
  return workspaceNetworkName(await instanceId(s.store), slug);
}

/** GET `path` through the router with a Host header, on a fresh connection each time. */
export function viaRouter(port: number, host: string, path = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** What a deploy e2e file needs: a server over a fresh store, a workspace, a Git server with one repository, and the engine. */
export interface DeployFixture {
  s: TestServer;
  w: TestWorkspace;
  root: RepoRoot;
  repo: TestRepo;
  gitServer: GitServer;
  engine: TestEngine;
  /** the engine first (it purges what it made), then the server, the Git server and the repositories */
  close(): Promise<void>;
}

export async function startDeployFixture(
  kind: StoreKind,
  repoName: string,
  opts: { authorize?: GitServerOptions['authorize']; engine?: Omit<TestEngineOptions, 'gitBaseUrl'>; server?: Parameters<typeof startTestServer>[1] } = {},
): Promise<DeployFixture> {
  const s = await startTestServer(kind, opts.server);
  const w = await makeWorkspace(s);
  const root = await RepoRoot.create();
  const repo = await root.repo(repoName);
  const gitServer = await startGitServer({ root: root.dir, ...(opts.authorize === undefined ? {} : { authorize: opts.authorize }) });
  const engine = await startTestEngine(s, { ...opts.engine, gitBaseUrl: gitServer.url });
  return {
    s,
    w,
    root,
    repo,
    gitServer,
    engine,
    close: async () => {
      await engine.close();
      await s.close();
      await gitServer.close();
      await root.dispose();
    },
  };
}
