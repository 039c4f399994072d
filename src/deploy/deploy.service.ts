import type { WalletService } from '../billing/wallet.service.js';
import { iso } from '../domain/clock.js';
import { AppError, conflict, invalid, notFound } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import { resolveProject, type ProjectRow } from '../projects/resolve.js';
import { deploymentView, type DeploymentView } from '../projects/views.js';
import type { DeploymentRow } from '../store/schema.js';
import type { Access } from '../tenancy/context.js';
import { refreshProjectStatus, servingDeployment } from './project-status.js';
import type { DeployQueue, EnqueueInput } from './queue.js';

/** What the API asks of the running orchestrator (the workers and the engine behind them). */
export interface Engine {
  /** new work is queued: wake an idle worker now rather than at its next poll */
  wake(): void;
  /** stop and remove the deployment's containers and take its routes down */
  stop(project: ProjectRow, deployment: DeploymentRow): Promise<void>;
  /** restart the deployment's containers one at a time, keeping the others serving */
  restart(project: ProjectRow, deployment: DeploymentRow): Promise<void>;
  /** the project's hosts changed (custom domains): route them */
  routesChanged(projectId: string): Promise<void>;
  /** the deployment's containers as the engine sees them, with their resource use */
  pods(projectId: string, deploymentId: string): Promise<Pod[]>;
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

/** Until the engine is wired in (the API alone, in tests of the tenancy), deployments only queue. */
export const idleEngine: Engine = {
  wake: () => undefined,
  stop: () => Promise.resolve(),
  restart: () => Promise.resolve(),
  pods: () => Promise.resolve([]),
  routesChanged: () => Promise.resolve(),
};

export interface Push {
  repoFullName: string;
  branch: string;
  commitSha?: string | undefined;
  commitMessage?: string | undefined;
}

/**
 * The deployment actions of the API. Each answers at once with the record it queued or touched;
 * the work itself happens in the workers (DESIGN §4, "Long work never blocks a request").
 */
export class DeployService {
  constructor(
    private readonly deps: Deps,
    private readonly queue: DeployQueue,
    private readonly wallets: WalletService,
    private readonly engine: () => Engine,
  ) {}

  async deploy(access: Access, projectSlug: string, input: { branch?: string | undefined; commit_sha?: string | undefined }): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const git = await this.deps.store.db.selectFrom('git_connections').selectAll().where('project_id', '=', project.id).executeTakeFirst();
    if (git === undefined) throw invalid('Connect a Git repository to the project (POST …/git) before deploying it.');
    await this.wallets.requireFunds(project.workspace_id);
    return this.enqueue({ projectId: project.id, source: 'git', branch: input.branch ?? git.branch, commitSha: input.commit_sha ?? null });
  }

  /** The current image again, without a build. */
  async redeploy(access: Access, projectSlug: string): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const current = await servingDeployment(this.deps.store.db, project.id);
    if (current === undefined || current.image === null) throw conflict('The project has no running deployment whose image could be redeployed; deploy it first.');
    await this.wallets.requireFunds(project.workspace_id);
    return this.enqueue({ projectId: project.id, source: 'redeploy', image: current.image, branch: current.branch, commitSha: current.commit_sha, commitMessage: current.commit_message });
  }

  /**
   * replicas, cpu or ram changed: a running project takes the new size at once, by a rolling
   * redeploy of its current image (a project that does not run takes it on its next deploy).
   */
  async resized(access: Access, projectSlug: string): Promise<void> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const current = await servingDeployment(this.deps.store.db, project.id);
    if (current === undefined || current.image === null) return;
    try {
      await this.redeploy(access, projectSlug);
    } catch (err) {
      // Without credit the new size waits for the next paid deploy; the change itself is saved.
      if (!(err instanceof AppError && err.code === 'PAYMENT_REQUIRED')) throw err;
    }
  }

  /** A new deployment of an earlier deployment's image. */
  async rollback(access: Access, projectSlug: string, id: string): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const target = await this.find(project.id, id);
    if (target.image === null) {
      throw conflict('That deployment has no image to roll back to: it never produced one, or its image was removed (a project keeps the images of its newest deployments only, see --keep-images). Deploy its commit again instead.');
    }
    await this.wallets.requireFunds(project.workspace_id);
    return this.enqueue({ projectId: project.id, source: 'rollback', image: target.image, branch: target.branch, commitSha: target.commit_sha, commitMessage: target.commit_message });
  }

  async stop(access: Access, projectSlug: string, id: string): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const target = await this.find(project.id, id);
    if (target.status !== 'running') throw conflict(`Only a running deployment can be stopped; this one is ${target.status}.`);
    // Recorded first: from here on nothing heals it, and containers left behind by a failure
    // below are orphans the reconciler removes.
    const stopped = await this.queue.advance(target.id, null, { kind: 'stop' });
    if (stopped === null) throw conflict('The deployment changed while it was being stopped; look at it again.');
    await refreshProjectStatus(this.deps.store.db, project.id, iso(this.deps.clock.now()));
    await this.engine().stop(project, target);
    return deploymentView(stopped);
  }

  async restart(access: Access, projectSlug: string): Promise<ProjectRow> {
    const project = await resolveProject(this.deps.store.db, access, projectSlug);
    const current = await servingDeployment(this.deps.store.db, project.id);
    if (current === undefined) throw conflict('The project has no running deployment to restart.');
    await this.wallets.requireFunds(project.workspace_id);
    await this.engine().restart(project, current);
    return project;
  }

  /**
   * A push to `repo@branch`: deploy every project connected to it with auto_deploy on. Projects
   * of workspaces without credit are skipped. Returns the queued deployments.
   */
  async deployFromPush(push: Push): Promise<DeploymentView[]> {
    const projects = await this.deps.store.db
      .selectFrom('git_connections')
      .innerJoin('projects', 'projects.id', 'git_connections.project_id')
      .select(['projects.id', 'projects.workspace_id'])
      // GitHub names are case-insensitive: Acme/Web and acme/web are one repository.
      .where((eb) => eb(eb.fn('lower', ['git_connections.repo_full_name']), '=', push.repoFullName.toLowerCase()))
      .where('git_connections.branch', '=', push.branch)
      .where('git_connections.auto_deploy', '=', 1)
      .execute();
    const queued: DeploymentView[] = [];
    for (const p of projects) {
      try {
        await this.wallets.requireFunds(p.workspace_id);
      } catch (err) {
        if (err instanceof AppError && err.code === 'PAYMENT_REQUIRED') continue;
        throw err;
      }
      queued.push(await this.enqueue({ projectId: p.id, source: 'git', branch: push.branch, commitSha: push.commitSha ?? null, commitMessage: push.commitMessage ?? null }));
    }
    return queued;
  }

  private async enqueue(input: EnqueueInput): Promise<DeploymentView> {
    const row = await this.queue.enqueue(input);
    await refreshProjectStatus(this.deps.store.db, input.projectId, iso(this.deps.clock.now()));
    this.engine().wake();
    return deploymentView(row);
  }

  private async find(projectId: string, id: string): Promise<DeploymentRow> {
    const row = await this.deps.store.db.selectFrom('deployments').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
    if (row === undefined) throw notFound('Deployment');
    return row;
  }
}
