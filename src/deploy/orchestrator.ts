import { mkdir, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { createServer, type Server } from 'node:net';
import { GitSourceError, prepareBuildContext, type GitHubApp } from '../build/index.js';
import { cloneTokenFor } from '../github/installations.js';
import { iso } from '../domain/clock.js';
import { ACTIVE, isLive, LEASED, LIVE } from '../domain/deployment.js';
import type { BaseImages, Engine, GitSource, Pod } from '../domain/ports.js';
import { HostPortTakenError, NetworkPoolFullError, type ContainerInfo, type Owner, type Runtime } from '../domain/runtime.js';
import type { Deps } from '../deps.js';
import { UnusableEnvError, type EnvService } from '../env/env.service.js';
import { defaultDomain, type ProjectRow } from '../projects/resolve.js';
import { ramBytes } from '../projects/resources.js';
import { RouteTable, type RouterDriver, type Upstream } from '../router/index.js';
import type { DeploymentRow } from '../store/schema.js';
import { parseSettings } from '../tenancy/views.js';
import type { BuildLog } from './build-log.js';
import { refreshProjectStatus, servingDeployment } from '../projects/status.js';
import { idleEngine } from './deploy.service.js';
import type { DeployQueue } from './queue.js';
import { sleep } from './sleep.js';

export interface OrchestratorOptions {
  deps: Deps;
  queue: DeployQueue;
  buildLog: BuildLog;
  envVars: EnvService;
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
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
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
}

export type UpstreamMode = 'published' | 'network';

const INSTANCE_LABEL = 'slipway.instance';
const PROJECT_LABEL = 'slipway.image.project';
/** A container restarted this often by the engine, and not running now, is crash-looping. */
const CRASH_LOOP_RESTARTS = 3;
/** How often a starting container is asked whether it answers yet. */
const HEALTH_POLL_MS = 20;
/** How often a reconciler failure that recurs at every pass (an orphan the engine cannot remove) is logged. */
const COMPLAIN_EVERY_MS = 10 * 60_000;

/** A failure whose sentence is meant for the user (the deployment's `error`). */
class DeployFailure extends Error {}

const INTERRUPTED = 'Interrupted: Slipway stopped while this deployment was in progress.';

const firstLine = (s: string): string => s.split('\n')[0]?.trim() ?? '';

/** Any HTTP answer on the port counts: the app is up, whatever its routes say. */
function answers({ host, port }: Upstream): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host, port, path: '/', method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => {
      resolve(false);
    });
    req.end();
  });
}

/** How the router and the health check reach a container, or null while they cannot (docs/decisions.md#upstream-addressing). */
function addressOf(c: ContainerInfo, mode: UpstreamMode): Upstream | null {
  if (mode === 'network') return c.networkAddress === null || c.port === null ? null : { host: c.networkAddress, port: c.port };
  return c.hostPort === null ? null : { host: '127.0.0.1', port: c.hostPort };
}

/** A deployment's containers as pods, with their resource use, from the engine. */
async function podsOf(runtime: Runtime, labels: Record<string, string>, projectId: string, deploymentId: string): Promise<Pod[]> {
  const containers = await runtime.list({ owner: { project: projectId, deployment: deploymentId }, labels });
  // Stats take a sampling window each: ask for all pods at once.
  return Promise.all(
    containers.map(async (c) => {
      const usage = c.state === 'running' ? await runtime.stats(c.id) : null;
      return {
        name: c.name,
        status: c.state.charAt(0).toUpperCase() + c.state.slice(1),
        ready: c.state === 'running',
        restarts: c.restartCount,
        startedAt: c.startedAt,
        cpuMillicores: usage?.cpuMillicores ?? 0,
        memoryBytes: usage?.memoryBytes ?? 0,
      };
    }),
  );
}

/**
 * The engine of a standby process (another one holds the deploy-engine lease): its status view
 * reads the pods from the engine it reaches, and a restart is recorded on the deployment for the
 * engine's next reconciler pass. Stops and route changes need nothing more: the reconciler
 * follows the store.
 */
export function standbyEngine(runtime: Runtime, instanceId: string, deps: Pick<Deps, 'store' | 'clock'>): Engine {
  return {
    ...idleEngine,
    pods: (projectId, deploymentId) => podsOf(runtime, { [INSTANCE_LABEL]: instanceId }, projectId, deploymentId).catch(() => []),
    // The engine's reconciler runs it (Orchestrator.reconcile).
    restart: async (_project, deployment) => {
      await deps.store.db.updateTable('deployments').set({ restart_requested_at: iso(deps.clock.now()) }).where('id', '=', deployment.id).where('status', '=', 'running').execute();
    },
  };
}

/**
 * `n` distinct loopback ports nothing listens on now (the kernel's picks), for containers to
 * publish on: all are held open together, so none is handed out twice.
 */
async function freeLoopbackPorts(n: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const server = createServer();
      servers.push(server);
      ports.push(
        await new Promise<number>((resolve, reject) => {
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => {
            const address = server.address();
            if (address !== null && typeof address === 'object') resolve(address.port);
            else reject(new Error('The kernel gave no port.'));
          });
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => { resolve(); }))));
  }
}

function groupBy<T>(items: readonly T[], key: (item: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    if (k === undefined) continue;
    const group = groups.get(k);
    if (group === undefined) groups.set(k, [item]);
    else group.push(item);
  }
  return groups;
}

/**
 * The deploy engine: workers take queued deployments and drive them through build, start,
 * health check, route switch and retirement of the previous deployment; a reconciler keeps the
 * engine and the router in line with the store. Nothing is left `queued` or `building` forever:
 * leases that stop being renewed are reaped.
 */
export class Orchestrator implements Engine {
  private readonly workerId: string;
  private table = RouteTable.empty();
  private routing: Promise<void> = Promise.resolve();
  private readonly stopping = new AbortController();
  /** aborted when shutdown's grace period is over: builds and health waits in progress give up */
  private readonly interrupting = new AbortController();
  /** idle workers, each waiting for a wake-up or its next poll */
  private readonly idle = new Set<() => void>();
  private loops: Promise<void>[] = [];
  private reconciler: NodeJS.Timeout | undefined;
  private reconciling: Promise<void> | null = null;
  /** per project: a rollout's switch, a stop, a restart and a reconcile pass never interleave */
  private readonly locks = new Map<string, Promise<unknown>>();

  private withProjectLock<T>(projectId: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.locks.get(projectId) ?? Promise.resolve()).then(fn, fn);
    const tail = run.catch(() => undefined);
    this.locks.set(projectId, tail);
    void tail.then(() => {
      if (this.locks.get(projectId) === tail) this.locks.delete(projectId);
    });
    return run;
  }

  private readonly labels: Record<string, string>;
  private lastSweep = 0;
  /** when each repeated reconciler failure was last logged (complain()), by what failed */
  private readonly complained = new Map<string, number>();
  /** workspace networks Slipway's own container was attached to */
  private readonly joined = new Set<string>();

  constructor(private readonly o: OrchestratorOptions) {
    this.workerId = `w-${o.deps.ids.id()}`;
    this.labels = { [INSTANCE_LABEL]: o.instanceId };
  }

  async start(): Promise<void> {
    const { deps } = this.o;
    await this.o.runtime.check();
    await mkdir(this.o.workDir, { recursive: true });
    await this.o.router.start();
    // The embedded store has a single Slipway process: whatever was in progress when it stopped
    // was interrupted and is failed now. With PostgreSQL, other replicas' leases run out instead.
    if (deps.store.dialect === 'sqlite') await this.failInterrupted();
    await this.reconcile();
    for (let i = 0; i < this.o.concurrency; i++) this.loops.push(this.workLoop(i));
    this.reconciler = setInterval(() => {
      // One pass at a time: a slow engine must not pile passes up.
      if (this.reconciling !== null) return;
      this.reconciling = this.reconcile()
        .catch((err: unknown) => {
          this.o.log.error({ err }, 'reconcile failed');
        })
        .finally(() => {
          this.reconciling = null;
        });
    }, this.o.reconcileEveryMs ?? 10_000);
  }

  async stop(project: ProjectRow, deployment: DeploymentRow): Promise<void> {
    await this.withProjectLock(project.id, async () => {
      await this.route(project.id, null);
      await this.removeContainers({ project: project.id, deployment: deployment.id });
    });
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
    clearInterval(this.reconciler);
    await this.reconciling;
    const workers = Promise.allSettled(this.loops);
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace over'>((resolve) => {
      timer = setTimeout(() => {
        resolve('grace over');
      }, this.o.shutdownGraceMs ?? 30_000);
    });
    if ((await Promise.race([workers, graceOver])) === 'grace over') {
      this.o.log.warn({ graceMs: this.o.shutdownGraceMs ?? 30_000 }, 'shutdown: interrupting the deployments still in progress');
      this.interrupting.abort();
    }
    clearTimeout(timer);
    await workers;
    await this.routing;
    const { router } = this.o;
    if (this.o.keepRouterOnExit === true && router.release !== undefined) await router.release();
    else await router.stop();
  }

  wake(): void {
    for (const resolve of [...this.idle]) resolve();
  }

  /** A rolling restart: each container is replaced by a fresh one that answers before the old goes. */
  /** Answers at once: the replacement runs in the background (long work never blocks a request). */
  restart(project: ProjectRow, deployment: DeploymentRow): Promise<void> {
    void this.withProjectLock(project.id, () => this.rollingRestart(project, deployment)).catch((err: unknown) => {
      this.o.log.error({ err, project: project.id }, 'rolling restart failed; the reconciler restores the replica count');
    });
    return Promise.resolve();
  }

  private async rollingRestart(project: ProjectRow, deployment: DeploymentRow): Promise<void> {
    if (deployment.image === null) return;
    const old = await this.o.runtime.list({ owner: { project: project.id, deployment: deployment.id }, labels: this.labels });
    const owner = this.ownerOf(project, deployment.id);
    const env = await this.envOf(project);
    const ws = await this.o.deps.store.db.selectFrom('workspaces').select('slug').where('id', '=', project.workspace_id).executeTakeFirstOrThrow();
    for (const c of old) {
      const fresh = await this.startContainer(project, owner, deployment.image, env, `${c.name.replace(/-r\d+$/, '')}-r${Date.now().toString(36)}`, `ws-${ws.slug}`);
      try {
        await this.waitHealthy([fresh], undefined);
      } catch (err) {
        await this.o.runtime.remove(fresh.id).catch(() => false);
        throw err;
      }
      await this.refreshRoutes(project.id);
      await this.o.runtime.stop(c.id, { graceSeconds: 10 });
      await this.o.runtime.remove(c.id);
      await this.refreshRoutes(project.id);
    }
  }

  async routesChanged(projectId: string): Promise<void> {
    await this.withProjectLock(projectId, () => this.refreshRoutes(projectId));
  }

  pods(projectId: string, deploymentId: string): Promise<Pod[]> {
    return podsOf(this.o.runtime, this.labels, projectId, deploymentId);
  }

  // ---- workers ------------------------------------------------------------------------------

  private async workLoop(n: number): Promise<void> {
    const worker = `${this.workerId}-${n.toString()}`;
    while (!this.stopping.signal.aborted) {
      let claimed: DeploymentRow | null = null;
      try {
        claimed = await this.o.queue.claim(worker);
      } catch (err) {
        this.o.log.error({ err }, 'claiming a deployment failed');
      }
      if (claimed === null) {
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(t);
            this.idle.delete(done);
            resolve();
          };
          const t = setTimeout(done, this.o.pollMs ?? 1000);
          this.idle.add(done);
        });
        continue;
      }
      await this.run(claimed, worker);
    }
  }

  private async run(d: DeploymentRow, worker: string): Promise<void> {
    const { deps, queue, buildLog, runtime } = this.o;
    const db = deps.store.db;
    const lines: string[] = [];
    let flushing: Promise<void> = Promise.resolve();
    const flush = () => {
      const batch = lines.splice(0);
      flushing = flushing.then(() => buildLog.append(d.id, batch)).catch((err: unknown) => {
        this.o.log.error({ err }, 'writing build log failed');
      });
      return flushing;
    };
    const say = (line: string) => {
      lines.push(line);
      if (lines.length >= 50) void flush();
    };
    const flusher = setInterval(() => void flush(), 200);
    const lost = new AbortController();
    const heartbeat = setInterval(() => {
      queue.heartbeat(d.id, worker).then(
        (held) => {
          if (!held) lost.abort();
        },
        (err: unknown) => {
          this.o.log.warn({ err }, 'lease renewal failed');
        },
      );
    }, Math.max(1000, this.o.leaseMs / 4));
    const started: ContainerInfo[] = [];
    let staged: Promise<void> | undefined;
    try {
      const project = await db.selectFrom('projects').selectAll().where('id', '=', d.project_id).executeTakeFirst();
      if (project === undefined) throw new DeployFailure('The project was deleted.');
      const owner = this.ownerOf(project, d.id);
      await refreshProjectStatus(db, project.id, iso(deps.clock.now()));

      let image = d.image;
      let commit: { sha: string; message: string } | null = null;
      if (image === null) {
        const built = await this.build(d, project, owner, say, AbortSignal.any([lost.signal, this.interrupting.signal]));
        image = built.image;
        commit = built.commit;
      } else {
        say(`Reusing image ${image} (${d.source}); no build.`);
      }
      const deploying = await queue.advance(d.id, worker, { kind: 'built' }, { image, ...(commit === null ? {} : { commit_sha: commit.sha, commit_message: commit.message }) });
      if (deploying === null) throw new DeployFailure('The deployment was taken over (its lease ran out).');
      await refreshProjectStatus(db, project.id, iso(deps.clock.now()));
      buildLog.notify(d.id);

      const ws = await db.selectFrom('workspaces').select(['id', 'slug']).where('id', '=', project.workspace_id).executeTakeFirstOrThrow();
      const network = await this.workspaceNetwork(ws);
      const env = await this.envOf(project);
      say(`Starting ${project.replicas.toString()} replica(s) of ${image}.`);
      // With the host ports chosen here, the router prepares the switch while the containers start.
      const hostPorts = this.upstreamMode === 'published' && this.o.router.stage !== undefined ? await freeLoopbackPorts(project.replicas) : [];
      if (hostPorts.length > 0) {
        const hosts = await this.hostsOf(project);
        staged = this.o.router.stage?.(project.id, { hosts, upstreams: hostPorts.map((port) => ({ host: '127.0.0.1', port })) }).catch((err: unknown) => {
          this.o.log.warn({ err, deployment: d.id }, 'staging the route failed; the switch reloads the router instead');
        });
      }
      for (let i = 0; i < project.replicas; i++) {
        started.push(await this.startContainer(project, owner, image, env, `${ws.slug}-${project.slug}-${d.id.slice(-8)}-${i.toString()}`, network, hostPorts[i]));
      }
      const healthy = await this.waitHealthy(started, say, this.interrupting.signal);
      await staged;
      say('All replicas answer; switching traffic.');

      // The switch: new upstreams first, then the old deployment retires. The last lines are
      // stored before the status changes: a log follower ends ([END]) as soon as it sees it.
      const url = defaultDomain(project, deps.platform.appsDomain);
      const previous = await this.withProjectLock(project.id, async () => {
        const running = await db.selectFrom('deployments').selectAll().where('project_id', '=', project.id).where('status', '=', 'running').execute();
        await this.route(project.id, this.upstreamsFrom(healthy));
        say(`Deployment is live at ${url}.`);
        await flush();
        const live = await queue.advance(d.id, worker, { kind: 'healthy' });
        if (live === null) throw new DeployFailure('The deployment was taken over (its lease ran out).');
        for (const p of running) await queue.advance(p.id, null, { kind: 'supersede' });
        return running;
      });
      // The old containers get their grace period to finish in-flight work, without holding
      // this worker; should this fail, the reconciler removes them as orphans.
      for (const p of previous) {
        void this.removeContainers({ project: project.id, deployment: p.id }).catch((err: unknown) => {
          this.o.log.warn({ err, deployment: p.id }, 'retiring old containers failed; the reconciler will remove them');
        });
      }
    } catch (err) {
      const interrupted = this.interrupting.signal.aborted;
      const message = interrupted ? INTERRUPTED : err instanceof DeployFailure ? err.message : 'The deployment failed because of an internal error; it has been logged.';
      if (!interrupted && !(err instanceof DeployFailure)) this.o.log.error({ err, deployment: d.id }, 'deployment failed');
      say(`[failed] ${message}`);
      if (staged !== undefined) {
        await staged;
        await this.o.router.stage?.(d.project_id, null).catch(() => undefined);
      }
      for (const c of started) await runtime.remove(c.id).catch(() => false);
      await flush();
      await queue.advance(d.id, worker, { kind: 'fail' }, { error: message });
    } finally {
      clearInterval(heartbeat);
      clearInterval(flusher);
      await flush();
      await refreshProjectStatus(db, d.project_id, iso(deps.clock.now())).catch(() => undefined);
      buildLog.forget(d.id);
    }
  }

  private async build(
    d: DeploymentRow,
    project: ProjectRow,
    owner: Owner,
    say: (line: string) => void,
    signal: AbortSignal,
  ): Promise<{ image: string; commit: { sha: string; message: string } }> {
    const { deps, runtime, git } = this.o;
    const conn = await deps.store.db.selectFrom('git_connections').selectAll().where('project_id', '=', project.id).executeTakeFirst();
    if (conn === undefined) throw new DeployFailure('The project has no Git connection any more.');
    const ws = await deps.store.db.selectFrom('workspaces').select(['slug', 'settings']).where('id', '=', project.workspace_id).executeTakeFirstOrThrow();
    const timeoutMs = parseSettings(ws.settings).build_timeout_sec * 1000;
    const branch = d.branch ?? conn.branch;
    say(`Fetching ${conn.repo_full_name}@${branch} from ${git.host}.`);
    let checkout;
    try {
      // only an installation still linked to the project's workspace, restricted to this repository
      const token = await cloneTokenFor(deps.store.db, this.o.githubApp, { workspaceId: project.workspace_id, installationId: Number(conn.installation_id), repoFullName: conn.repo_full_name }, signal);
      checkout = await git.fetch({ repoFullName: conn.repo_full_name, branch, workDir: this.o.workDir, commitSha: d.commit_sha ?? undefined, requireHead: d.require_head === 1, token, timeoutMs, signal });
    } catch (err) {
      // A cached installation token that Git refused (revoked, access removed) is not used again.
      if (err instanceof GitSourceError && err.code === 'access_denied') this.o.githubApp?.forget(Number(conn.installation_id));
      throw new DeployFailure(err instanceof Error ? err.message : String(err));
    }
    try {
      say(`Commit ${checkout.commitSha.slice(0, 12)}: ${firstLine(checkout.commitMessage)}`);
      let context;
      try {
        context = await prepareBuildContext({ checkoutDir: checkout.dir, rootDir: conn.root_dir, dockerfilePath: conn.dockerfile_path, baseImages: this.o.baseImages, port: project.port });
      } catch (err) {
        throw new DeployFailure(err instanceof Error ? err.message : String(err));
      }
      say(context.description);
      const tag = `slipway/${ws.slug}-${project.slug}:${d.id}`;
      // Images carry few labels: the classic builder adds one step (~70 ms) per label.
      const result = await runtime.build({ contextDir: context.contextDir, dockerfile: context.dockerfile, tag, labels: { ...this.labels, [PROJECT_LABEL]: owner.project }, onLine: say, timeoutMs, signal });
      switch (result.status) {
        case 'succeeded':
          return { image: tag, commit: { sha: checkout.commitSha, message: checkout.commitMessage } };
        case 'failed':
          throw new DeployFailure(`The build failed: ${result.error}`);
        case 'timed_out':
          throw new DeployFailure(`The build took longer than the workspace's build timeout (${(timeoutMs / 1000).toString()} s).`);
        case 'cancelled':
          throw new DeployFailure('The build was cancelled.');
      }
    } finally {
      await rm(checkout.dir, { recursive: true, force: true });
    }
  }

  // ---- containers and routes -----------------------------------------------------------------

  private ownerOf(project: ProjectRow, deploymentId: string): Owner {
    return { workspace: project.workspace_id, project: project.id, deployment: deploymentId };
  }

  private async envOf(project: ProjectRow): Promise<Record<string, string>> {
    try {
      return { ...(await this.o.envVars.resolvedFor(project.id)), PORT: project.port.toString() };
    } catch (err) {
      throw err instanceof UnusableEnvError ? new DeployFailure(err.message) : err;
    }
  }

  /**
   * `network` is the workspace's, `ws-<slug>`: the callers already know the slug. A `hostPort`
   * taken meanwhile gives way to one the engine picks.
   */
  private async startContainer(project: ProjectRow, owner: Owner, image: string, env: Record<string, string>, name: string, network: string, hostPort?: number): Promise<ContainerInfo> {
    const spec = {
      name,
      image,
      env,
      owner,
      cpu: Number(project.cpu),
      memoryBytes: ramBytes(project.ram),
      network,
      aliases: [project.slug],
      port: project.port,
      publish: this.upstreamMode === 'published',
      labels: this.labels,
      restart: { kind: 'unless-stopped' as const },
      init: true,
    };
    if (hostPort !== undefined) {
      try {
        return await this.o.runtime.run({ ...spec, hostPort });
      } catch (err) {
        if (!(err instanceof HostPortTakenError)) throw err;
        this.o.log.info({ hostPort, container: name }, 'the chosen host port was taken; the engine picks one');
      }
    }
    return this.o.runtime.run(spec);
  }

  /** Resolves with the containers as they were when each answered. */
  private async waitHealthy(containers: ContainerInfo[], say: ((line: string) => void) | undefined, signal?: AbortSignal): Promise<ContainerInfo[]> {
    const deadline = Date.now() + this.o.healthTimeoutMs;
    const healthy: ContainerInfo[] = [];
    for (const c of containers) {
      // the first look uses what run() saw a moment ago
      for (let first = true; ; first = false) {
        if (signal?.aborted === true) throw new DeployFailure(INTERRUPTED);
        const now = first && c.state === 'running' ? c : await this.o.runtime.inspect(c.id);
        if (now === null) throw new DeployFailure(`Container ${c.name} disappeared before it answered.`);
        if (now.state === 'exited' || now.state === 'dead') {
          throw new DeployFailure(`Container ${c.name} exited with code ${String(now.exitCode)} before it answered on port ${String(now.port)}.`);
        }
        const target = addressOf(now, this.upstreamMode);
        if (target !== null && (await answers(target))) {
          say?.(`${c.name} answers on port ${String(now.port)}.`);
          healthy.push(now);
          break;
        }
        if (Date.now() > deadline) {
          throw new DeployFailure(`Container ${c.name} did not answer on port ${String(now.port)} within ${(this.o.healthTimeoutMs / 1000).toString()} s; is the app listening on $PORT?`);
        }
        await sleep(HEALTH_POLL_MS, signal);
      }
    }
    return healthy;
  }

  private async removeContainers(selector: { project: string; deployment?: string }): Promise<void> {
    const containers = await this.o.runtime.list({ owner: selector, labels: this.labels });
    await Promise.all(
      containers.map(async (c) => {
        await this.o.runtime.stop(c.id, { graceSeconds: 10 });
        await this.o.runtime.remove(c.id);
      }),
    );
  }

  /**
   * Point the project's hosts at the running containers of its serving deployment; no upstream
   * means the router answers 503. (A rollout's switch routes its healthy containers directly.)
   */
  private async refreshRoutes(projectId: string): Promise<void> {
    const serving = (await servingDeployment(this.o.deps.store.db, projectId))?.id;
    await this.route(projectId, serving === undefined ? null : await this.upstreamsOf(projectId, serving));
  }

  /** The running containers of a deployment, as the router reaches them (docs/decisions.md#upstream-addressing). */
  private async upstreamsOf(projectId: string, deploymentId: string): Promise<Upstream[]> {
    return this.upstreamsFrom(await this.o.runtime.list({ owner: { project: projectId, deployment: deploymentId }, labels: this.labels }));
  }

  /** The running containers among `containers`, as the router reaches them. */
  private upstreamsFrom(containers: readonly ContainerInfo[]): Upstream[] {
    return containers.flatMap((c) => {
      const a = c.state === 'running' ? addressOf(c, this.upstreamMode) : null;
      return a === null ? [] : [a];
    });
  }

  private get upstreamMode(): UpstreamMode {
    return this.o.upstreamMode ?? 'published';
  }

  /** The workspace's network, created when missing, with Slipway's own container attached in `network` mode. */
  private async workspaceNetwork(ws: { id: string; slug: string }): Promise<string> {
    const name = `ws-${ws.slug}`;
    await this.o.runtime.ensureNetwork({ name, workspace: ws.id, labels: this.labels }).catch((err: unknown) => {
      // the address pool is full: the deployment says so, instead of "internal error"
      throw err instanceof NetworkPoolFullError ? new DeployFailure(err.message) : err;
    });
    if (this.upstreamMode === 'network' && this.o.self !== undefined && !this.joined.has(name)) {
      await this.o.runtime.connect(name, this.o.self);
      this.joined.add(name);
    }
    return name;
  }

  /** A project's hosts: its default domain and its verified custom domains (a pending one is not routed). */
  private async hostsOf(project: Pick<ProjectRow, 'id' | 'host_label'>): Promise<string[]> {
    const custom = await this.o.deps.store.db.selectFrom('domains').select('domain').where('project_id', '=', project.id).where('verified', '=', 1).execute();
    return this.hostsFrom(project, custom.map((c) => c.domain));
  }

  private hostsFrom(project: Pick<ProjectRow, 'host_label'>, custom: readonly string[]): string[] {
    return [defaultDomain(project, this.o.deps.platform.appsDomain), ...custom];
  }

  /** Every container of this installation, by the deployment that owns it: one engine call for a whole pass. */
  private async containersByDeployment(): Promise<Map<string, ContainerInfo[]>> {
    return groupBy(await this.o.runtime.list({ labels: this.labels }), (c) => c.owner?.deployment);
  }

  /** Set (or with null, remove) a project's routes and hand the table to the data plane, one change at a time. */
  private route(projectId: string, upstreams: Upstream[] | null): Promise<void> {
    const next = this.routing.then(async () => {
      const db = this.o.deps.store.db;
      const project = await db.selectFrom('projects').select(['id', 'host_label']).where('id', '=', projectId).executeTakeFirst();
      if (project === undefined || upstreams === null) {
        this.table = this.table.removeProject(projectId);
      } else {
        // The store holds each host name once: a project that held one of these in the table
        // held it stale (it was deleted or gave the name up), and loses it now.
        this.table = this.table.assign(projectId, { hosts: await this.hostsOf(project), upstreams });
      }
      await this.o.router.apply(this.table);
    });
    this.routing = next.catch((err: unknown) => {
      this.o.log.error({ err }, 'router update failed');
    });
    return next;
  }

  /**
   * A serving deployment with fewer containers than replicas (one was removed behind Slipway's
   * back) gets replacements; one whose containers keep restarting shows the project `crashed`.
   */
  private async heal(projectId: string, seen: ReadonlyMap<string, ContainerInfo[]>): Promise<void> {
    const { deps, runtime } = this.o;
    const db = deps.store.db;
    const project = await db.selectFrom('projects').selectAll().where('id', '=', projectId).executeTakeFirst();
    const d = await servingDeployment(db, projectId);
    if (project === undefined || d?.image == null) return;
    let containers = seen.get(d.id) ?? [];
    // The pass's snapshot may predate a rollout that finished since: ask the engine again before acting.
    if (containers.length < project.replicas) containers = await runtime.list({ owner: { project: projectId, deployment: d.id }, labels: this.labels });
    const missing = project.replicas - containers.length;
    if (missing > 0) {
      const env = await this.envOf(project);
      const ws = await db.selectFrom('workspaces').select(['id', 'slug']).where('id', '=', project.workspace_id).executeTakeFirstOrThrow();
      const network = await this.workspaceNetwork(ws);
      for (let i = 0; i < missing; i++) {
        this.o.log.info({ project: project.slug }, 'replacing a missing container');
        await this.startContainer(project, this.ownerOf(project, d.id), d.image, env, `${ws.slug}-${project.slug}-${d.id.slice(-8)}-r${Date.now().toString(36)}${i.toString()}`, network);
      }
    }
    const looping = containers.some((c) => c.restartCount >= CRASH_LOOP_RESTARTS && c.state !== 'running');
    const healthy = containers.length >= project.replicas && containers.every((c) => c.state === 'running');
    const status = looping ? 'crashed' : project.status === 'crashed' && healthy ? 'running' : null;
    if (status !== null && status !== project.status) {
      await db.updateTable('projects').set({ status, updated_at: iso(deps.clock.now()) }).where('id', '=', projectId).execute();
    }
  }

  // ---- recovery and reconciliation -------------------------------------------------------------

  private async failInterrupted(): Promise<void> {
    const db = this.o.deps.store.db;
    const now = iso(this.o.deps.clock.now());
    const rows = await db
      .updateTable('deployments')
      .set({ status: 'failed', error: INTERRUPTED, finished_at: now, lease_owner: null, lease_until: null })
      .where('status', 'in', LEASED)
      .returning(['id', 'project_id'])
      .execute();
    for (const r of rows) {
      await this.removeContainers({ project: r.project_id, deployment: r.id });
      await refreshProjectStatus(db, r.project_id, now);
    }
  }

  /**
   * Bring the engine and the router in line with the store: reap dead leases, remove containers
   * no serving or in-progress deployment owns (orphans), and route every serving deployment to
   * its running containers (host ports change when the engine restarts a container).
   *
   * Each step, each orphan and each project stands on its own: one that fails (a container the
   * engine cannot remove, a project whose image is gone) is logged and the rest of the pass runs.
   */
  async reconcile(): Promise<void> {
    const { deps, queue } = this.o;
    const db = deps.store.db;
    this.forgetOldComplaints();
    await this.step('reaping dead leases', async () => {
      for (const r of await queue.reap()) await refreshProjectStatus(db, r.project_id, iso(deps.clock.now()));
    });
    const state = await this.step('reading the deployments and the containers', async () => {
      const wanted = await db.selectFrom('deployments').select(['id', 'project_id', 'status']).where('status', 'in', [...LEASED, 'running']).execute();
      return { wanted, seen: await this.containersByDeployment() };
    });
    if (state !== undefined) {
      await this.removeOrphans(new Set(state.wanted.map((w) => w.id)), state.seen);
      const serving = [...new Set(state.wanted.filter((w) => w.status === 'running').map((w) => w.project_id))];
      for (const projectId of serving) {
        await this.withProjectLock(projectId, async () => {
          // Read again under the lock: a rollout in progress heals nothing.
          const active = await db.selectFrom('deployments').select('status').where('project_id', '=', projectId).where('status', 'in', ACTIVE).executeTakeFirst();
          if (active !== undefined) return;
          await this.heal(projectId, state.seen);
        }).catch((err: unknown) => {
          // One project that cannot be healed (its image is gone) must not stop the others.
          this.complain(`heal:${projectId}`, { err, project: projectId }, 'cannot restore the containers of a serving deployment');
        });
      }
    }
    await this.step('running the restarts a standby recorded', () => this.restartRequested());
    // A failed route sync is logged by the routing queue ('router update failed').
    await this.syncRoutes().catch(() => undefined);
    const retention = this.o.imageRetention ?? { keep: 5, everyMs: 60_000 };
    if (Date.now() - this.lastSweep >= retention.everyMs) {
      this.lastSweep = Date.now();
      await this.step('removing unneeded images', () => this.sweepImages(retention.keep));
      await this.step('removing the networks of deleted workspaces', () => this.sweepNetworks());
    }
  }

  /**
   * Stops and removes the containers no serving or in-progress deployment owns, each on its own:
   * one the engine refuses to remove is logged (once per COMPLAIN_EVERY_MS) and tried again at
   * the next pass, and the others go.
   */
  private async removeOrphans(keep: ReadonlySet<string>, seen: ReadonlyMap<string, ContainerInfo[]>): Promise<void> {
    const { runtime } = this.o;
    for (const [deployment, containers] of seen) {
      if (keep.has(deployment)) continue;
      for (const c of containers) {
        try {
          // The removal is forced: it kills a container that would not stop.
          await runtime.stop(c.id, { graceSeconds: 5 }).catch(() => undefined);
          await runtime.remove(c.id);
          this.complained.delete(`orphan:${c.id}`);
          this.o.log.info({ container: c.name }, 'removed an orphaned container');
        } catch (err) {
          this.complain(`orphan:${c.id}`, { err, container: c.name }, 'an orphaned container could not be removed; the reconciler tries again at each pass');
        }
      }
    }
  }

  /** One step of a reconcile pass: its failure is logged (once per COMPLAIN_EVERY_MS) and the pass goes on. */
  private async step<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      this.complain(`step:${what}`, { err }, `reconcile: ${what} failed; the next pass tries again`);
      return undefined;
    }
  }

  /** Logs a reconciler failure, unless the same one (`key`) was logged less than COMPLAIN_EVERY_MS ago. */
  private complain(key: string, obj: object, msg: string): void {
    const now = this.o.deps.clock.now().getTime();
    const last = this.complained.get(key);
    if (last !== undefined && now - last < COMPLAIN_EVERY_MS) return;
    this.complained.set(key, now);
    this.o.log.error(obj, msg);
  }

  /** Failures logged long enough ago are logged again when they recur (and the map stays small). */
  private forgetOldComplaints(): void {
    const now = this.o.deps.clock.now().getTime();
    for (const [key, at] of this.complained) if (now - at >= COMPLAIN_EVERY_MS) this.complained.delete(key);
  }

  /** Rolling restarts that a standby recorded: each request is cleared, then run like restart(). */
  private async restartRequested(): Promise<void> {
    const db = this.o.deps.store.db;
    const asked = await db.selectFrom('deployments').selectAll().where('status', '=', 'running').where('restart_requested_at', 'is not', null).execute();
    for (const d of asked) {
      const taken = await db.updateTable('deployments').set({ restart_requested_at: null }).where('id', '=', d.id).where('restart_requested_at', '=', d.restart_requested_at).executeTakeFirst();
      if (Number(taken.numUpdatedRows) === 0) continue;
      const project = await db.selectFrom('projects').selectAll().where('id', '=', d.project_id).executeTakeFirst();
      if (project === undefined) continue;
      this.o.log.info({ project: project.id, deployment: d.id }, 'restarting the replicas a standby was asked to restart');
      await this.restart(project, d);
    }
  }

  /** Removes the workspace networks of deleted workspaces, once no container uses them. */
  private async sweepNetworks(): Promise<void> {
    const { deps, runtime } = this.o;
    const workspaces = new Set((await deps.store.db.selectFrom('workspaces').select('id').execute()).map((w) => w.id));
    for (const n of await runtime.listNetworks({ labels: this.labels })) {
      if (n.workspace === null || workspaces.has(n.workspace)) continue;
      try {
        if (await runtime.removeNetwork(n.id)) this.o.log.info({ network: n.name }, 'removed the network of a deleted workspace');
        // a new workspace with the same slug gets a new network, which Slipway's container must join again
        this.joined.delete(n.name);
      } catch (err) {
        // a container of it is still being removed: the next sweep tries again
        this.o.log.warn({ err, network: n.name }, 'the network of a deleted workspace could not be removed yet');
      }
    }
  }

  /**
   * Removes the images no deployment needs: a project keeps the images of its deployments in
   * progress or running and of its `keep` newest deployments (rollback targets); images of
   * deleted projects go too. A removed image's deployments show `image: null` from then on.
   */
  private async sweepImages(keep: number): Promise<void> {
    const { deps, runtime } = this.o;
    const db = deps.store.db;
    // An image built after this read (its deployment not yet recorded with it) is not judged
    // now: only images older than the read, with a margin for the engine's whole seconds.
    const judgedBefore = Date.now() - 5_000;
    const rows = await db.selectFrom('deployments').select(['project_id', 'image', 'status']).where('image', 'is not', null).orderBy('created_at', 'desc').execute();
    // A project with a rollout in progress keeps all its images this time: its build may have
    // just tagged an older, cached image that its deployment does not name yet.
    const busy = new Set((await db.selectFrom('deployments').select('project_id').where('status', 'in', ACTIVE).execute()).map((r) => r.project_id));
    const needed = new Set<string>();
    const seen = new Map<string, number>();
    for (const r of rows) {
      const n = (seen.get(r.project_id) ?? 0) + 1;
      seen.set(r.project_id, n);
      if (r.image !== null && (n <= keep || isLive(r.status))) needed.add(r.image);
    }
    const removed: string[] = [];
    for (const image of await runtime.listImages({ labels: this.labels })) {
      const project = image.labels[PROJECT_LABEL];
      if (image.tags.length === 0 || image.tags.some((t) => needed.has(t)) || image.createdAt.getTime() >= judgedBefore || (project !== undefined && busy.has(project))) continue;
      try {
        for (const tag of image.tags) await runtime.removeImage(tag);
        removed.push(...image.tags);
      } catch (err) {
        // still used by a container (a rollout that began since the read): the next sweep decides again
        this.o.log.warn({ err, image: image.tags[0] }, 'an unneeded image could not be removed');
      }
    }
    if (removed.length > 0) {
      this.o.log.info({ images: removed.length }, 'removed images no deployment needs');
      await db.updateTable('deployments').set({ image: null }).where('image', 'in', removed).where('status', 'not in', LIVE).execute();
    }
  }

  /**
   * The whole route table from the store and the engine, applied in one go (after a restart the
   * router must not lose the projects it was already serving while they are added one by one).
   * It runs in the routing queue, so a rollout's switch is never undone by a stale read; a
   * project in the middle of its switch keeps the entry its rollout gave it.
   */
  private syncRoutes(): Promise<void> {
    const next = this.routing.then(async () => {
      const db = this.o.deps.store.db;
      const rows = await db
        .selectFrom('deployments')
        .innerJoin('projects', 'projects.id', 'deployments.project_id')
        .select(['deployments.id', 'deployments.project_id', 'deployments.status', 'deployments.created_at', 'projects.host_label'])
        .where('deployments.status', 'in', ['running', 'deploying'])
        .orderBy('deployments.created_at', 'desc')
        .execute();
      // Read after the rows: the containers of a deployment exist before it is marked running.
      const containers = await this.containersByDeployment();
      const domains = groupBy(await db.selectFrom('domains').select(['project_id', 'domain']).where('verified', '=', 1).execute(), (d) => d.project_id);
      let table = this.table;
      const decided = new Set<string>();
      const switching = new Set(rows.filter((r) => r.status === 'deploying').map((r) => r.project_id));
      for (const r of rows) {
        if (r.status !== 'running' || decided.has(r.project_id)) continue;
        decided.add(r.project_id);
        if (switching.has(r.project_id) && table.project(r.project_id) !== undefined) continue;
        const custom = (domains.get(r.project_id) ?? []).map((d) => d.domain);
        table = table.assign(r.project_id, { hosts: this.hostsFrom(r, custom), upstreams: this.upstreamsFrom(containers.get(r.id) ?? []) });
      }
      // Projects the store no longer serves go first; a host name that moved to another
      // project (the store holds each name once) moves in the table too, instead of being
      // refused as a conflict at every pass.
      for (const route of table.routes()) {
        if (!decided.has(route.project) && !switching.has(route.project)) table = table.removeProject(route.project);
      }
      if (table !== this.table) {
        this.table = table;
        await this.o.router.apply(this.table);
      }
    });
    this.routing = next.catch((err: unknown) => {
      this.o.log.error({ err }, 'router update failed');
    });
    return next;
  }
}
