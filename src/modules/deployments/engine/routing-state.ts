import { defaultDomain, type ProjectRow } from '../../projects/resolve.js';
import { RouteTable, type RouterDriver, type Upstream } from '../../../adapters/router/index.js';
import type { Repositories } from '../../../store/repositories/index.js';
import { groupBy, type EngineLog, type InstanceContainers } from './containers.js';

export interface RoutingStateOptions {
  /** which deployment serves each project, and its verified custom domains */
  repos: Pick<Repositories, 'projects' | 'deployments' | 'domains'>;
  router: RouterDriver;
  containers: InstanceContainers;
  /** apps get `<host label>.<appsDomain>` */
  appsDomain: string;
  log: EngineLog;
}

/**
 * The routes the router should hold: the engine's copy of the route table, changed one project
 * at a time (a rollout's switch, a stop, a restart) or rebuilt whole from the store and the
 * engine (the reconciler's sync), and handed to the router after each change. Every change runs
 * in one queue, so a switch is never undone by a sync that read the store before it.
 */
export class RoutingState {
  private table = RouteTable.empty();
  private queue: Promise<void> = Promise.resolve();

  private readonly repos: RoutingStateOptions['repos'];
  private readonly router: RouterDriver;
  private readonly containers: InstanceContainers;
  private readonly appsDomain: string;
  private readonly log: EngineLog;

  constructor(o: RoutingStateOptions) {
    this.repos = o.repos;
    this.router = o.router;
    this.containers = o.containers;
    this.appsDomain = o.appsDomain;
    this.log = o.log;
  }

  /** Resolves once the changes asked for so far are through (failed or not). */
  settled(): Promise<void> {
    return this.queue;
  }

  /** Set (or with null, remove) a project's routes and hand the table to the data plane, one change at a time. */
  route(projectId: string, upstreams: Upstream[] | null): Promise<void> {
    return this.enqueue(async () => {
      const project = await this.repos.projects.byId(projectId);
      if (project === undefined || upstreams === null) {
        this.table = this.table.removeProject(projectId);
      } else {
        // The store holds each host name once: a project that held one of these in the table
        // held it stale (it was deleted or gave the name up), and loses it now.
        this.table = this.table.assign(projectId, { hosts: await this.hostsOf(project), upstreams });
      }
      await this.router.apply(this.table);
    });
  }

  /**
   * Point the project's hosts at the running containers of its serving deployment; no upstream
   * means the router answers 503. (A rollout's switch routes its healthy containers directly.)
   */
  async refresh(projectId: string): Promise<void> {
    const serving = (await this.repos.deployments.serving(projectId))?.id;
    await this.route(projectId, serving === undefined ? null : this.containers.upstreamsFrom(await this.containers.of(projectId, serving)));
  }

  /**
   * The whole route table from the store and the engine, applied in one go (after a restart the
   * router must not lose the projects it was already serving while they are added one by one).
   * It runs in the routing queue, so a rollout's switch is never undone by a stale read; a
   * project in the middle of its switch keeps the entry its rollout gave it.
   */
  sync(): Promise<void> {
    return this.enqueue(async () => {
      const rows = await this.repos.deployments.routable();
      // Read after the rows: the containers of a deployment exist before it is marked running.
      const containers = await this.containers.byDeployment();
      const domains = groupBy(await this.repos.domains.allVerified(), (d) => d.project_id);
      let table = this.table;
      const decided = new Set<string>();
      const switching = new Set(rows.filter((r) => r.status === 'deploying').map((r) => r.project_id));
      for (const r of rows) {
        if (r.status !== 'running' || decided.has(r.project_id)) continue;
        decided.add(r.project_id);
        if (switching.has(r.project_id) && table.project(r.project_id) !== undefined) continue;
        const custom = (domains.get(r.project_id) ?? []).map((d) => d.domain);
        table = table.assign(r.project_id, { hosts: this.hostsFrom(r, custom), upstreams: this.containers.upstreamsFrom(containers.get(r.id) ?? []) });
      }
      // Projects the store no longer serves go first; a host name that moved to another
      // project (the store holds each name once) moves in the table too, instead of being
      // refused as a conflict at every pass.
      for (const route of table.routes()) {
        if (!decided.has(route.project) && !switching.has(route.project)) table = table.removeProject(route.project);
      }
      if (table !== this.table) {
        this.table = table;
        await this.router.apply(this.table);
      }
    });
  }

  /** A project's hosts: its default domain and its verified custom domains (a pending one is not routed). */
  async hostsOf(project: Pick<ProjectRow, 'id' | 'host_label'>): Promise<string[]> {
    return this.hostsFrom(project, await this.repos.domains.verifiedNamesOf(project.id));
  }

  private hostsFrom(project: Pick<ProjectRow, 'host_label'>, custom: readonly string[]): string[] {
    return [defaultDomain(project, this.appsDomain), ...custom];
  }

  /** A failed change is logged here; its caller sees the rejection too. */
  private enqueue(change: () => Promise<void>): Promise<void> {
    const next = this.queue.then(change);
    this.queue = next.catch((err: unknown) => {
      this.log.error({ err }, 'router update failed');
    });
    return next;
  }
}
