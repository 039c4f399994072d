import { mkdir } from 'node:fs/promises';
import type { GitHubApp } from '../../../adapters/git/index.js';
import { databaseHealthOf } from '../../databases/health.js';
import type { BaseImages, CrashSink, DatabaseHealth, GitSource, Pod } from '../../../domain/ports.js';
import type { Runtime, UsageOf } from '../../../domain/runtime.js';
import type { Clock, IdSource } from '../../../domain/clock.js';
import type { ProjectRow } from '../../projects/resolve.js';
import type { RouterDriver } from '../../../adapters/router/index.js';
import type { Dialect } from '../../../store/dialects.js';
import type { DeploymentRow } from '../../../store/schema.js';
import type { BuildLog } from '../build-log.js';
import { BuildStep, type BuildStepOptions } from './build-step.js';
import { InstanceContainers, isCurrentNetworkName, type ContainersOptions, type EngineLog, type UpstreamMode } from './containers.js';
import type { LeaderEngine } from './engine-supervisor.js';
import { ProjectLocks } from './project-locks.js';
import type { DeployQueue } from '../queue.js';
import { Reconciler, type ReconcilerOptions } from './reconciler.js';
import { Retention, type RetentionOptions } from './retention.js';
import { Rollout, type RolloutOptions } from './rollout.js';
import { RoutingState, type RoutingStateOptions } from './routing-state.js';

export type { UpstreamMode } from './containers.js';

export interface OrchestratorOptions {
  /** what the rollout, the routing, the build and the reconciler query */
  repos: RolloutOptions['repos'] & RoutingStateOptions['repos'] & BuildStepOptions['repos'] & ReconcilerOptions['repos'] & RetentionOptions['repos'];
  /** the embedded store (sqlite) has one process: what it left in progress fails at start */
  dialect: Dialect;
  clock: Clock;
  ids: IdSource;
  /** apps get `<host label>.<appsDomain>` */
  appsDomain: string;
  queue: DeployQueue;
  buildLog: BuildLog;
  envVars: ContainersOptions['envVars'];
  runtime: Runtime;
  router: RouterDriver;
  git: GitSource;
  githubApp?: GitHubApp | undefined;
  baseImages: BaseImages;
  /** where checkouts are made (and removed after the build) */
  workDir: string;
  /** builds at once (default 2, docs/decisions.md#long-work) */
  concurrency: number;
  /** how long new containers get to answer on their port */
  healthTimeoutMs: number;
  leaseMs: number;
  log: EngineLog;
  /** the reconciler's period */
  reconcileEveryMs?: number;
  /** idle workers look at the queue this often even without a wake-up */
  pollMs?: number;
  /** this installation's id: every container and image it makes carries it */
  instanceId: string;
  /** how long shutdown() lets deployments in progress finish before it interrupts them (default 30 s) */
  shutdownGraceMs?: number;
  /** on shutdown, leave the router serving the current routes (the next start adopts it) instead of stopping it */
  keepRouterOnExit?: boolean;
  /**
   * How the router and the health check reach a container (docs/decisions.md#upstream-addressing):
   * `published` (default) on its port published on 127.0.0.1; `network` on its address on the
   * workspace network, without publishing anything.
   */
  upstreamMode?: UpstreamMode;
  /** Slipway's own container, when it runs in one: joined to every workspace network (`network` mode) */
  self?: string | undefined;
  /**
   * Images kept per project besides those of deployments in progress or running: the newest
   * `keep` deployments' images (rollback targets); the others are removed every `everyMs` by the
   * reconciler. Default: 5, every minute.
   */
  imageRetention?: { keep: number; everyMs: number };
  /** where crash loops and failed health checks are reported (the uptime notifications); absent: nowhere */
  crashes?: CrashSink | undefined;
  /** the resource sampler's recent use of a container: the status view answers from it instead of asking the engine */
  usageOf?: UsageOf | undefined;
}

/**
 * The deploy engine: workers take queued deployments and drive them through build, start,
 * health check, route switch and retirement of the previous deployment (Rollout); a reconciler
 * keeps the engine and the router in line with the store (Reconciler). Nothing is left `queued`
 * or `building` forever: leases that stop being renewed are reaped. The orchestrator itself
 * holds the lifecycle: it wires the parts, starts and shuts down the workers and the
 * reconciler's timer, and answers the API's calls (the Engine port).
 */
export class Orchestrator implements LeaderEngine {
  private readonly workerId: string;
  /** how old a database's kept volume size is (databaseHealth) */
  private readonly clock: Clock;
  private readonly stopping = new AbortController();
  /** aborted when shutdown's grace period is over: builds and health waits in progress give up */
  private readonly interrupting = new AbortController();
  /** idle workers, each waiting for a wake-up or its next poll */
  private readonly idle = new Set<() => void>();
  private loops: Promise<void>[] = [];
  private timer: NodeJS.Timeout | undefined;
  private reconciling: Promise<void> | null = null;
  private readonly locks = new ProjectLocks();
  private readonly containers: InstanceContainers;
  private readonly routing: RoutingState;
  private readonly rollout: Rollout;
  private readonly reconciler: Reconciler;

  private readonly dialect: Dialect;
  private readonly queue: DeployQueue;
  private readonly runtime: Runtime;
  private readonly router: RouterDriver;
  private readonly workDir: string;
  private readonly concurrency: number;
  private readonly log: EngineLog;
  private readonly reconcileEveryMs: number;
  private readonly pollMs: number;
  private readonly shutdownGraceMs: number;
  private readonly keepRouterOnExit: boolean;
  private readonly usageOf: UsageOf | undefined;

  constructor(o: OrchestratorOptions) {
    this.usageOf = o.usageOf;
    const { repos, clock, runtime, router, log } = o;
    this.clock = clock;
    this.dialect = o.dialect;
    this.queue = o.queue;
    this.runtime = runtime;
    this.router = router;
    this.workDir = o.workDir;
    this.concurrency = o.concurrency;
    this.log = log;
    this.reconcileEveryMs = o.reconcileEveryMs ?? 10_000;
    this.pollMs = o.pollMs ?? 1000;
    this.shutdownGraceMs = o.shutdownGraceMs ?? 30_000;
    this.keepRouterOnExit = o.keepRouterOnExit === true;
    this.workerId = `w-${o.ids.id()}`;
    this.containers = new InstanceContainers({ runtime, envVars: o.envVars, clock, log, instanceId: o.instanceId, upstreamMode: o.upstreamMode ?? 'published', self: o.self, usageOf: o.usageOf });
    const { labels } = this.containers;
    this.routing = new RoutingState({ repos, router, containers: this.containers, appsDomain: o.appsDomain, log });
    const builder = new BuildStep({ repos, git: o.git, githubApp: o.githubApp, runtime, baseImages: o.baseImages, workDir: o.workDir, labels });
    this.rollout = new Rollout({
      repos,
      clock,
      appsDomain: o.appsDomain,
      queue: o.queue,
      buildLog: o.buildLog,
      builder,
      runtime,
      containers: this.containers,
      routing: this.routing,
      router,
      locks: this.locks,
      healthTimeoutMs: o.healthTimeoutMs,
      leaseMs: o.leaseMs,
      log,
      interrupted: this.interrupting.signal,
      crashes: o.crashes,
    });
    const { keep, everyMs } = o.imageRetention ?? { keep: 5, everyMs: 60_000 };
    const retention = new Retention({ repos, runtime, clock, log, labels, keep, everyMs, forgetNetwork: (name) => { this.containers.forgetNetwork(name); }, currentNetwork: (name) => isCurrentNetworkName(o.instanceId, name) });
    this.reconciler = new Reconciler({
      repos,
      clock,
      queue: o.queue,
      runtime,
      containers: this.containers,
      routing: this.routing,
      locks: this.locks,
      retention,
      log,
      restart: (project, deployment) => this.restart(project, deployment),
      crashes: o.crashes,
    });
  }

  async start(): Promise<void> {
    await this.runtime.check();
    await mkdir(this.workDir, { recursive: true });
    await this.router.start();
    // The embedded store has a single Slipway process: whatever was in progress when it stopped
    // was interrupted and is failed now. With PostgreSQL, other replicas' leases run out instead.
    if (this.dialect === 'sqlite') await this.reconciler.failInterrupted();
    await this.reconcile();
    for (let i = 0; i < this.concurrency; i++) this.loops.push(this.workLoop(i));
    this.timer = setInterval(() => {
      // One pass at a time: a slow engine must not pile passes up.
      if (this.reconciling !== null) return;
      this.reconciling = this.reconcile()
        .catch((err: unknown) => {
          this.log.error({ err }, 'reconcile failed');
        })
        .finally(() => {
          this.reconciling = null;
        });
    }, this.reconcileEveryMs);
  }

  /**
   * Shut the engine down: workers stop taking work and get the grace period to finish the
   * deployment in their hands; what is still in progress after it is interrupted (its build
   * cancelled, its new containers removed) and fails with "Interrupted". Running apps keep
   * running on the engine. The router keeps serving them when `keepRouterOnExit` is set and its
   * driver can outlive Slipway (nginx; the next start adopts it), and stops otherwise.
   */
  async shutdown(): Promise<void> {
    this.stopping.abort();
    this.wake();
    clearInterval(this.timer);
    await this.reconciling;
    const workers = Promise.allSettled(this.loops);
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace over'>((resolve) => {
      timer = setTimeout(() => {
        resolve('grace over');
      }, this.shutdownGraceMs);
    });
    if ((await Promise.race([workers, graceOver])) === 'grace over') {
      this.log.warn({ graceMs: this.shutdownGraceMs }, 'shutdown: interrupting the deployments still in progress');
      this.interrupting.abort();
    }
    clearTimeout(timer);
    await workers;
    await this.routing.settled();
    const { router } = this;
    if (this.keepRouterOnExit && router.release !== undefined) await router.release();
    else await router.stop();
  }

  /** One reconciler pass (Reconciler.pass); the timer runs them, tests call it directly. */
  reconcile(): Promise<void> {
    return this.reconciler.pass();
  }

  wake(): void {
    for (const resolve of [...this.idle]) resolve();
  }

  async stop(project: ProjectRow, deployment: DeploymentRow): Promise<void> {
    await this.locks.run(project.id, async () => {
      await this.routing.route(project.id, null);
      await this.containers.remove({ project: project.id, deployment: deployment.id });
    });
  }

  /** A rolling restart (Rollout.restart). Answers at once: it runs in the background (long work never blocks a request). */
  restart(project: ProjectRow, deployment: DeploymentRow): Promise<void> {
    void this.locks.run(project.id, () => this.rollout.restart(project, deployment)).catch((err: unknown) => {
      this.log.error({ err, project: project.id }, 'rolling restart failed; the reconciler restores the replica count');
    });
    return Promise.resolve();
  }

  async routesChanged(projectId: string): Promise<void> {
    await this.locks.run(projectId, () => this.routing.refresh(projectId));
  }

  pods(projectId: string, deploymentId: string): Promise<Pod[]> {
    return this.containers.pods(projectId, deploymentId);
  }

  databaseHealth(databaseId: string): Promise<DatabaseHealth | null> {
    return databaseHealthOf(this.runtime, databaseId, this.clock, this.usageOf).catch(() => null);
  }

  /** The workspace's network, created when missing: the managed databases join the apps' network. */
  workspaceNetwork(ws: { id: string; slug: string }): Promise<string> {
    return this.containers.network(ws);
  }

  /** A worker: claims the next queued deployment and runs it, or waits for a wake-up or its next poll. */
  private async workLoop(n: number): Promise<void> {
    const worker = `${this.workerId}-${n.toString()}`;
    while (!this.stopping.signal.aborted) {
      let claimed: DeploymentRow | null = null;
      try {
        claimed = await this.queue.claim(worker);
      } catch (err) {
        this.log.error({ err }, 'claiming a deployment failed');
      }
      if (claimed === null) {
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(t);
            this.idle.delete(done);
            resolve();
          };
          const t = setTimeout(done, this.pollMs);
          this.idle.add(done);
        });
        continue;
      }
      await this.rollout.run(claimed, worker);
    }
  }
}
