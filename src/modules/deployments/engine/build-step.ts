import { rm } from 'node:fs/promises';
import { GitSourceError, prepareBuildContext, type GitHubApp } from '../../../adapters/git/index.js';
import type { BaseImages, GitSource } from '../../../domain/ports.js';
import type { Owner, Runtime } from '../../../domain/runtime.js';
import { cloneTokenFor } from '../../github/installations.js';
import type { ProjectRow } from '../../projects/resolve.js';
import type { Repositories } from '../../../store/repositories/index.js';
import type { DeploymentRow } from '../../../store/schema.js';
import { parseSettings } from '../../tenancy/views.js';
import type { BuildLog } from '../build-log.js';
import { PROJECT_LABEL, type EngineLog } from './containers.js';
import { DeployFailure } from './failure.js';
import type { Phases } from './phases.js';

export interface BuildStepOptions {
  /** the project's Git connection and workspace; the installation a private repository is cloned with */
  repos: Pick<Repositories, 'gitConnections' | 'workspaces' | 'installations'>;
  git: GitSource;
  githubApp: GitHubApp | undefined;
  runtime: Runtime;
  baseImages: BaseImages;
  /** where checkouts are made (and removed after the build) */
  workDir: string;
  /** the instance's labels, which every image carries */
  labels: Record<string, string>;
}

export interface Built {
  image: string;
  commit: { sha: string; message: string };
}

const firstLine = (s: string): string => s.split('\n')[0]?.trim() ?? '';

/**
 * The build of a deployment that has no image yet: fetch the commit from the project's Git
 * connection (with the installation's token when it has one), turn the checkout into a build
 * context, build the image on the engine under the workspace's build timeout, and remove the
 * checkout. Its failures are DeployFailures, whose sentence the user reads on the deployment.
 */
export class BuildStep {
  private readonly repos: BuildStepOptions['repos'];
  private readonly git: GitSource;
  private readonly githubApp: GitHubApp | undefined;
  private readonly runtime: Runtime;
  private readonly baseImages: BaseImages;
  private readonly workDir: string;
  private readonly labels: Record<string, string>;

  constructor(o: BuildStepOptions) {
    this.repos = o.repos;
    this.git = o.git;
    this.githubApp = o.githubApp;
    this.runtime = o.runtime;
    this.baseImages = o.baseImages;
    this.workDir = o.workDir;
    this.labels = o.labels;
  }

  async build(d: DeploymentRow, project: ProjectRow, owner: Owner, say: (line: string) => void, signal: AbortSignal, phases?: Phases): Promise<Built> {
    const { repos, runtime, git } = this;
    const conn = await repos.gitConnections.of(project.id);
    if (conn === undefined) throw new DeployFailure('The project has no Git connection any more.');
    // A workspace's deletion takes its projects with it.
    const ws = await repos.workspaces.byId(project.workspace_id);
    if (ws === undefined) throw new DeployFailure('The project was deleted.');
    const timeoutMs = parseSettings(ws.settings).build_timeout_sec * 1000;
    const branch = d.branch ?? conn.branch;
    say(`Fetching ${conn.repo_full_name}@${branch} from ${git.host}.`);
    let checkout;
    try {
      // only an installation still linked to the project's workspace, restricted to this repository
      const token = await cloneTokenFor(repos, this.githubApp, { workspaceId: project.workspace_id, installationId: Number(conn.installation_id), repoFullName: conn.repo_full_name }, signal);
      phases?.mark('build.prepare');
      checkout = await git.fetch({ repoFullName: conn.repo_full_name, branch, workDir: this.workDir, commitSha: d.commit_sha ?? undefined, requireHead: d.require_head === 1, token, timeoutMs, signal });
    } catch (err) {
      // A cached installation token that Git refused (revoked, access removed) is not used again.
      if (err instanceof GitSourceError && err.code === 'access_denied') this.githubApp?.forget(Number(conn.installation_id));
      throw new DeployFailure(err instanceof Error ? err.message : String(err));
    }
    phases?.mark('build.fetch');
    try {
      say(`Commit ${checkout.commitSha.slice(0, 12)}: ${firstLine(checkout.commitMessage)}`);
      let context;
      try {
        context = await prepareBuildContext({ checkoutDir: checkout.dir, rootDir: conn.root_dir, dockerfilePath: conn.dockerfile_path, baseImages: this.baseImages, port: project.port });
      } catch (err) {
        throw new DeployFailure(err instanceof Error ? err.message : String(err));
      }
      say(context.description);
      phases?.mark('build.context');
      const tag = `slipway/${ws.slug}-${project.slug}:${d.id}`;
      // Images carry few labels: the classic builder adds one step (~70 ms) per label.
      const result = await runtime.build({ contextDir: context.contextDir, dockerfile: context.dockerfile, tag, labels: { ...this.labels, [PROJECT_LABEL]: owner.project }, onLine: say, timeoutMs, signal });
      phases?.mark('build.engine');
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
}

/** A deployment's build log as its worker writes it: lines batched, stored every 200 ms or 50 lines. */
export interface BuildLogWriter {
  readonly say: (line: string) => void;
  /** stores the lines said so far */
  readonly flush: () => Promise<void>;
  /** stops the periodic flush and stores what is left */
  readonly close: () => Promise<void>;
}

export function openBuildLog(buildLog: BuildLog, deploymentId: string, log: EngineLog): BuildLogWriter {
  const lines: string[] = [];
  let flushing: Promise<void> = Promise.resolve();
  const flush = () => {
    const batch = lines.splice(0);
    flushing = flushing.then(() => buildLog.append(deploymentId, batch)).catch((err: unknown) => {
      log.error({ err }, 'writing build log failed');
    });
    return flushing;
  };
  const flusher = setInterval(() => void flush(), 200);
  return {
    say: (line) => {
      lines.push(line);
      if (lines.length >= 50) void flush();
    },
    flush,
    close: () => {
      clearInterval(flusher);
      return flush();
    },
  };
}
