import { request } from 'node:http';
import { createServer, type Server } from 'node:net';
import { performance } from 'node:perf_hooks';
import { iso, type Clock } from '../../../domain/clock.js';
import type { ContainerInfo, Runtime } from '../../../domain/runtime.js';
import { defaultDomain, type ProjectRow } from '../../projects/resolve.js';
import { refreshProjectStatus } from '../../projects/status.js';
import type { RouterDriver, Upstream } from '../../../adapters/router/index.js';
import type { Repositories } from '../../../store/repositories/index.js';
import type { DeploymentRow } from '../../../store/schema.js';
import type { BuildLog } from '../build-log.js';
import { openBuildLog, type BuildStep } from './build-step.js';
import { addressOf, type EngineLog, type InstanceContainers } from './containers.js';
import { DeployFailure, INTERRUPTED } from './failure.js';
import type { CrashSink } from '../../../domain/ports.js';
import type { ProjectLocks } from './project-locks.js';
import type { DeployQueue } from '../queue.js';
import type { RoutingState } from './routing-state.js';
import { sleep } from './sleep.js';
import { Phases } from './phases.js';

export interface RolloutOptions {
  /** the deployment's project and workspace, the project's running deployments and its status */
  repos: Pick<Repositories, 'projects' | 'deployments' | 'workspaces'>;
  clock: Clock;
  /** apps get `<host label>.<appsDomain>` (the URL the build log shows) */
  appsDomain: string;
  queue: DeployQueue;
  buildLog: BuildLog;
  builder: BuildStep;
  runtime: Runtime;
  containers: InstanceContainers;
  routing: RoutingState;
  router: RouterDriver;
  locks: ProjectLocks;
  /** how long new containers get to answer on their port */
  healthTimeoutMs: number;
  leaseMs: number;
  log: EngineLog;
  /** aborted when shutdown's grace period is over: builds and health waits in progress give up */
  interrupted: AbortSignal;
  /** told when new containers fail their health check (a crash alert) */
  crashes?: CrashSink | undefined;
}

/** New containers that exited or did not answer in time: the deployment fails, and it is a crash alert. */
class HealthFailure extends DeployFailure {}

/** How often a starting container is asked whether it answers yet. */
const HEALTH_POLL_MS = 20;

/**
 * A claimed deployment's way to `running`: build its image when it has none (BuildStep), start
 * its replicas on the workspace network, wait until each answers on its port, switch the
 * project's routes to them under the project's lock, and retire the previous deployment, whose
 * containers get their grace period in the background. Any failure removes what it started and
 * fails the deployment with a sentence for the user. The rolling restart lives here too: it
 * replaces a deployment's containers one at a time by the same start, wait and switch.
 */
export class Rollout {
  private readonly repos: RolloutOptions['repos'];
  private readonly clock: Clock;
  private readonly appsDomain: string;
  private readonly queue: DeployQueue;
  private readonly buildLog: BuildLog;
  private readonly builder: BuildStep;
  private readonly runtime: Runtime;
  private readonly containers: InstanceContainers;
  private readonly routing: RoutingState;
  private readonly router: RouterDriver;
  private readonly locks: ProjectLocks;
  private readonly healthTimeoutMs: number;
  private readonly leaseMs: number;
  private readonly log: EngineLog;
  private readonly interrupted: AbortSignal;
  private readonly crashes: CrashSink | undefined;

  constructor(o: RolloutOptions) {
    this.repos = o.repos;
    this.clock = o.clock;
    this.appsDomain = o.appsDomain;
    this.queue = o.queue;
    this.buildLog = o.buildLog;
    this.builder = o.builder;
    this.runtime = o.runtime;
    this.containers = o.containers;
    this.routing = o.routing;
    this.router = o.router;
    this.locks = o.locks;
    this.healthTimeoutMs = o.healthTimeoutMs;
    this.leaseMs = o.leaseMs;
    this.log = o.log;
    this.interrupted = o.interrupted;
    this.crashes = o.crashes;
  }

  async run(d: DeploymentRow, worker: string): Promise<void> {
    const { repos, clock, queue, buildLog, runtime, containers, routing, router } = this;
    const log = openBuildLog(buildLog, d.id, this.log);
    const { say } = log;
    const lost = new AbortController();
    const heartbeat = setInterval(() => {
      queue.heartbeat(d.id, worker).then(
        (held) => {
          if (!held) lost.abort();
        },
        (err: unknown) => {
          this.log.warn({ err }, 'lease renewal failed');
        },
      );
    }, Math.max(1000, this.leaseMs / 4));
    const started: ContainerInfo[] = [];
    let staged: Promise<void> | undefined;
    const phases = new Phases();
    try {
      const project = await repos.projects.byId(d.project_id);
      if (project === undefined) throw new DeployFailure('The project was deleted.');
      const owner = containers.ownerOf(project, d.id);
      await refreshProjectStatus(repos, project.id, iso(clock.now()));
      // With the host ports chosen now, the router prepares the switch while the commit is fetched
      // and built: its reload then overlaps the fetch, which mostly waits on git, instead of the
      // engine's container start (docs/deploys.md#speed). A port taken by the time the container
      // starts gives way to one the engine picks, and the switch reloads instead.
      const hostPorts = containers.mode === 'published' && router.stage !== undefined ? await freeLoopbackPorts(project.replicas) : [];
      if (hostPorts.length > 0) {
        const hosts = await routing.hostsOf(project);
        staged = router.stage?.(project.id, { hosts, upstreams: hostPorts.map((port) => ({ host: '127.0.0.1', port })) }).catch((err: unknown) => {
          this.log.warn({ err, deployment: d.id }, 'staging the route failed; the switch reloads the router instead');
        });
      }
      phases.mark('claimed');

      let image = d.image;
      let commit: { sha: string; message: string } | null = null;
      if (image === null) {
        const built = await this.builder.build(d, project, owner, say, AbortSignal.any([lost.signal, this.interrupted]), phases);
        image = built.image;
        commit = built.commit;
      } else if (d.source === 'template') {
        // a catalog image: here already, or pulled from its registry now
        await this.ensureImage(image, say);
      } else {
        say(`Reusing image ${image} (${d.source}); no build.`);
      }
      phases.mark('image');
      const deploying = await queue.advance(d.id, worker, { kind: 'built' }, { image, ...(commit === null ? {} : { commit_sha: commit.sha, commit_message: commit.message }) });
      if (deploying === null) throw new DeployFailure('The deployment was taken over (its lease ran out).');
      await refreshProjectStatus(repos, project.id, iso(clock.now()));
      buildLog.notify(d.id);
      phases.mark('built');

      // A workspace's deletion takes its projects with it.
      const ws = await repos.workspaces.byId(project.workspace_id);
      if (ws === undefined) throw new DeployFailure('The project was deleted.');
      const network = await containers.network(ws);
      phases.mark('network');
      const env = await containers.envOf(project);
      phases.mark('env');
      say(`Starting ${project.replicas.toString()} replica(s) of ${image}.`);
      for (let i = 0; i < project.replicas; i++) {
        started.push(await containers.start(project, owner, image, env, `${ws.slug}-${project.slug}-${d.id.slice(-8)}-${i.toString()}`, network, hostPorts[i]));
      }
      phases.mark('start');
      const healthy = await this.waitHealthy(started, project.health_path, say, this.interrupted);
      phases.mark('health');
      await staged;
      phases.mark('staged');
      say('All replicas answer; switching traffic.');

      // The switch: new upstreams first, then the old deployment retires. The last lines are
      // stored before the status changes: a log follower ends ([END]) as soon as it sees it.
      const url = defaultDomain(project, this.appsDomain);
      const previous = await this.locks.run(project.id, async () => {
        const running = await repos.deployments.running(project.id);
        await routing.route(project.id, containers.upstreamsFrom(healthy));
        say(`Deployment is live at ${url}.`);
        await log.flush();
        const live = await queue.advance(d.id, worker, { kind: 'healthy' });
        if (live === null) throw new DeployFailure('The deployment was taken over (its lease ran out).');
        for (const p of running) await queue.advance(p.id, null, { kind: 'supersede' });
        return running;
      });
      phases.mark('switch');
      this.log.info({ deployment: d.id, phases: phases.report() }, 'deployment phases');
      // The old containers get their grace period to finish in-flight work, without holding
      // this worker; should this fail, the reconciler removes them as orphans.
      for (const p of previous) {
        void containers.remove({ project: project.id, deployment: p.id }).catch((err: unknown) => {
          this.log.warn({ err, deployment: p.id }, 'retiring old containers failed; the reconciler will remove them');
        });
      }
    } catch (err) {
      const interrupted = this.interrupted.aborted;
      const message = interrupted ? INTERRUPTED : err instanceof DeployFailure ? err.message : 'The deployment failed because of an internal error; it has been logged.';
      if (!interrupted && !(err instanceof DeployFailure)) this.log.error({ err, deployment: d.id }, 'deployment failed');
      say(`[failed] ${message}`);
      if (staged !== undefined) {
        await staged;
        await router.stage?.(d.project_id, null).catch(() => undefined);
      }
      for (const c of started) await runtime.remove(c.id).catch(() => false);
      await log.flush();
      await queue.advance(d.id, worker, { kind: 'fail' }, { error: message });
      if (err instanceof HealthFailure && !interrupted) this.crashes?.crashed(d.project_id, d.id, 'health', message);
    } finally {
      clearInterval(heartbeat);
      await log.close();
      await refreshProjectStatus(repos, d.project_id, iso(clock.now())).catch(() => undefined);
      buildLog.forget(d.id);
    }
  }

  /** A template's image, pulled when the engine does not have it; a DeployFailure saying why when it cannot be had. */
  private async ensureImage(image: string, say: (line: string) => void): Promise<void> {
    if ((await this.runtime.inspectImage(image)) !== null) {
      say(`Using the image ${image}; no build.`);
      return;
    }
    say(`Pulling ${image}.`);
    try {
      await this.runtime.pull(image, { timeoutMs: 15 * 60_000 });
    } catch (err) {
      throw new DeployFailure(`The image ${image} is not on this host and cannot be pulled: ${err instanceof Error ? err.message : String(err)}`);
    }
    say(`Pulled ${image}.`);
  }

  /** A rolling restart: each container is replaced by a fresh one that answers before the old goes. */
  async restart(project: ProjectRow, deployment: DeploymentRow): Promise<void> {
    const { runtime, containers, routing } = this;
    if (deployment.image === null) return;
    const old = await containers.of(project.id, deployment.id);
    const owner = containers.ownerOf(project, deployment.id);
    const env = await containers.envOf(project);
    const ws = await this.repos.workspaces.byId(project.workspace_id);
    if (ws === undefined) throw new Error(`The workspace of project ${project.id} was deleted.`);
    const network = await containers.network(ws);
    for (const c of old) {
      const fresh = await containers.start(project, owner, deployment.image, env, `${c.name.replace(/-r\d+$/, '')}-r${containers.stamp()}`, network);
      try {
        await this.waitHealthy([fresh], project.health_path, undefined);
      } catch (err) {
        await runtime.remove(fresh.id).catch(() => false);
        throw err;
      }
      await routing.refresh(project.id);
      await runtime.stop(c.id, { graceSeconds: 10 });
      await runtime.remove(c.id);
      await routing.refresh(project.id);
    }
  }

  /**
   * Resolves with the containers as they were when each answered. The timeout is of a real
   * wait, so it runs on monotonic time (performance.now()), not on the injected clock, which
   * tests move by hand: a moved clock neither cuts the wait short nor stretches it.
   */
  private async waitHealthy(containers: ContainerInfo[], healthPath: string | null, say: ((line: string) => void) | undefined, signal?: AbortSignal): Promise<ContainerInfo[]> {
    const deadline = performance.now() + this.healthTimeoutMs;
    const healthy: ContainerInfo[] = [];
    for (const c of containers) {
      // the first look uses what run() saw a moment ago
      for (let first = true; ; first = false) {
        if (signal?.aborted === true) throw new DeployFailure(INTERRUPTED);
        const now = first && c.state === 'running' ? c : await this.runtime.inspect(c.id);
        if (now === null) throw new DeployFailure(`Container ${c.name} disappeared before it answered.`);
        if (now.state === 'exited' || now.state === 'dead') {
          throw new HealthFailure(`Container ${c.name} exited with code ${String(now.exitCode)} before it answered on port ${String(now.port)}.`);
        }
        const target = addressOf(now, this.containers.mode);
        if (target !== null && (await answers(target, healthPath))) {
          say?.(healthPath === null ? `${c.name} answers on port ${String(now.port)}.` : `${c.name} answers ${healthPath} on port ${String(now.port)}.`);
          healthy.push(now);
          break;
        }
        if (performance.now() > deadline) {
          throw new HealthFailure(
            healthPath === null
              ? `Container ${c.name} did not answer on port ${String(now.port)} within ${(this.healthTimeoutMs / 1000).toString()} s; is the app listening on $PORT?`
              : `Container ${c.name} did not answer ${healthPath} on port ${String(now.port)} with a status below 400 within ${(this.healthTimeoutMs / 1000).toString()} s.`,
          );
        }
        await sleep(HEALTH_POLL_MS, signal);
      }
    }
    return healthy;
  }
}

/**
 * Without a health path, any HTTP answer on the port counts: the app is up, whatever its routes
 * say. With one (a template's `health_path`), only an answer below 400 there: an app that
 * listens before it is ready (migrations, warm-up) takes no traffic until it says so.
 */
function answers({ host, port }: Upstream, healthPath: string | null): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host, port, path: healthPath ?? '/', method: 'GET', timeout: 2000 }, (res) => {
      res.resume();
      resolve(healthPath === null || (res.statusCode ?? 500) < 400);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => {
      resolve(false);
    });
    req.end();
  });
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
