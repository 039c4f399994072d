// The ports the capabilities use: what the API asks of the deploy engine, what a build asks of
// the Git source and of the builder. Time comes through the Clock (./clock.ts), containers
// through the Runtime (./runtime.ts). The implementations live outside the domain and import
// these; nothing here imports anything of theirs.
import type { DeploymentRecord } from './deployment.js';
import type { ProjectRecord } from './project.js';

// ---- the deploy engine ----------------------------------------------------------------------

/** What the API asks of the running orchestrator (the workers and the engine behind them). */
export interface Engine {
  /** new work is queued: wake an idle worker now rather than at its next poll */
  wake(): void;
  /** stop and remove the deployment's containers and take its routes down */
  stop(project: ProjectRecord, deployment: DeploymentRecord): Promise<void>;
  /** restart the deployment's containers one at a time, keeping the others serving */
  restart(project: ProjectRecord, deployment: DeploymentRecord): Promise<void>;
  /** the project's hosts changed (custom domains): route them */
  routesChanged(projectId: string): Promise<void>;
  /** the deployment's containers as the engine sees them, with their resource use */
  pods(projectId: string, deploymentId: string): Promise<Pod[]>;
  /** a managed database's server as the engine sees it; null without an engine or a container */
  databaseHealth(databaseId: string): Promise<DatabaseHealth | null>;
}

/** What went wrong with a running app, for its crash alert (docs/uptime.md#crash-alerts). */
export type CrashKind = 'loop' | 'oom' | 'health';

/** Where the deploy engine reports a crash: one alert per deployment and kind (the sink dedupes). */
export interface CrashSink {
  crashed(projectId: string, deploymentId: string, kind: CrashKind, cause: string): void;
}

/** A database's server, as GET …/databases/:db_slug shows it (`health`). */
export interface DatabaseHealth {
  /** the container's state: `running`, `restarting`, `exited`… */
  status: string;
  restarts: number;
  startedAt: Date | null;
  cpuMillicores: number;
  memoryBytes: number;
  memoryLimitBytes: number | null;
  /** bytes its volume holds; null when the engine does not say */
  volumeBytes: number | null;
}

export interface Pod {
  name: string;
  /** `Running`, `Restarting`, `Exited`… as a pod status reads */
  status: string;
  ready: boolean;
  restarts: number;
  startedAt: Date | null;
  cpuMillicores: number;
  memoryBytes: number;
}

// ---- the Git source -------------------------------------------------------------------------

export interface FetchRequest {
  /** `owner/name` (more segments for hosts with nested groups) */
  repoFullName: string;
  branch: string;
  /** the checkout lands in a new directory under this one (created when missing) */
  workDir: string;
  /** a full commit id to build instead of the branch's head */
  commitSha?: string | undefined;
  /**
   * With commitSha: build it only if it is still the branch's head when fetched (a push
   * webhook's commit); otherwise fail with `not_head`, and the checkout is removed.
   */
  requireHead?: boolean | undefined;
  /**
   * An HTTP access token (a GitHub App installation token). It reaches git through its
   * environment only: never argv, the remote URL or the checkout's `.git/config`.
   */
  token?: string | undefined;
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  /** keep `.git` in the checkout; by default it is removed so that it stays out of the build context */
  keepGitDir?: boolean | undefined;
}

export interface Checkout {
  /** the fresh directory holding the working tree; the caller removes it when done */
  dir: string;
  commitSha: string;
  /** the full message, without its trailing newline */
  commitMessage: string;
}

/** Fetches one commit of a repository into a fresh directory (src/adapters/git/git-source.ts). */
export interface GitSource {
  /** the host fetched from, for the build log */
  readonly host: string;
  fetch(req: FetchRequest): Promise<Checkout>;
}

// ---- the builder ----------------------------------------------------------------------------

/** The images generated Dockerfiles start from (configuration: no registry may be reachable). */
export interface BaseImages {
  node: string;
  go: string;
  python: string;
  /** must provide `sh` and `busybox httpd` (the official busybox image, or a local import of busybox-static) */
  static: string;
}

export type BuildStrategy = 'dockerfile' | 'node' | 'go' | 'python' | 'static';

export interface PrepareOptions {
  /** the checkout (GitSource's `dir`); generated files are written into it */
  checkoutDir: string;
  /** the Git connection's `root_dir`, relative to the repository; default "" (the root) */
  rootDir?: string | undefined;
  /** the Git connection's `dockerfile_path`, relative to root_dir; default "Dockerfile" */
  dockerfilePath?: string | undefined;
  baseImages: BaseImages;
  /** the project's port: the generated image's default PORT and EXPOSE; default 8080 */
  port?: number | undefined;
}

export interface BuildContext {
  /** the directory to send as the build context (a real path inside the checkout) */
  contextDir: string;
  /** the Dockerfile inside contextDir, "/"-separated (the runtime's BuildSpec.dockerfile) */
  dockerfile: string;
  strategy: BuildStrategy;
  /** one sentence for the build log: what was found or generated, and how the app starts */
  description: string;
}

/** Turns a checkout into a build context for the runtime's build (src/adapters/git/context.ts). */
export type PrepareBuildContext = (opts: PrepareOptions) => Promise<BuildContext>;
