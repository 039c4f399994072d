import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import type Docker from 'dockerode';
import type {
  BuildResult,
  BuildSpec,
  ContainerInfo,
  ContainerSpec,
  ContainerState,
  ContainerUsage,
  EngineInfo,
  Feed,
  ImageInfo,
  Labels,
  ManagedNetwork,
  LogLine,
  LogOptions,
  LogStream,
  NetworkInfo,
  NetworkSpec,
  Purged,
  RestartPolicy,
  Runtime,
  RuntimeEvent,
  Selector,
  StopOptions,
  TaskResult,
  TaskSpec,
  VolumeSpec,
} from '../../../domain/runtime.js';
import { ForeignObjectError, HostPortTakenError, NetworkPoolFullError } from '../../../domain/runtime.js';
import { compareApiVersions, engineDate, engineMessage, MIN_API_VERSION, statusOf, stripAnsi } from './engine.js';
import { packBuildContext } from './build-context.js';
import { BuildKitLog, decodeStatus } from './buildkit.js';
import { Channel, LineSplitter } from './feed.js';
import { BRIDGE_PREFIX, bridgeName, guardIsolation, thisHost, type GuardHost, type IsolationGuard } from './isolation-guard.js';
import { isEmptySelector, LABEL, labelFilter, ownerOf, withOwner } from './labels.js';
import { DEFAULT_NETWORK_POOL, freeSubnet, poolCapacity, routedSubnets, type NetworkPool } from './network-pool.js';
import { scrubEnv } from './scrub.js';
import { runTask } from './task.js';
import { hasPrevious, usageFrom, type StatsSample } from './usage.js';

export interface DockerRuntimeOptions {
  /** a dockerode client; `new Docker()` follows DOCKER_HOST or /var/run/docker.sock */
  docker: Docker;
  /** where published ports listen (docs/decisions.md#upstream-addressing); default 127.0.0.1 */
  publishHost?: string;
  /**
   * `buildkit` (default): the Engine's BuildKit builder (API version=2, the context as the tar
   * body, no session), about twice as fast as `classic`, the legacy builder (one step per
   * instruction, each a container commit).
   */
  builder?: 'buildkit' | 'classic';
  /**
   * Where workspace networks get their subnets (`--network-pool`, `--network-size`); default
   * DEFAULT_NETWORK_POOL. null: the engine's own default address pools (about 30 networks).
   */
  networkPool?: NetworkPool | null;
  /**
   * The process limit (`--pids-limit`) of every container run() starts whose spec sets none;
   * default DEFAULT_PIDS_LIMIT. A fork past it fails inside the container.
   */
  pidsLimit?: number;
  /**
   * Where the isolation guard adds its firewall rules (isolation-guard.ts): this machine's iptables
   * by default; null leaves them out (the engine's own isolation alone).
   */
  isolationGuard?: GuardHost | null;
}

/** Processes (threads included) a container may run at once unless configured otherwise (`--pids-limit`). */
export const DEFAULT_PIDS_LIMIT = 512;

/** Subnet picks that another client of the engine took first, before giving up. */
const SUBNET_ATTEMPTS = 20;
/** lines of one container's log feed waiting for its reader before the engine's stream is paused */
const LOG_FEED_HIGH_WATER = 5000;

/** The IPv4 subnets of a network as the engine lists it. */
const subnetsOf = (n: Docker.NetworkInspectInfo): string[] =>
  (orNull(n.IPAM?.Config) ?? []).flatMap((c) => (typeof c.Subnet === 'string' && c.Subnet.includes('.') ? [c.Subnet] : []));

const CONTAINER_STATES: readonly ContainerState[] = ['created', 'running', 'restarting', 'paused', 'exited', 'dead', 'removing'];

/** One item of the build API's JSON stream. */
interface BuildMessage {
  /** `moby.buildkit.trace` (aux: base64 protobuf status) or `moby.image.id` (aux: {ID}) with BuildKit */
  id?: string;
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { ID?: string } | string;
}

/** One item of the events API's JSON stream (the fields used). */
interface EngineEvent {
  Type?: string;
  Action?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
  time?: number;
  timeNano?: number;
}

/** The engine sends null where the API's types promise a map or a list. */
const orNull = <T>(value: T): T | null => value;

/** Whether `labels` carry every entry of `wanted`. */
const carries = (labels: Labels, wanted: Labels): boolean => Object.entries(wanted).every(([k, v]) => labels[k] === v);

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The Runtime on one Docker Engine (API 1.41 and newer), through its HTTP API only. The API
 * version is not pinned: engines from 29 on refuse requests below 1.44, and check() refuses
 * engines below 1.41 instead.
 */
export class DockerRuntime implements Runtime {
  readonly driver = 'docker';
  private readonly docker: Docker;
  private readonly publishHost: string;
  private readonly builder: 'buildkit' | 'classic';
  /** ensureNetwork calls in flight, by name: concurrent callers share one creation */
  private readonly creatingNetworks = new Map<string, Promise<NetworkInfo>>();
  private readonly networkPool: NetworkPool | null;
  private readonly pidsLimit: number;
  /** subnet picks of this process, one at a time (other processes are caught by the engine's overlap check) */
  private picking: Promise<unknown> = Promise.resolve();
  private readonly guardHost: GuardHost | null;
  /** the isolation guard's rules, added before this process creates its first network */
  private guarded: Promise<IsolationGuard> | undefined;

  constructor(opts: DockerRuntimeOptions) {
    this.docker = opts.docker;
    this.publishHost = opts.publishHost ?? '127.0.0.1';
    this.builder = opts.builder ?? 'buildkit';
    this.networkPool = opts.networkPool === undefined ? DEFAULT_NETWORK_POOL : opts.networkPool;
    this.pidsLimit = opts.pidsLimit ?? DEFAULT_PIDS_LIMIT;
    this.guardHost = opts.isolationGuard === undefined ? thisHost() : opts.isolationGuard;
  }

  /**
   * The isolation guard (docs/security.md#network-isolation): its rules are checked and added once
   * per runtime, before its first network is created; `why` says what stopped it (the start-up logs it).
   */
  isolation(): Promise<IsolationGuard> {
    const host = this.guardHost;
    this.guarded ??= host === null ? Promise.resolve({ on: false, why: 'the isolation guard is off for this runtime' }) : guardIsolation(host);
    return this.guarded;
  }

  async check(): Promise<EngineInfo> {
    let v: Docker.DockerVersion;
    try {
      v = await this.docker.version();
    } catch (err) {
      throw new Error(
        `Docker Engine does not answer at ${this.address()}: ${engineMessage(err)}. Start dockerd (scripts/ensure-docker.sh does) or point DOCKER_HOST at a running engine.`,
        { cause: err },
      );
    }
    if (compareApiVersions(v.ApiVersion, MIN_API_VERSION) < 0) {
      throw new Error(
        `Docker Engine ${v.Version} at ${this.address()} speaks API ${v.ApiVersion}, but Slipway needs API ${MIN_API_VERSION} or newer (Docker Engine 20.10 or later): upgrade the engine.`,
      );
    }
    return { engine: 'Docker Engine', version: v.Version, apiVersion: v.ApiVersion, os: v.Os, arch: v.Arch };
  }

  ensureNetwork(spec: NetworkSpec): Promise<NetworkInfo> {
    const pending = this.creatingNetworks.get(spec.name);
    if (pending !== undefined) return pending.then((n) => ({ ...n, created: false }));
    const work = this.createNetwork(spec).finally(() => this.creatingNetworks.delete(spec.name));
    this.creatingNetworks.set(spec.name, work);
    return work;
  }

  private async createNetwork(spec: NetworkSpec): Promise<NetworkInfo> {
    const wanted = withOwner({ workspace: spec.workspace }, spec.labels);
    // an existing network is this spec's only when its labels say so: a same-named network of
    // another installation (or workspace) is never joined (docs/operations.md)
    const adopt = (n: Docker.NetworkInspectInfo): NetworkInfo => {
      const labels: Labels = orNull(n.Labels) ?? {};
      if (!carries(labels, wanted)) {
        throw new ForeignObjectError(
          `Network ${spec.name} exists on the engine but is not this installation's network of workspace ${spec.workspace} (its labels say otherwise); Slipway does not join it. Remove it (docker network rm ${spec.name}) once nothing uses it.`,
          labels,
        );
      }
      return { id: n.Id, name: spec.name, created: false, subnet: subnetsOf(n)[0] ?? null };
    };
    const existing = await this.networksNamed(spec.name);
    const first = existing[0];
    if (first !== undefined) return adopt(first);
    let created: { id: string; subnet: string | null };
    try {
      created = await this.createWithSubnet({
        Name: spec.name,
        Driver: 'bridge',
        CheckDuplicate: true,
        Labels: wanted,
      });
    } catch (err) {
      if (err instanceof NetworkPoolFullError) throw err;
      const again = (await this.networksNamed(spec.name))[0];
      if (statusOf(err) === 409 && again !== undefined) return adopt(again);
      throw new Error(`Cannot create network ${spec.name}: ${engineMessage(err)}`, { cause: err });
    }
    // The engine's duplicate check is best effort: when another process created the same name at
    // the same moment, the oldest network wins and ours goes, so that the name stays unambiguous.
    const all = await this.networksNamed(spec.name);
    const winner = all[0];
    if (winner !== undefined && winner.Id !== created.id) {
      await this.docker.getNetwork(created.id).remove().catch(() => undefined);
      return adopt(winner);
    }
    return { id: created.id, name: spec.name, created: true, subnet: created.subnet };
  }

  /**
   * Creates the network with the first subnet of the pool that no network of the engine uses
   * (read from the engine each time: a removed network's subnet is free again). Picks of this
   * process take turns; another process that takes the same subnet first makes the engine refuse
   * ours ("Pool overlaps"), and the next free one is tried.
   */
  private async createWithSubnet(options: Docker.NetworkCreateOptions): Promise<{ id: string; subnet: string | null }> {
    await this.isolation();
    // the bridge is named `slw-…`, which the isolation guard's rules know it by
    const named = (subnet: string | null): Docker.NetworkCreateOptions => ({
      ...options,
      Options: { ...options.Options, 'com.docker.network.bridge.name': bridgeName(subnet, () => randomBytes(6).toString('hex')) },
    });
    const pool = this.networkPool;
    if (pool === null) return { id: (await this.docker.createNetwork(named(null))).id, subnet: null };
    const pick = this.picking.then(async () => {
      const lost = new Set<string>();
      for (let attempt = 1; ; attempt++) {
        const used = (await this.docker.listNetworks()).flatMap(subnetsOf);
        // and the host's own subnets: a LAN, a VPN, a bridge the engine lost (not ours, which the network of that subnet takes over)
        const host = routedSubnets(await readFile('/proc/net/route', 'utf8').catch(() => ''), (name) => name.startsWith(BRIDGE_PREFIX));
        const subnet = freeSubnet(pool, [...used, ...host, ...lost]);
        if (subnet === null) {
          throw new NetworkPoolFullError(
            `Cannot create network ${options.Name}: every /${pool.size.toString()} subnet of the network pool ${pool.cidr} (${poolCapacity(pool).toString()} networks; --network-pool, --network-size) is in use. The operator can widen the pool; removing deleted workspaces' networks frees theirs.`,
          );
        }
        try {
          const net = await this.docker.createNetwork({ ...named(subnet), IPAM: { Driver: 'default', Config: [{ Subnet: subnet }] } });
          return { id: net.id, subnet };
        } catch (err) {
          // another process took the subnet first (its bridge, named by the subnet, may be found first)
          if (!/overlaps|same bridge name/i.test(engineMessage(err)) || attempt >= SUBNET_ATTEMPTS) throw err;
          lost.add(subnet);
        }
      }
    });
    this.picking = pick.catch(() => undefined);
    return pick;
  }

  async listNetworks(selector: Selector): Promise<ManagedNetwork[]> {
    const found = await this.docker.listNetworks({ filters: { label: labelFilter(selector) } });
    return found.map((n) => {
      const labels: Labels = n.Labels ?? {};
      return { id: n.Id, name: n.Name, subnet: subnetsOf(n)[0] ?? null, workspace: labels[LABEL.workspace] ?? null, labels, created: engineDate(n.Created) };
    });
  }

  async removeNetwork(idOrName: string): Promise<boolean> {
    try {
      return await ignoreMissing(this.docker.getNetwork(idOrName).remove());
    } catch (err) {
      throw new Error(`Cannot remove network ${idOrName}: ${engineMessage(err)}`, { cause: err });
    }
  }

  async connect(network: string, idOrName: string, aliases?: readonly string[]): Promise<void> {
    const net = (await this.networksNamed(network))[0];
    if (net === undefined) throw new Error(`Cannot attach ${idOrName} to network ${network}: there is no such network.`);
    const attached = await this.docker.getNetwork(net.Id).inspect() as { Containers?: Record<string, unknown> | null };
    const container = await this.docker.getContainer(idOrName).inspect().catch(() => null);
    if (container === null) throw new Error(`Cannot attach ${idOrName} to network ${network}: there is no such container.`);
    if (Object.hasOwn(attached.Containers ?? {}, container.Id)) return;
    try {
      await this.docker.getNetwork(net.Id).connect({ Container: container.Id, ...(aliases === undefined ? {} : { EndpointConfig: { Aliases: [...aliases] } }) });
    } catch (err) {
      // attached meanwhile by a concurrent call: the engine says so with 403
      if (statusOf(err) === 403 && /already exists/.test(engineMessage(err))) return;
      throw new Error(`Cannot attach ${idOrName} to network ${network}: ${engineMessage(err)}`, { cause: err });
    }
  }

  /** Networks with exactly this name (the engine's name filter matches substrings), oldest first. */
  private async networksNamed(name: string): Promise<Docker.NetworkInspectInfo[]> {
    const found = await this.docker.listNetworks({ filters: { name: [name] } });
    return found
      .filter((n) => n.Name === name)
      .sort((a, b) => a.Created.localeCompare(b.Created) || a.Id.localeCompare(b.Id));
  }

  async build(spec: BuildSpec): Promise<BuildResult> {
    if (spec.signal?.aborted === true) return { status: 'cancelled', error: 'The build was cancelled before it started.' };
    const signals = [spec.signal, spec.timeoutMs === undefined ? undefined : AbortSignal.timeout(spec.timeoutMs)];
    const signal = AbortSignal.any(signals.filter((s) => s !== undefined));
    const stopped = (): BuildResult | null => {
      if (spec.signal?.aborted === true) return { status: 'cancelled', error: 'The build was cancelled.' };
      if (signal.aborted) return { status: 'timed_out', error: `The build did not finish within ${String((spec.timeoutMs ?? 0) / 1000)} s.` };
      return null;
    };
    let imageId: string | undefined;
    let failure: string | undefined;
    // decided when the stream ends, so that a timer firing a moment later cannot turn a finished build into a timeout
    const end: { interrupted: BuildResult | null } = { interrupted: null };
    const dockerfile = spec.dockerfile ?? 'Dockerfile';
    const labels = withOwner(spec.owner, spec.labels);
    const buildkit = this.builder === 'buildkit';
    // BuildKit sets labels without build steps; the classic builder gets them in one instruction.
    const restoreDockerfile = buildkit ? null : await appendLabels(join(spec.contextDir, ...dockerfile.split('/')), labels);
    const onLine = (line: string) => spec.onLine?.(line);
    const buildkitLog = new BuildKitLog(onLine);
    try {
      // the directory as a tar (gzipped for a remote engine), without what its .dockerignore leaves out
      const context = await packBuildContext(spec.contextDir, { compress: !this.isLocal() });
      const query = {
        t: spec.tag,
        dockerfile,
        ...(restoreDockerfile === null ? { labels } : {}),
        ...(spec.buildArgs === undefined ? {} : { buildargs: { ...spec.buildArgs } }),
      };
      const stream = buildkit
        ? await this.dialBuild(context, { ...query, version: '2' }, signal)
        : await this.docker.buildImage(context, {
            ...query,
            rm: true,
            // remove intermediate containers of failed steps too, or every failed build leaves one
            forcerm: true,
            abortSignal: signal,
          });
      const lines = new LineSplitter(onLine);
      await new Promise<void>((resolve, reject) => {
        this.docker.modem.followProgress(
          stream,
          // A FAILED build ends like a good one (onFinished(null, output)): the failure is an
          // {error, errorDetail} item of the stream, caught below.
          (err) => {
            lines.flush();
            buildkitLog.flush();
            end.interrupted = stopped();
            if (err === null) resolve();
            else reject(err);
          },
          (item: unknown) => {
            if (!isRecord(item)) return;
            const m = item as BuildMessage;
            if (m.id === 'moby.buildkit.trace' && typeof m.aux === 'string') {
              try {
                buildkitLog.write(decodeStatus(m.aux));
              } catch {
                // a status this reader cannot decode only costs log lines
              }
              return;
            }
            if (typeof m.stream === 'string') lines.write(stripAnsi(m.stream));
            else if (typeof m.status === 'string') lines.write(`${m.status}\n`);
            if (typeof m.aux === 'object' && typeof m.aux.ID === 'string') imageId = m.aux.ID;
            if (typeof m.error === 'string' || typeof m.errorDetail?.message === 'string') {
              failure ??= m.errorDetail?.message ?? m.error;
            }
          },
        );
      });
    } catch (err) {
      return end.interrupted ?? stopped() ?? { status: 'failed', error: engineMessage(err) };
    } finally {
      await restoreDockerfile?.();
    }
    // followProgress may report an abort after the response began as a normal end of stream.
    if (end.interrupted !== null) return end.interrupted;
    if (failure !== undefined) return { status: 'failed', error: failure };
    const image = await this.inspectImage(spec.tag);
    if (image === null) return { status: 'failed', error: `The engine reported no error, but image ${spec.tag} does not exist.` };
    return { status: 'succeeded', imageId: imageId ?? image.id, tag: spec.tag };
  }

  /**
   * A BuildKit build without a session: dockerode's buildImage opens a gRPC session for
   * version 2, which a context sent as the request body does not need (and which costs time).
   */
  private dialBuild(context: NodeJS.ReadableStream, query: Record<string, unknown>, signal: AbortSignal): Promise<NodeJS.ReadableStream> {
    return new Promise((resolve, reject) => {
      this.docker.modem.dial(
        { path: '/build?', method: 'POST', file: context, options: query, abortSignal: signal, isStream: true, statusCodes: { 200: true, 500: 'server error' } },
        (err: unknown, stream: unknown) => {
          if (err !== null && err !== undefined) reject(err instanceof Error ? err : new Error(engineMessage(err)));
          else resolve(stream as NodeJS.ReadableStream);
        },
      );
    });
  }

  async tagImage(source: string, target: string): Promise<void> {
    const { repo, tag } = splitReference(target);
    try {
      await this.docker.getImage(source).tag({ repo, tag });
    } catch (err) {
      throw new Error(`Cannot tag image ${source} as ${target}: ${engineMessage(err)}`, { cause: err });
    }
  }

  async inspectImage(ref: string): Promise<ImageInfo | null> {
    let i: Docker.ImageInspectInfo;
    try {
      i = await this.docker.getImage(ref).inspect();
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
    return {
      id: i.Id,
      tags: orNull(i.RepoTags) ?? [],
      labels: orNull<Labels>(i.Config.Labels) ?? {},
      createdAt: new Date(i.Created),
      sizeBytes: i.Size,
    };
  }

  async listImages(selector: Selector): Promise<ImageInfo[]> {
    const found = await this.docker.listImages({ filters: { label: labelFilter(selector) } });
    return found.map((i) => ({
      id: i.Id,
      tags: (orNull(i.RepoTags) ?? []).filter((t) => t !== '<none>:<none>'),
      labels: orNull<Labels>(i.Labels) ?? {},
      createdAt: new Date(i.Created * 1000),
      sizeBytes: i.Size,
    }));
  }

  async removeImage(ref: string): Promise<boolean> {
    try {
      await this.docker.getImage(ref).remove();
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw new Error(`Cannot remove image ${ref}: ${engineMessage(err)}`, { cause: err });
    }
  }

  async pull(ref: string, opts: { timeoutMs?: number } = {}): Promise<void> {
    const controller = new AbortController();
    const timer = setTimeout(() => { controller.abort(); }, opts.timeoutMs ?? 300_000);
    try {
      const stream = await this.docker.pull(ref, { abortSignal: controller.signal });
      await new Promise<void>((resolve, reject) => {
        this.docker.modem.followProgress(stream, (err: Error | null, output: unknown[]) => {
          if (err !== null) {
            reject(err);
            return;
          }
          // a failed pull still "finishes": the failure is an {error} item
          const failed = output.find((o): o is { error: string } => isRecord(o) && typeof o['error'] === 'string');
          if (failed === undefined) resolve();
          else reject(new Error(failed.error));
        });
      });
    } catch (err) {
      const why = controller.signal.aborted ? 'timed out' : engineMessage(err);
      throw new Error(`Cannot pull image ${ref}: ${why}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  async ensureVolume(spec: VolumeSpec): Promise<void> {
    const wanted = withOwner({ workspace: spec.workspace }, spec.labels);
    let labels: Labels;
    try {
      // creating an existing volume is a no-op on the engine (its labels stay as they were)
      await this.docker.createVolume({ Name: spec.name, Labels: wanted });
      labels = orNull((await this.docker.getVolume(spec.name).inspect()).Labels) ?? {};
    } catch (err) {
      throw new Error(`Cannot create volume ${spec.name}: ${engineMessage(err)}`, { cause: err });
    }
    // a volume of that name that another installation (or workspace, or anyone) made is not used
    if (!carries(labels, wanted)) {
      throw new ForeignObjectError(`Volume ${spec.name} exists on the engine but is not this installation's (its labels say otherwise); Slipway does not use it.`, labels);
    }
  }

  async removeVolume(name: string): Promise<boolean> {
    try {
      await this.docker.getVolume(name).remove();
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw new Error(`Cannot remove volume ${name}: ${engineMessage(err)}`, { cause: err });
    }
  }

  async listVolumes(selector: { labels: Labels }): Promise<{ name: string; labels: Labels }[]> {
    const { Volumes: volumes } = await this.docker.listVolumes({ filters: { label: Object.entries(selector.labels).map(([k, v]) => `${k}=${v}`) } });
    return (orNull(volumes) ?? []).map((v) => ({ name: v.Name, labels: { ...(orNull(v.Labels) ?? {}) } }));
  }

  async volumeSize(name: string): Promise<number | null> {
    // the engine measures volumes only in its disk usage report (`docker system df -v`)
    const df = (await this.docker.df()) as { Volumes?: { Name: string; UsageData?: { Size?: number } | null }[] | null };
    const size = (df.Volumes ?? []).find((v) => v.Name === name)?.UsageData?.Size;
    return size === undefined || size < 0 ? null : size;
  }

  async run(spec: ContainerSpec): Promise<ContainerInfo> {
    const env = Object.entries(spec.env).map(([key, value]) => {
      // "A=B=C" would silently become A="B=C": refuse names the engine cannot carry.
      if (key === '' || key.includes('=') || key.includes('\0')) throw new Error(`Environment variable name ${JSON.stringify(key)} cannot be passed to a container.`);
      return `${key}=${value}`;
    });
    const labels = withOwner(spec.owner, spec.labels);
    const portKey = spec.port === undefined ? undefined : `${String(spec.port)}/tcp`;
    if (spec.port !== undefined) labels[LABEL.port] = String(spec.port);
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        name: spec.name,
        Image: spec.image,
        ...(spec.command === undefined ? {} : { Cmd: [...spec.command] }),
        Env: env,
        Labels: labels,
        Tty: false,
        ...(portKey === undefined ? {} : { ExposedPorts: { [portKey]: {} } }),
        HostConfig: {
          NanoCpus: Math.round(spec.cpu * 1e9),
          Memory: spec.memoryBytes,
          // no swap on top of the limit: an app over its memory is killed, as the limit says
          MemorySwap: spec.memoryBytes,
          NetworkMode: spec.network,
          RestartPolicy: restartPolicy(spec.restart),
          Init: spec.init === true,
          // a fork bomb stops at the limit instead of taking the host's process table
          PidsLimit: spec.pidsLimit ?? this.pidsLimit,
          // an empty HostPort asks the engine for an ephemeral port
          ...(portKey === undefined || spec.publish === false ? {} : { PortBindings: { [portKey]: [{ HostIp: spec.publishAddress ?? this.publishHost, HostPort: spec.hostPort === undefined ? '' : String(spec.hostPort) }] } }),
          ...(spec.mounts === undefined || spec.mounts.length === 0 ? {} : { Mounts: spec.mounts.map((m) => ({ Type: 'volume' as const, Source: m.volume, Target: m.path })) }),
        },
        NetworkingConfig: { EndpointsConfig: { [spec.network]: { Aliases: [...(spec.aliases ?? [])] } } },
      });
    } catch (err) {
      // The engine's message may quote the environment (runc quotes a refused `KEY=value`): it is
      // scrubbed, and the engine's error is not kept as the cause, which loggers print in full.
      throw new Error(`Cannot create container ${spec.name} from ${spec.image}: ${scrubEnv(engineMessage(err), spec.env)}`);
    }
    try {
      await container.start();
    } catch (err) {
      await container.remove({ force: true, v: true }).catch(() => undefined);
      const message = `Cannot start container ${spec.name}: ${scrubEnv(engineMessage(err), spec.env)}`;
      // Docker's port allocator, or docker-proxy's bind
      if (spec.hostPort !== undefined && /port is already allocated|address already in use/i.test(message)) throw new HostPortTakenError(spec.hostPort, message);
      throw new Error(message);
    }
    const info = await this.inspect(container.id);
    if (info === null) throw new Error(`Container ${spec.name} disappeared right after it started.`);
    return info;
  }

  task(spec: TaskSpec): Promise<TaskResult> {
    return runTask(this.docker, spec, this.pidsLimit);
  }

  async inspect(idOrName: string): Promise<ContainerInfo | null> {
    let i: Docker.ContainerInspectInfo;
    try {
      i = await this.docker.getContainer(idOrName).inspect();
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
    return this.toInfo(i);
  }

  private toInfo(i: Docker.ContainerInspectInfo): ContainerInfo {
    const labels = orNull<Labels>(i.Config.Labels) ?? {};
    const portLabel = labels[LABEL.port];
    const port = portLabel === undefined ? null : Number(portLabel);
    const ports = orNull<Record<string, { HostIp: string; HostPort: string }[] | null | undefined>>(i.NetworkSettings.Ports) ?? {};
    const bindings = port === null ? [] : (ports[`${String(port)}/tcp`] ?? []);
    const binding = bindings.find((b) => b.HostIp === this.publishHost) ?? bindings[0];
    const networks = orNull<Record<string, { IPAddress: string; Aliases?: string[] | null } | undefined>>(i.NetworkSettings.Networks) ?? {};
    const network = networks[i.HostConfig.NetworkMode ?? ''] ?? Object.values(networks)[0];
    const finishedAt = engineDate(i.State.FinishedAt);
    const status = i.State.Status as ContainerState;
    return {
      id: i.Id,
      name: i.Name.replace(/^\//, ''),
      image: i.Config.Image,
      state: CONTAINER_STATES.includes(status) ? status : 'dead',
      restartCount: i.RestartCount,
      startedAt: engineDate(i.State.StartedAt),
      finishedAt,
      exitCode: finishedAt === null ? null : i.State.ExitCode,
      oomKilled: i.State.OOMKilled,
      pid: i.State.Pid > 0 ? i.State.Pid : null,
      port,
      hostPort: binding === undefined || binding.HostPort === '' ? null : Number(binding.HostPort),
      networkAddress: network === undefined || network.IPAddress === '' ? null : network.IPAddress,
      networks: Object.fromEntries(Object.entries(networks).flatMap(([name, n]) => (n === undefined || n.IPAddress === '' ? [] : [[name, n.IPAddress]]))),
      aliases: Object.fromEntries(Object.entries(networks).map(([name, n]) => [name, (orNull(n?.Aliases) ?? []).filter((a) => !i.Id.startsWith(a))])),
      pidsLimit: (i.HostConfig.PidsLimit ?? 0) > 0 ? (i.HostConfig.PidsLimit ?? null) : null,
      cpu: (i.HostConfig.NanoCpus ?? 0) > 0 ? (i.HostConfig.NanoCpus ?? 0) / 1e9 : null,
      memoryBytes: (i.HostConfig.Memory ?? 0) > 0 ? (i.HostConfig.Memory ?? 0) : null,
      owner: ownerOf(labels),
      labels,
    };
  }

  async list(selector: Selector): Promise<ContainerInfo[]> {
    const found = await this.docker.listContainers({ all: true, filters: { label: labelFilter(selector) } });
    // The list answer has neither restart counts nor start times: inspect each one.
    const infos = await Promise.all(found.map((c) => this.inspect(c.Id)));
    return infos.filter((i) => i !== null).sort((a, b) => a.name.localeCompare(b.name));
  }

  async runningIds(selector: Selector): Promise<string[]> {
    const found = await this.docker.listContainers({ all: false, filters: { label: labelFilter(selector) } });
    return found.map((c) => c.Id);
  }

  async stop(idOrName: string, opts: StopOptions = {}): Promise<void> {
    try {
      await this.docker.getContainer(idOrName).stop({ t: opts.graceSeconds ?? 10 });
    } catch (err) {
      const status = statusOf(err);
      // 304: already stopped; 404: gone — both are what was asked for
      if (status === 304 || status === 404) return;
      throw new Error(`Cannot stop container ${idOrName}: ${engineMessage(err)}`, { cause: err });
    }
  }

  async remove(idOrName: string): Promise<boolean> {
    const container = this.docker.getContainer(idOrName);
    try {
      await container.remove({ force: true, v: true });
      return true;
    } catch (err) {
      const status = statusOf(err);
      if (status === 404) return false;
      if (status === 409 && /already in progress/.test(engineMessage(err))) {
        await container.wait({ condition: 'removed' }).catch(() => undefined);
        return true;
      }
      throw new Error(`Cannot remove container ${idOrName}: ${engineMessage(err)}`, { cause: err });
    }
  }

  async stats(idOrName: string): Promise<ContainerUsage | null> {
    const info = await this.inspect(idOrName);
    if (info?.state !== 'running') return null;
    const container = this.docker.getContainer(idOrName);
    const sample = async (): Promise<StatsSample | null> => {
      try {
        return toSample(await container.stats({ stream: false }));
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
    };
    const first = await sample();
    if (first === null) return null;
    // Engine 20.10 answers stream:false after two collection cycles, with precpu filled; where it
    // comes back empty, a second sample gives the CPU delta.
    if (hasPrevious(first)) return usageFrom(null, first);
    const second = await sample();
    return second === null ? null : usageFrom(first, second);
  }

  async logs(idOrName: string, opts: LogOptions): Promise<Feed<LogLine>> {
    const container = this.docker.getContainer(idOrName);
    const controller = new AbortController();
    const query = {
      stdout: true,
      stderr: true,
      timestamps: true,
      ...(opts.since === undefined ? {} : { since: sinceParam(opts.since) }),
      ...(opts.tail === undefined ? {} : { tail: opts.tail }),
      abortSignal: controller.signal,
    };
    let source: NodeJS.ReadableStream;
    try {
      source = opts.follow
        ? await container.logs({ ...query, follow: true })
        : Readable.from([await container.logs({ ...query, follow: false })]);
    } catch (err) {
      throw new Error(`Cannot read the logs of container ${idOrName}: ${engineMessage(err)}`, { cause: err });
    }
    // a reader that is behind (a log store catching up) pauses the engine's stream: the engine keeps the lines, not this process
    const feed = new Channel<LogLine>(() => { controller.abort(); }, {
      highWater: LOG_FEED_HIGH_WATER,
      onPressure: (full) => { if (full) source.pause(); else source.resume(); },
    });
    const sink = (stream: LogStream): { writable: Writable; splitter: LineSplitter } => {
      const splitter = new LineSplitter((line) => {
        const parsed = parseLogLine(stream, line);
        if (parsed !== null) feed.push(parsed);
      });
      // _write runs synchronously inside write(), so lines keep the order the engine sent them in.
      const writable = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          splitter.write(chunk);
          callback();
        },
      });
      return { writable, splitter };
    };
    const out = sink('stdout');
    const err = sink('stderr');
    // Containers Slipway runs have no TTY, so the stream is multiplexed (8-byte frame headers).
    this.docker.modem.demuxStream(source, out.writable, err.writable);
    const finish = (error?: unknown): void => {
      out.splitter.flush();
      err.splitter.flush();
      feed.end(controller.signal.aborted ? undefined : error);
    };
    source.on('end', () => { finish(); });
    source.on('close', () => { finish(); });
    source.on('error', (e: unknown) => { finish(e); });
    return feed;
  }

  async events(selector: Selector): Promise<Feed<RuntimeEvent>> {
    const controller = new AbortController();
    let source: NodeJS.ReadableStream;
    try {
      // The engine sends the response headers as soon as the subscription is registered, so
      // events that happen after this resolves are delivered.
      source = await this.docker.getEvents({
        filters: { type: ['container'], event: ['start', 'die', 'oom'], label: labelFilter(selector) },
        abortSignal: controller.signal,
      });
    } catch (err) {
      throw new Error(`Cannot subscribe to engine events: ${engineMessage(err)}`, { cause: err });
    }
    const feed = new Channel<RuntimeEvent>(() => { controller.abort(); });
    // NDJSON: one event per line, and a chunk may end in the middle of one.
    const lines = new LineSplitter((line) => {
      if (line.trim() === '') return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        return;
      }
      const event = toRuntimeEvent(parsed);
      if (event !== null) feed.push(event);
    });
    source.on('data', (chunk: Buffer) => { lines.write(chunk); });
    const finish = (error?: unknown): void => {
      lines.flush();
      feed.end(controller.signal.aborted ? undefined : error);
    };
    source.on('end', () => { finish(); });
    source.on('close', () => { finish(); });
    source.on('error', (e: unknown) => { finish(e); });
    return feed;
  }

  async purge(selector: Selector): Promise<Purged> {
    if (isEmptySelector(selector)) throw new Error('purge needs a selector: it refuses to remove everything Slipway manages.');
    const label = labelFilter(selector);
    const purged: Purged = { containers: 0, networks: 0, volumes: 0, images: 0 };

    const containers = await this.docker.listContainers({ all: true, filters: { label } });
    const removed = await Promise.all(containers.map((c) => this.remove(c.Id)));
    purged.containers = removed.filter(Boolean).length;

    // a few at a time: an installation may hold hundreds of workspace networks
    const networks = await this.docker.listNetworks({ filters: { label } });
    const removeNetwork = async (n: Docker.NetworkInspectInfo): Promise<void> => {
      try {
        if (await ignoreMissing(this.docker.getNetwork(n.Id).remove())) purged.networks++;
      } catch (err) {
        // still used by containers the selector does not match (another installation's, on a
        // `ws-<slug>` network that versions before networks were named by installation shared): left for whoever removes those
        if (statusOf(err) !== 403) throw err;
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, networks.length) }, async () => {
      for (let n = networks.shift(); n !== undefined; n = networks.shift()) await removeNetwork(n);
    }));
    const { Volumes: volumes } = await this.docker.listVolumes({ filters: { label } });
    for (const v of orNull(volumes) ?? []) {
      if (await ignoreMissing(this.docker.getVolume(v.Name).remove())) purged.volumes++;
    }
    purged.images = await this.purgeImages(label);
    return purged;
  }

  /**
   * Untags and removes matching images, newest first, in a few passes: a parent cannot go while
   * a child image is still there. An image some container still uses is left alone (no force).
   */
  private async purgeImages(label: string[]): Promise<number> {
    let count = 0;
    for (let pass = 0; pass < 5; pass++) {
      const images = (await this.docker.listImages({ filters: { label } })).sort((a, b) => b.Created - a.Created);
      if (images.length === 0) break;
      let progress = false;
      for (const image of images) {
        const tags = (image.RepoTags ?? []).filter((t) => t !== '<none>:<none>');
        try {
          for (const tag of tags) await ignoreMissing(this.docker.getImage(tag).remove());
          if (tags.length === 0) await ignoreMissing(this.docker.getImage(image.Id).remove());
          count++;
          progress = true;
        } catch (err) {
          if (statusOf(err) !== 409) throw err;
        }
      }
      if (!progress) break;
    }
    return count;
  }

  /** Whether the engine is reached through a local socket (not across a network). */
  private isLocal(): boolean {
    return typeof (this.docker.modem as { socketPath?: unknown }).socketPath === 'string';
  }

  private address(): string {
    const modem = this.docker.modem as { socketPath?: unknown; host?: unknown; port?: unknown };
    if (typeof modem.socketPath === 'string') return modem.socketPath;
    return `${String(modem.host)}:${String(modem.port)}`;
  }
}

function restartPolicy(p: RestartPolicy): Docker.HostRestartPolicy {
  switch (p.kind) {
    case 'never':
      return { Name: 'no' };
    case 'on-failure':
      return { Name: 'on-failure', MaximumRetryCount: p.maxRetries };
    case 'always':
      return { Name: 'always' };
    case 'unless-stopped':
      return { Name: 'unless-stopped' };
  }
}

/** "registry:5000/app:v1" → repo "registry:5000/app", tag "v1"; no tag means "latest". */
function splitReference(ref: string): { repo: string; tag: string } {
  const colon = ref.lastIndexOf(':');
  if (colon > ref.lastIndexOf('/')) return { repo: ref.slice(0, colon), tag: ref.slice(colon + 1) };
  return { repo: ref, tag: 'latest' };
}

/** Resolves true when the removal happened, false when the thing was already gone. */
/** Label keys and values that a LABEL instruction carries as they are, in double quotes. */
const PLAIN_LABEL = /^[A-Za-z0-9._:/@+-]*$/;

/**
 * The classic builder turns each label of the build API into a step of its own (about 70 ms
 * each): append them to the Dockerfile as one LABEL instruction instead, for the time of the
 * build. Returns what puts the file back, or null when the labels must go through the API
 * (unusual characters, or a Dockerfile that cannot be read, which the build then reports).
 */
async function appendLabels(path: string, labels: Record<string, string>): Promise<(() => Promise<void>) | null> {
  const entries = Object.entries(labels);
  if (entries.some(([k, v]) => k === '' || !PLAIN_LABEL.test(k) || !PLAIN_LABEL.test(v))) return null;
  let original: Buffer;
  try {
    original = await readFile(path);
  } catch {
    return null;
  }
  // a last line that continues (a backslash, or a backtick under `# escape=`) would swallow the instruction
  if (/[\\`]\s*$/.test(original.toString('utf8'))) return null;
  const newline = original.length === 0 || original.at(-1) === 0x0a ? '' : '\n';
  await writeFile(path, Buffer.concat([original, Buffer.from(`${newline}LABEL ${entries.map(([k, v]) => `"${k}"="${v}"`).join(' ')}\n`)]));
  return () => writeFile(path, original);
}

async function ignoreMissing(removal: Promise<unknown>): Promise<boolean> {
  try {
    await removal;
    return true;
  } catch (err) {
    if (statusOf(err) === 404) return false;
    throw err;
  }
}

/** With `timestamps`, every line starts with the engine's RFC 3339 (nanosecond) time and a space. */
function parseLogLine(stream: LogStream, line: string): LogLine | null {
  const space = line.indexOf(' ');
  const timestamp = space < 0 ? line : line.slice(0, space);
  const at = new Date(timestamp);
  if (Number.isNaN(at.getTime())) return null;
  return { stream, at, timestamp, message: space < 0 ? '' : joinPartials(line.slice(space + 1)) };
}

/** The engine keeps a line longer than 16 KiB as 16 KiB parts, and prints each part's own time stamp in front of it. */
const PART_BYTES = 16 * 1024;
const PART_STAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z $/;

function joinPartials(message: string): string {
  if (message.length <= PART_BYTES) return message;
  const bytes = Buffer.from(message, 'utf8');
  if (bytes.length <= PART_BYTES) return message;
  const parts: Buffer[] = [];
  let from = 0;
  let at = PART_BYTES;
  while (at < bytes.length) {
    const stamp = bytes.subarray(at, at + 40).toString('latin1');
    const space = stamp.indexOf(' ');
    if (space < 0 || !PART_STAMP.test(stamp.slice(0, space + 1))) break;
    parts.push(bytes.subarray(from, at));
    from = at + space + 1;
    at = from + PART_BYTES;
  }
  if (parts.length === 0) return message;
  parts.push(bytes.subarray(from));
  return Buffer.concat(parts).toString('utf8');
}

/** The engine's `since`: seconds with up to nine decimals; a line's own stamp gives its nanoseconds exactly. */
function sinceParam(since: Date | string): string {
  if (since instanceof Date) return (since.getTime() / 1000).toFixed(3);
  const ms = Date.parse(since);
  if (Number.isNaN(ms)) throw new Error(`Not a log time stamp: ${since}`);
  const fraction = /\.(\d{1,9})/.exec(since)?.[1] ?? '';
  return `${Math.floor(ms / 1000).toString()}.${fraction.padEnd(9, '0')}`;
}

function toRuntimeEvent(raw: unknown): RuntimeEvent | null {
  if (!isRecord(raw)) return null;
  const e = raw as EngineEvent;
  const id = e.Actor?.ID;
  if (e.Type !== 'container' || id === undefined) return null;
  const { name = '', exitCode, image: _image, ...labels } = e.Actor?.Attributes ?? {};
  const at = new Date(e.timeNano === undefined ? (e.time ?? 0) * 1000 : Math.floor(e.timeNano / 1e6));
  const common = { containerId: id, name, at, owner: ownerOf(labels), labels };
  if (e.Action === 'start') return { type: 'start', ...common };
  if (e.Action === 'die') return { type: 'die', ...common, exitCode: Number(exitCode ?? -1) };
  if (e.Action === 'oom') return { type: 'oom', ...common };
  return null;
}

function toSample(s: Docker.ContainerStats): StatsSample {
  const stats = s.memory_stats.stats as Partial<Record<string, number>> | undefined;
  return {
    read: s.read,
    preread: s.preread,
    cpu_stats: s.cpu_stats,
    precpu_stats: s.precpu_stats,
    memory_stats: {
      ...(typeof s.memory_stats.usage === 'number' ? { usage: s.memory_stats.usage } : {}),
      ...(typeof s.memory_stats.limit === 'number' ? { limit: s.memory_stats.limit } : {}),
      ...(stats === undefined ? {} : { stats }),
    },
  };
}
