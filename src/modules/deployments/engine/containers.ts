import type { Clock } from '../../../domain/clock.js';
import type { Pod } from '../../../domain/ports.js';
import { ForeignObjectError, HostPortTakenError, NetworkPoolFullError, type ContainerInfo, type Mount, type Owner, type Runtime, type UsageOf } from '../../../domain/runtime.js';
import { UnusableEnvError, type EnvService } from '../../env/env.service.js';
import type { ProjectRow } from '../../projects/resolve.js';
import { ramBytes } from '../../projects/resources.js';
import type { Upstream } from '../../../adapters/router/index.js';
import { DeployFailure } from './failure.js';

/**
 * The containers of this installation on the engine: how a project's container is specified
 * and started, how the router and the health check reach one (docs/decisions.md#upstream-addressing),
 * the workspace networks they join, and their removal. Every container and image Slipway makes
 * carries the instance label, so that one engine can serve several installations; the rollout,
 * the reconciler and the status view all go through here.
 */

export const INSTANCE_LABEL = 'slipway.instance';
/** On images: the project that built them, for retention (a busy project keeps all of its). */
export const PROJECT_LABEL = 'slipway.image.project';

/** The named volume of a template instance's `n`th data path. */
export const projectVolumeName = (projectId: string, n: number): string => `slipway-vol-${projectId}-${n.toString()}`;

export type UpstreamMode = 'published' | 'network';

export interface EngineLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface ContainersOptions {
  runtime: Runtime;
  /** the resource sampler's recent use of a container (the status view answers from it) */
  usageOf?: UsageOf | undefined;
  /** a project's variables as its containers get them */
  envVars: Pick<EnvService, 'resolvedFor'>;
  clock: Clock;
  log: EngineLog;
  instanceId: string;
  upstreamMode: UpstreamMode;
  /** Slipway's own container, when it runs in one: joined to every workspace network (`network` mode) */
  self: string | undefined;
}

export const instanceLabels = (instanceId: string): Record<string, string> => ({ [INSTANCE_LABEL]: instanceId });

/** The short form of an installation's id in the names of its engine objects: its first 8 hex digits. */
export const instanceTag = (instanceId: string): string => instanceId.replace(/[^0-9a-f]/gi, '').slice(0, 8).toLowerCase();

/**
 * The engine's name of a workspace's network: `slipway-<installation>-ws-<slug>`. The API's
 * `namespace` stays `ws-<slug>`; on the engine, two installations' workspaces of one slug get a
 * network each (docs/operations.md#several-installations-on-one-engine).
 */
export const workspaceNetworkName = (instanceId: string, slug: string): string => `slipway-${instanceTag(instanceId)}-ws-${slug}`;

/** Whether `name` is a workspace network name of the current form for this installation (older versions named them `ws-<slug>`). */
export const isCurrentNetworkName = (instanceId: string, name: string): boolean => name.startsWith(`slipway-${instanceTag(instanceId)}-ws-`);

/** How the router and the health check reach a container, or null while they cannot (docs/decisions.md#upstream-addressing). */
export function addressOf(c: ContainerInfo, mode: UpstreamMode): Upstream | null {
  if (mode === 'network') return c.networkAddress === null || c.port === null ? null : { host: c.networkAddress, port: c.port };
  return c.hostPort === null ? null : { host: '127.0.0.1', port: c.hostPort };
}


/**
 * A deployment's containers as pods, with their resource use: from the resource sampler's
 * memory when it has a recent sample (the leader), otherwise from the engine.
 */
export async function podsOf(runtime: Runtime, labels: Record<string, string>, projectId: string, deploymentId: string, usageOf: UsageOf = () => null): Promise<Pod[]> {
  const containers = await runtime.list({ owner: { project: projectId, deployment: deploymentId }, labels });
  // Stats take a sampling window each: ask for all pods at once.
  return Promise.all(
    containers.map(async (c) => {
      const usage = c.state === 'running' ? (usageOf(c.id) ?? (await runtime.stats(c.id))) : null;
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

export function groupBy<T>(items: readonly T[], key: (item: T) => string | undefined): Map<string, T[]> {
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

export class InstanceContainers {
  readonly labels: Record<string, string>;
  readonly mode: UpstreamMode;
  /** workspace networks Slipway's own container was attached to */
  private readonly joined = new Set<string>();
  /** workspace networks this installation's older containers were moved onto (once per process) */
  private readonly moved = new Set<string>();

  private readonly runtime: Runtime;
  private readonly usageOf: UsageOf | undefined;
  private readonly envVars: Pick<EnvService, 'resolvedFor'>;
  private readonly clock: Clock;
  private readonly log: EngineLog;
  private readonly instanceId: string;
  private readonly self: string | undefined;

  constructor(o: ContainersOptions) {
    this.runtime = o.runtime;
    this.usageOf = o.usageOf;
    this.envVars = o.envVars;
    this.clock = o.clock;
    this.log = o.log;
    this.instanceId = o.instanceId;
    this.self = o.self;
    this.labels = instanceLabels(o.instanceId);
    this.mode = o.upstreamMode;
  }

  ownerOf(project: ProjectRow, deploymentId: string): Owner {
    return { workspace: project.workspace_id, project: project.id, deployment: deploymentId };
  }

  /** A suffix that keeps a replacement container's name apart from the one it replaces. */
  stamp(): string {
    return this.clock.now().getTime().toString(36);
  }

  async envOf(project: ProjectRow): Promise<Record<string, string>> {
    try {
      return { ...(await this.envVars.resolvedFor(project.id)), PORT: project.port.toString() };
    } catch (err) {
      throw err instanceof UnusableEnvError ? new DeployFailure(err.message) : err;
    }
  }

  /**
   * `network` is the workspace's (network()). A `hostPort`
   * taken meanwhile gives way to one the engine picks.
   */
  async start(project: ProjectRow, owner: Owner, image: string, env: Record<string, string>, name: string, network: string, hostPort?: number): Promise<ContainerInfo> {
    const mounts = await this.volumesOf(project);
    const spec = {
      ...(mounts.length === 0 ? {} : { mounts }),
      ...(project.command === null ? {} : { command: JSON.parse(project.command) as string[] }),
      name,
      image,
      env,
      owner,
      cpu: Number(project.cpu),
      memoryBytes: ramBytes(project.ram),
      network,
      aliases: [project.slug],
      port: project.port,
      publish: this.mode === 'published',
      labels: this.labels,
      restart: { kind: 'unless-stopped' as const },
      init: true,
    };
    if (hostPort !== undefined) {
      try {
        return await this.runtime.run({ ...spec, hostPort });
      } catch (err) {
        if (!(err instanceof HostPortTakenError)) throw err;
        this.log.info({ hostPort, container: name }, 'the chosen host port was taken; the engine picks one');
      }
    }
    return this.runtime.run(spec);
  }

  /**
   * A template instance's data paths, each on its named volume `slipway-vol-<project id>-<n>`
   * (created on first use, kept across deploys, removed by the reconciler once the instance is gone).
   */
  private async volumesOf(project: ProjectRow): Promise<Mount[]> {
    if (project.volumes === null) return [];
    const paths = JSON.parse(project.volumes) as string[];
    const mounts: Mount[] = [];
    for (const [i, path] of paths.entries()) {
      const volume = projectVolumeName(project.id, i);
      await this.runtime.ensureVolume({ name: volume, workspace: project.workspace_id, labels: { ...this.labels, [PROJECT_LABEL]: project.id } });
      mounts.push({ volume, path });
    }
    return mounts;
  }

  async remove(selector: { project: string; deployment?: string }): Promise<void> {
    const containers = await this.runtime.list({ owner: selector, labels: this.labels });
    await Promise.all(
      containers.map(async (c) => {
        await this.runtime.stop(c.id, { graceSeconds: 10 });
        await this.runtime.remove(c.id);
      }),
    );
  }

  /** A deployment's containers, as the engine sees them now. */
  of(projectId: string, deploymentId: string): Promise<ContainerInfo[]> {
    return this.runtime.list({ owner: { project: projectId, deployment: deploymentId }, labels: this.labels });
  }

  /** Every container of this installation, by the deployment that owns it: one engine call for a whole pass. */
  async byDeployment(): Promise<Map<string, ContainerInfo[]>> {
    return groupBy(await this.runtime.list({ labels: this.labels }), (c) => c.owner?.deployment);
  }

  /** The running containers among `containers`, as the router reaches them. */
  upstreamsFrom(containers: readonly ContainerInfo[]): Upstream[] {
    return containers.flatMap((c) => {
      const a = c.state === 'running' ? addressOf(c, this.mode) : null;
      return a === null ? [] : [a];
    });
  }

  pods(projectId: string, deploymentId: string): Promise<Pod[]> {
    return podsOf(this.runtime, this.labels, projectId, deploymentId, this.usageOf);
  }

  /**
   * The workspace's network (`slipway-<installation>-ws-<slug>`), created when missing, with
   * Slipway's own container attached in `network` mode. A network of that name is used only when
   * its labels say it is this installation's network of this workspace; one left by a deleted
   * workspace of the same slug is removed first (when nothing uses it any more). The first time
   * in a process, this installation's running containers of the workspace that are not on it
   * (made by a version that named networks `ws-<slug>`) join it with their DNS names, so that
   * what is deployed next still reaches them.
   */
  async network(ws: { id: string; slug: string }): Promise<string> {
    const name = workspaceNetworkName(this.instanceId, ws.slug);
    await this.ensureNetwork(name, ws, true);
    if (this.mode === 'network' && this.self !== undefined && !this.joined.has(name)) {
      await this.runtime.connect(name, this.self);
      this.joined.add(name);
    }
    if (!this.moved.has(name)) {
      await this.joinOlder(name, ws.id);
      this.moved.add(name);
    }
    return name;
  }

  private async ensureNetwork(name: string, ws: { id: string; slug: string }, retry: boolean): Promise<void> {
    try {
      await this.runtime.ensureNetwork({ name, workspace: ws.id, labels: this.labels });
    } catch (err) {
      if (retry && err instanceof ForeignObjectError && err.labels[INSTANCE_LABEL] === this.instanceId) {
        // this installation's, of another workspace: a deleted one that had the slug
        const removed = await this.runtime.removeNetwork(name).then(() => true, () => false);
        if (removed) {
          this.forgetNetwork(name);
          this.log.info({ network: name }, 'removed the network of a deleted workspace of the same slug');
          await this.ensureNetwork(name, ws, false);
          return;
        }
      }
      // the address pool is full, or the name is taken: the deployment says so, instead of "internal error"
      throw err instanceof NetworkPoolFullError || err instanceof ForeignObjectError ? new DeployFailure(err.message) : err;
    }
  }

  /** This installation's running containers of the workspace that are not on `network` join it, with the DNS names they have elsewhere. */
  private async joinOlder(network: string, workspaceId: string): Promise<void> {
    let containers: ContainerInfo[];
    try {
      containers = await this.runtime.list({ owner: { workspace: workspaceId }, labels: this.labels });
    } catch (err) {
      // only older containers' reach depends on it: the deployment goes on, and the next process tries again
      this.log.warn({ err, network }, 'cannot list the workspace\'s containers to attach older ones to its network');
      return;
    }
    for (const c of containers) {
      if (c.state !== 'running' || Object.hasOwn(c.networks, network) || c.id === this.self) continue;
      const aliases = [...new Set(Object.values(c.aliases ?? {}).flat())];
      try {
        await this.runtime.connect(network, c.id, aliases);
        this.log.info({ container: c.name, network }, 'a container made before workspace networks were named by installation joined its workspace\'s network');
      } catch (err) {
        this.log.warn({ err, container: c.name, network }, 'a container could not join its workspace\'s network');
      }
    }
  }

  /** A removed network: a new workspace with the same slug gets a new one, which Slipway's container must join again. */
  forgetNetwork(name: string): void {
    this.joined.delete(name);
    this.moved.delete(name);
  }
}
