import { iso, type Clock } from '../../../domain/clock.js';
import type { ContainerInfo, Runtime } from '../../../domain/runtime.js';
import type { CrashSink } from '../../../domain/ports.js';
import type { ProjectRow } from '../../projects/resolve.js';
import { refreshProjectStatus } from '../../projects/status.js';
import type { Repositories } from '../../../store/repositories/index.js';
import type { DeploymentRow } from '../../../store/schema.js';
import { PROJECT_LABEL, type EngineLog, type InstanceContainers } from './containers.js';
import { INTERRUPTED } from './failure.js';
import type { ProjectLocks } from './project-locks.js';
import type { DeployQueue } from '../queue.js';
import type { Retention } from './retention.js';
import type { RoutingState } from './routing-state.js';

export interface ReconcilerOptions {
  /** the deployments and their projects (failing, healing, restarting), their workspaces' networks */
  repos: Pick<Repositories, 'deployQueue' | 'deployments' | 'projects' | 'workspaces'>;
  clock: Clock;
  queue: DeployQueue;
  runtime: Runtime;
  containers: InstanceContainers;
  routing: RoutingState;
  locks: ProjectLocks;
  retention: Retention;
  log: EngineLog;
  /** a rolling restart, as the engine runs it for a request (Orchestrator.restart) */
  restart: (project: ProjectRow, deployment: DeploymentRow) => Promise<void>;
  /** told when a serving deployment starts crash-looping (a crash alert) */
  crashes?: CrashSink | undefined;
}

/** What a crash loop's alert says: how often it restarted, how it last ended. */
function loopCause(containers: readonly ContainerInfo[]): string {
  const worst = [...containers].sort((a, b) => b.restartCount - a.restartCount)[0];
  if (worst === undefined) return 'its containers keep restarting';
  const ended = worst.oomKilled ? 'killed for exceeding its memory limit' : `exited with code ${String(worst.exitCode)}`;
  return `crash loop: ${worst.name} restarted ${worst.restartCount.toString()} times and ${ended}`;
}

/** A container restarted this often by the engine, and not running now, is crash-looping. */
const CRASH_LOOP_RESTARTS = 3;
/** How often a reconciler failure that recurs at every pass (an orphan the engine cannot remove) is logged. */
const COMPLAIN_EVERY_MS = 10 * 60_000;

/**
 * The periodic pass that brings the engine and the router in line with the store: it reaps
 * dead leases, removes orphaned containers, heals serving deployments (missing replicas,
 * crash loops), runs the restarts a standby recorded, syncs the whole route table and, when
 * due, the retention sweeps. Each step, each orphan and each project stands on its own: one
 * that fails is logged (once per COMPLAIN_EVERY_MS while it recurs) and the rest of the pass
 * runs. It also fails, at start, what an embedded store's previous process left in progress.
 */
export class Reconciler {
  /** when each repeated failure was last logged (complain()), by what failed */
  private readonly complained = new Map<string, number>();
  /**
   * Each container's restart count at the previous pass, by container id: a crashed project shows
   * `running` again only when every replica runs and none restarted since (a crash-looping one is
   * `running` for an instant between its restarts, and a pass landing then must not clear `crashed`).
   */
  private restartsSeen = new Map<string, number>();

  private readonly repos: ReconcilerOptions['repos'];
  private readonly clock: Clock;
  private readonly queue: DeployQueue;
  private readonly runtime: Runtime;
  private readonly containers: InstanceContainers;
  private readonly routing: RoutingState;
  private readonly locks: ProjectLocks;
  private readonly retention: Retention;
  private readonly log: EngineLog;
  private readonly restart: (project: ProjectRow, deployment: DeploymentRow) => Promise<void>;
  private readonly crashes: CrashSink | undefined;

  constructor(o: ReconcilerOptions) {
    this.repos = o.repos;
    this.clock = o.clock;
    this.queue = o.queue;
    this.runtime = o.runtime;
    this.containers = o.containers;
    this.routing = o.routing;
    this.locks = o.locks;
    this.retention = o.retention;
    this.log = o.log;
    this.restart = o.restart;
    this.crashes = o.crashes;
  }

  /** Deployments left in progress by a stopped process fail with "Interrupted"; their containers go. */
  async failInterrupted(): Promise<void> {
    const { repos } = this;
    const now = iso(this.clock.now());
    const rows = await repos.deployQueue.failAllLeased(now, INTERRUPTED);
    for (const r of rows) {
      await this.containers.remove({ project: r.project_id, deployment: r.id });
      await refreshProjectStatus(repos, r.project_id, now);
    }
  }

  /**
   * Bring the engine and the router in line with the store: reap dead leases, remove containers
   * no serving or in-progress deployment owns (orphans), and route every serving deployment to
   * its running containers (host ports change when the engine restarts a container).
   */
  async pass(): Promise<void> {
    const { repos, clock, queue, retention } = this;
    this.forgetOldComplaints();
    await this.step('reaping dead leases', async () => {
      for (const r of await queue.reap()) await refreshProjectStatus(repos, r.project_id, iso(clock.now()));
    });
    const state = await this.step('reading the deployments and the containers', async () => {
      const wanted = await repos.deployments.withContainers();
      return { wanted, seen: await this.containers.byDeployment() };
    });
    if (state !== undefined) {
      const previous = this.restartsSeen;
      this.restartsSeen = new Map([...state.seen.values()].flat().map((c) => [c.id, c.restartCount]));
      await this.removeOrphans(new Set(state.wanted.map((w) => w.id)), state.seen);
      const serving = [...new Set(state.wanted.filter((w) => w.status === 'running').map((w) => w.project_id))];
      for (const projectId of serving) {
        await this.locks.run(projectId, async () => {
          // Read again under the lock: a rollout in progress heals nothing.
          if (await repos.deployments.anyActive(projectId)) return;
          await this.heal(projectId, state.seen, previous);
        }).catch((err: unknown) => {
          // One project that cannot be healed (its image is gone) must not stop the others.
          this.complain(`heal:${projectId}`, { err, project: projectId }, 'cannot restore the containers of a serving deployment');
        });
      }
    }
    await this.step('removing the volumes of deleted template instances', () => this.sweepVolumes());
    await this.step('running the restarts a standby recorded', () => this.restartRequested());
    // A failed route sync is logged by the routing queue ('router update failed').
    await this.routing.sync().catch(() => undefined);
    if (retention.due()) {
      await this.step('removing unneeded images', () => retention.sweepImages());
      await this.step('removing the networks of deleted workspaces', () => retention.sweepNetworks());
    }
  }

  /** The data volumes of template instances that no longer exist, once no container uses them (the orphans went first). */
  private async sweepVolumes(): Promise<void> {
    const { runtime, repos, containers } = this;
    for (const v of await runtime.listVolumes({ labels: containers.labels })) {
      const project = v.labels[PROJECT_LABEL];
      if (project === undefined || (await repos.projects.byId(project)) !== undefined) continue;
      try {
        if (await runtime.removeVolume(v.name)) this.log.info({ volume: v.name }, 'removed the data volume of a deleted template instance');
      } catch (err) {
        this.complain(`volume:${v.name}`, { err, volume: v.name }, 'the data volume of a deleted template instance could not be removed yet');
      }
    }
  }

  /**
   * Stops and removes the containers no serving or in-progress deployment owns, each on its own:
   * one the engine refuses to remove is logged (once per COMPLAIN_EVERY_MS) and tried again at
   * the next pass, and the others go.
   */
  private async removeOrphans(keep: ReadonlySet<string>, seen: ReadonlyMap<string, ContainerInfo[]>): Promise<void> {
    const { runtime } = this;
    for (const [deployment, containers] of seen) {
      if (keep.has(deployment)) continue;
      for (const c of containers) {
        try {
          // The removal is forced: it kills a container that would not stop.
          await runtime.stop(c.id, { graceSeconds: 5 }).catch(() => undefined);
          await runtime.remove(c.id);
          this.complained.delete(`orphan:${c.id}`);
          this.log.info({ container: c.name }, 'removed an orphaned container');
        } catch (err) {
          this.complain(`orphan:${c.id}`, { err, container: c.name }, 'an orphaned container could not be removed; the reconciler tries again at each pass');
        }
      }
    }
  }

  /**
   * A serving deployment with fewer containers than replicas (one was removed behind Slipway's
   * back) gets replacements; one whose containers keep restarting shows the project `crashed`,
   * until every replica runs and none restarted since the previous pass.
   */
  private async heal(projectId: string, seen: ReadonlyMap<string, ContainerInfo[]>, previous: ReadonlyMap<string, number>): Promise<void> {
    const { repos, clock, containers: instance } = this;
    const project = await repos.projects.byId(projectId);
    const d = await repos.deployments.serving(projectId);
    if (project === undefined || d?.image == null) return;
    let containers = seen.get(d.id) ?? [];
    // The pass's snapshot may predate a rollout that finished since: ask the engine again before acting.
    if (containers.length < project.replicas) containers = await instance.of(projectId, d.id);
    const missing = project.replicas - containers.length;
    if (missing > 0) {
      const env = await instance.envOf(project);
      const ws = await repos.workspaces.byId(project.workspace_id);
      if (ws === undefined) throw new Error(`The workspace of project ${projectId} was deleted.`);
      const network = await instance.network(ws);
      for (let i = 0; i < missing; i++) {
        this.log.info({ project: project.slug }, 'replacing a missing container');
        await instance.start(project, instance.ownerOf(project, d.id), d.image, env, `${ws.slug}-${project.slug}-${d.id.slice(-8)}-r${instance.stamp()}${i.toString()}`, network);
      }
    }
    const looping = containers.some((c) => c.restartCount >= CRASH_LOOP_RESTARTS && c.state !== 'running');
    const healthy = containers.length >= project.replicas && containers.every((c) => c.state === 'running' && previous.get(c.id) === c.restartCount);
    const status = looping ? 'crashed' : project.status === 'crashed' && healthy ? 'running' : null;
    if (status !== null && status !== project.status) {
      await repos.projects.setStatus(projectId, status, iso(clock.now()));
      if (status === 'crashed') this.crashes?.crashed(projectId, d.id, 'loop', loopCause(containers));
    }
  }

  /** Rolling restarts that a standby recorded: each request is cleared, then run like restart(). */
  private async restartRequested(): Promise<void> {
    const { repos } = this;
    for (const d of await repos.deployments.restartRequested()) {
      if (!(await repos.deployments.takeRestartRequest(d.id, d.restart_requested_at))) continue;
      const project = await repos.projects.byId(d.project_id);
      if (project === undefined) continue;
      this.log.info({ project: project.id, deployment: d.id }, 'restarting the replicas a standby was asked to restart');
      await this.restart(project, d);
    }
  }

  /** One step of a pass: its failure is logged (once per COMPLAIN_EVERY_MS) and the pass goes on. */
  private async step<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      this.complain(`step:${what}`, { err }, `reconcile: ${what} failed; the next pass tries again`);
      return undefined;
    }
  }

  /** Logs a failure, unless the same one (`key`) was logged less than COMPLAIN_EVERY_MS ago. */
  private complain(key: string, obj: object, msg: string): void {
    const now = this.clock.now().getTime();
    const last = this.complained.get(key);
    if (last !== undefined && now - last < COMPLAIN_EVERY_MS) return;
    this.complained.set(key, now);
    this.log.error(obj, msg);
  }

  /** Failures logged long enough ago are logged again when they recur (and the map stays small). */
  private forgetOldComplaints(): void {
    const now = this.clock.now().getTime();
    for (const [key, at] of this.complained) if (now - at >= COMPLAIN_EVERY_MS) this.complained.delete(key);
  }
}
