/**
 * The container runtime port: everything the orchestrator asks of a container engine. The Docker
 * Engine driver implements it now (src/adapters/runtime/docker); Swarm and Kubernetes drivers later pass
 * the same conformance suite (test/medium/runtime.conformance.test.ts).
 *
 * Expected outcomes are values: a failed, timed-out or cancelled build is a BuildResult, a
 * container or image that is gone is `null` (or `false` from a removal). An exception means the
 * engine could not do what was asked (unreachable, refused the request).
 */

/** Labels as the engine stores them. */
export type Labels = Readonly<Record<string, string>>;

/** The Slipway records a container or image belongs to (ids); the driver stores them as labels. */
export interface Owner {
  workspace: string;
  project: string;
  deployment: string;
}

/**
 * Picks resources that carry every given label. `owner` fields are matched through the driver's
 * own label keys; only resources Slipway manages are ever matched.
 */
export interface Selector {
  owner?: Partial<Owner>;
  labels?: Labels;
}

export interface EngineInfo {
  /** e.g. "Docker Engine" */
  engine: string;
  version: string;
  /** the newest API version the engine speaks, e.g. "1.41" */
  apiVersion: string;
  os: string;
  arch: string;
}

export interface NetworkSpec {
  /** `slipway-<installation>-ws-<slug>` (docs/operations.md#several-installations-on-one-engine) */
  name: string;
  /** the owning workspace's id */
  workspace: string;
  labels?: Labels;
}

export interface NetworkInfo {
  id: string;
  name: string;
  /** false when the network already existed */
  created: boolean;
  /** its IPv4 subnet, e.g. "10.213.4.0/24"; null when the engine reports none */
  subnet: string | null;
}

/**
 * ensureNetwork() when the driver's address pool (`--network-pool`) has no free subnet left: the
 * message says so, for the deployment's error and the operator.
 */
export class NetworkPoolFullError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NetworkPoolFullError';
  }
}

/**
 * ensureNetwork() or ensureVolume() found an object of that name whose labels do not say it is
 * this spec's (another installation's, another workspace's, or not Slipway's at all): it is
 * neither joined nor used. `labels` are the ones it has.
 */
export class ForeignObjectError extends Error {
  constructor(
    message: string,
    readonly labels: Labels,
  ) {
    super(message);
    this.name = 'ForeignObjectError';
  }
}

/** A managed network as listed. */
export interface ManagedNetwork {
  id: string;
  name: string;
  /** its IPv4 subnet; null when the engine reports none */
  subnet: string | null;
  /** the owning workspace's id (its label) */
  workspace: string | null;
  labels: Labels;
  /** when the engine made it, by the engine's clock; null when it does not say */
  created: Date | null;
}

export interface BuildSpec {
  /** the directory sent as the build context */
  contextDir: string;
  /** the Dockerfile's path inside contextDir, "/"-separated; default "Dockerfile" */
  dockerfile?: string;
  /** the reference the image gets, `repository:tag` */
  tag: string;
  owner?: Owner;
  labels?: Labels;
  buildArgs?: Readonly<Record<string, string>>;
  /** called once per output line, in the engine's order, without the line break */
  onLine?: (line: string) => void;
  /** the build is stopped and reported `timed_out` after this long */
  timeoutMs?: number;
  /** aborting stops the build, reported `cancelled` */
  signal?: AbortSignal;
}

export type BuildResult =
  | { status: 'succeeded'; imageId: string; tag: string }
  /** `error` is the engine's own message, e.g. "The command '/bin/sh -c exit 3' returned a non-zero code: 3" */
  | { status: 'failed'; error: string }
  | { status: 'timed_out'; error: string }
  | { status: 'cancelled'; error: string };

export interface ImageInfo {
  id: string;
  tags: string[];
  labels: Labels;
  createdAt: Date;
  sizeBytes: number;
}

export type RestartPolicy =
  | { kind: 'never' }
  | { kind: 'on-failure'; maxRetries: number }
  | { kind: 'always' }
  /** like `always`, but a container Slipway stopped stays stopped when the engine restarts */
  | { kind: 'unless-stopped' };

/** run() with a `hostPort` another process or container holds: the container was removed, and may be run again on another port. */
export class HostPortTakenError extends Error {
  constructor(
    readonly hostPort: number,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'HostPortTakenError';
  }
}

/** A named volume mounted into a container. */
export interface Mount {
  volume: string;
  /** absolute path inside the container */
  path: string;
}

export interface VolumeSpec {
  /** unique on the engine */
  name: string;
  /** the owning workspace's id */
  workspace: string;
  labels?: Labels;
}

export interface ContainerSpec {
  /** unique on the engine */
  name: string;
  /** an image present on the engine: run() never pulls (pull() does, where a registry is reachable) */
  image: string;
  /** replaces the image's command; an argument vector, never a shell string */
  command?: readonly string[];
  env: Readonly<Record<string, string>>;
  /** an app's container names its deployment; a database's only its workspace (its own label says which database) */
  owner: Owner | { workspace: string };
  /** named volumes (created by ensureVolume) */
  mounts?: readonly Mount[];
  /** where a published port listens on the host: the driver's own address (loopback) unless given, e.g. "0.0.0.0" */
  publishAddress?: string;
  labels?: Labels;
  /** vCPU, e.g. 0.5 */
  cpu: number;
  memoryBytes: number;
  /** the workspace network to attach to */
  network: string;
  /** extra DNS names on that network */
  aliases?: readonly string[];
  /** the port the app listens on; published on 127.0.0.1 with an ephemeral host port unless `publish` is false */
  port?: number;
  /** false: the port is reached on the container's network address only (`--upstream-mode network`); default true */
  publish?: boolean;
  /**
   * The host port to publish on, instead of one the engine picks: a caller that knows the
   * address before the container starts can prepare its route meanwhile. Starting fails with
   * HostPortTakenError when the port is taken; the container is then removed.
   */
  hostPort?: number;
  restart: RestartPolicy;
  /** the most processes (and threads) the container may run at once; forks past it fail (a fork bomb stops there) */
  pidsLimit?: number;
  /**
   * Run a minimal init as PID 1 that forwards signals and reaps zombies: an app that never set
   * a SIGTERM handler (PID 1 ignores it by default) then stops at once instead of being killed
   * after the grace period.
   */
  init?: boolean;
}

/**
 * A one-off container whose standard streams are the work (a backup tool's dump on stdout, a
 * restore's input on stdin): it runs to its end and is removed. Its output is never collected
 * as logs, and it carries no project or database label, so neither billing nor the reconcilers
 * take it for an app or a server.
 */
export interface TaskSpec {
  /** unique on the engine */
  name: string;
  image: string;
  /** an argument vector; a secret never goes here (nor in env): give it on stdin */
  command: readonly string[];
  env?: Readonly<Record<string, string>>;
  owner: { workspace: string };
  labels?: Labels;
  /**
   * the workspace network to attach to, or `host` (only for Slipway's own tools against a server
   * the host reaches, such as a shared database server's backups); none: no network at all
   */
  network?: string;
  mounts?: readonly (Mount & { readOnly?: boolean })[];
  cpu: number;
  memoryBytes: number;
  /** written to the task's standard input, which is then closed; absent: no input */
  stdin?: NodeJS.ReadableStream | undefined;
  /** receives the task's standard output, with backpressure; absent: it is discarded */
  stdout?: NodeJS.WritableStream | undefined;
  /** the task is killed past it (its result says so) */
  timeoutMs: number;
  /** aborting kills the task */
  signal?: AbortSignal;
}

export interface TaskResult {
  exitCode: number;
  /** the end of its standard error (at most 8 KiB), for the reason of a failure */
  stderr: string;
  oomKilled: boolean;
  timedOut: boolean;
}

export type ContainerState = 'created' | 'running' | 'restarting' | 'paused' | 'exited' | 'dead' | 'removing';

export interface ContainerInfo {
  id: string;
  name: string;
  /** the image reference it was created from */
  image: string;
  state: ContainerState;
  /** restarts done by the engine's restart policy */
  restartCount: number;
  /** the last (re)start; null when never started */
  startedAt: Date | null;
  /** the last exit; null while it has never exited */
  finishedAt: Date | null;
  exitCode: number | null;
  oomKilled: boolean;
  /** its main process on the engine's host; null while it does not run */
  pid: number | null;
  /** the app port inside the container, and its published port on 127.0.0.1 (null when not published or not running) */
  port: number | null;
  hostPort: number | null;
  /** the container's address on its network (for `--upstream-mode network`) */
  networkAddress: string | null;
  /** its address on every network it is attached to, by network name */
  networks: Readonly<Record<string, string>>;
  /** the DNS names it was given on each network it is attached to, by network name */
  aliases?: Readonly<Record<string, readonly string[]>>;
  /** its process limit; null when unlimited */
  pidsLimit?: number | null;
  /** limits as the engine applies them: vCPU and bytes, null when unlimited */
  cpu: number | null;
  memoryBytes: number | null;
  owner: Owner | null;
  labels: Labels;
}

export interface StopOptions {
  /** seconds between the stop signal and the kill; default 10 */
  graceSeconds?: number;
}

/** Resource use of a running container, measured by the engine. */
export interface ContainerUsage {
  /** CPU used over the sampling window, in millicores (1000 = one core) */
  cpuMillicores: number;
  /** memory in use (page cache that can be reclaimed excluded, as `docker stats` shows it) */
  memoryBytes: number;
  /** the memory limit the engine enforces (the host's memory when unlimited) */
  memoryLimitBytes: number;
}

/** A container's use as the resource sampler last saw it; null when it has no recent sample. */
export type UsageOf = (containerId: string) => ContainerUsage | null;

export type LogStream = 'stdout' | 'stderr';

export interface LogLine {
  stream: LogStream;
  /** when the engine received the line */
  at: Date;
  /**
   * The same, exactly as the engine stamped it (RFC 3339 with nanoseconds on Docker): lines a
   * millisecond apart keep their order, and `since` takes it back to resume at this very line.
   */
  timestamp: string;
  message: string;
}

export interface LogOptions {
  /** keep the feed open for new lines until the container stops or the feed is closed */
  follow: boolean;
  /** from this time on, inclusive; a line's `timestamp` resumes exactly at that line */
  since?: Date | string;
  /** only the last N lines of the history */
  tail?: number;
}

export type RuntimeEvent =
  | { type: 'start'; containerId: string; name: string; at: Date; owner: Owner | null; labels: Labels }
  | { type: 'die'; containerId: string; name: string; at: Date; exitCode: number; owner: Owner | null; labels: Labels }
  /** the kernel killed a process of the container for exceeding its memory limit */
  | { type: 'oom'; containerId: string; name: string; at: Date; owner: Owner | null; labels: Labels };

/**
 * A live sequence (log lines, events): iterate it with `for await`. It ends when its source ends;
 * close() (or leaving the loop) stops it and releases the connection. A source that fails makes
 * the iteration throw.
 */
export interface Feed<T> extends AsyncIterable<T> {
  close(): void;
}

export interface Purged {
  containers: number;
  networks: number;
  volumes: number;
  images: number;
}

export interface Runtime {
  /** the driver's name for logs and metrics, e.g. "docker" */
  readonly driver: string;

  /** Asks the engine who it is; refuses (throws) an engine that is unreachable or too old. */
  check(): Promise<EngineInfo>;

  /**
   * Creates the network unless it exists; safe to call concurrently, also from several processes
   * on one engine. An existing network of that name is used only when its labels carry every
   * label of the spec (its workspace's included); otherwise ForeignObjectError. A driver with an address pool gives it a subnet of its own from the pool, never
   * one any other network of the engine uses, and throws NetworkPoolFullError when none is left.
   */
  ensureNetwork(spec: NetworkSpec): Promise<NetworkInfo>;
  /** The managed networks the selector matches (the owner's workspace matches their workspace label). */
  listNetworks(selector: Selector): Promise<ManagedNetwork[]>;
  /** Removes a network no container uses; false when absent; throws while containers use it. */
  removeNetwork(idOrName: string): Promise<boolean>;
  /** Attaches a running container (Slipway's own, when it runs in one) to a network, with these DNS names there; idempotent. */
  connect(network: string, idOrName: string, aliases?: readonly string[]): Promise<void>;

  build(spec: BuildSpec): Promise<BuildResult>;
  /** Gives the image `source` the reference `target` (`repository:tag`). */
  tagImage(source: string, target: string): Promise<void>;
  inspectImage(ref: string): Promise<ImageInfo | null>;
  /** The managed images the selector matches (its owner part matches image labels too). */
  listImages(selector: Selector): Promise<ImageInfo[]>;
  /** Removes the reference (and the image when no other reference keeps it); false when absent. */
  removeImage(ref: string): Promise<boolean>;
  /** Fetches the image from its registry; throws with the engine's reason when it cannot (no registry reachable, unknown image). */
  pull(ref: string, opts?: { timeoutMs?: number }): Promise<void>;

  /** Creates the named volume unless it exists; an existing one without every label of the spec is refused (ForeignObjectError). */
  ensureVolume(spec: VolumeSpec): Promise<void>;
  /** Removes a volume no container uses; false when absent. */
  removeVolume(name: string): Promise<boolean>;
  /** The named volumes whose labels include `labels`, with all their labels. */
  listVolumes(selector: { labels: Labels }): Promise<{ name: string; labels: Labels }[]>;
  /** Bytes the volume holds on the engine's disk; null when the engine does not say or the volume is absent. */
  volumeSize(name: string): Promise<number | null>;

  /** Creates and starts a container; nothing is left behind when it cannot start. */
  run(spec: ContainerSpec): Promise<ContainerInfo>;
  /** Runs a one-off container to its end with its standard streams attached, then removes it (TaskSpec). */
  task(spec: TaskSpec): Promise<TaskResult>;
  inspect(idOrName: string): Promise<ContainerInfo | null>;
  list(selector: Selector): Promise<ContainerInfo[]>;
  /** The ids of the running containers of `selector`, in one engine call (list() also inspects each). */
  runningIds(selector: Selector): Promise<string[]>;
  /** Stops it (idempotent: a stopped or missing container is left as it is). */
  stop(idOrName: string, opts?: StopOptions): Promise<void>;
  /** Removes it, running or not; false when it was already gone. */
  remove(idOrName: string): Promise<boolean>;
  /** null when the container is not running (or gone). */
  stats(idOrName: string): Promise<ContainerUsage | null>;
  /** Throws when the container does not exist. */
  logs(idOrName: string, opts: LogOptions): Promise<Feed<LogLine>>;
  /** Container start and die events of managed containers; resolves once the subscription is live. */
  events(selector: Selector): Promise<Feed<RuntimeEvent>>;

  /**
   * Removes every managed container, network, volume and image that the selector matches (an
   * empty selector is refused); a network or image still used by a container it does not match
   * stays. For cleanup and orphan removal.
   */
  purge(selector: Selector): Promise<Purged>;
}
