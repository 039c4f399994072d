import type { WalletService } from '../billing/wallet.service.js';
import { iso } from '../domain/clock.js';
import { AppError, conflict, invalid, notFound } from '../domain/errors.js';
import type { Deps } from '../deps.js';
import { resolveProject, type ProjectRow, type ProjectRef } from '../projects/resolve.js';
import { refreshProjectStatus } from '../projects/status.js';
import { deploymentView, type DeploymentView } from '../projects/views.js';
import type { DeploymentRow } from '../store/schema.js';
import type { Engine } from '../domain/ports.js';
import type { Access } from '../tenancy/context.js';
import { holdMemoryRoom } from '../tenancy/limits.js';
import { projectReservationMb } from '../store/repositories/capacity.js';
import type { DeployQueue, EnqueueInput } from './queue.js';

/** How long a delivery's claim is kept: a replay of an older one meets the head check instead. */
export const DELIVERY_RETENTION_MS = 7 * 86_400_000;

/** Until the engine is wired in (the API alone, in tests of the tenancy), deployments only queue. */
export const idleEngine: Engine = {
  wake: () => undefined,
  stop: () => Promise.resolve(),
  restart: () => Promise.resolve(),
  pods: () => Promise.resolve([]),
  routesChanged: () => Promise.resolve(),
  databaseHealth: () => Promise.resolve(null),
};

export interface Push {
  repoFullName: string;
  branch: string;
  commitSha: string;
  commitMessage?: string | undefined;
}

/** A push as a GitHub App delivers it: it names the installation it comes from. */
export interface AppPush extends Push {
  installationId: number;
}

/**
 * The deployment actions of the API. Each answers at once with the record it queued or touched;
 * the work itself happens in the workers (docs/decisions.md#long-work).
 */
export class DeployService {
  constructor(
    private readonly deps: Deps,
    private readonly queue: DeployQueue,
    private readonly wallets: WalletService,
    /** the engine of the moment (an EngineHandle) */
    private readonly engine: Engine,
  ) {}

  async deploy(access: Access, projectSlug: ProjectRef, input: { branch?: string | undefined; commit_sha?: string | undefined }): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const git = await this.deps.store.repos.gitConnections.of(project.id);
    if (git === undefined) throw invalid('Connect a Git repository to the project (POST …/git) before deploying it.');
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'git', branch: input.branch ?? git.branch, commitSha: input.commit_sha ?? null });
  }

  /** A template instance's catalog image, without a build (pulled by the engine when it is not there). */
  async deployImage(access: Access, projectSlug: ProjectRef, image: string): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'template', image, commitMessage: `template image ${image}` });
  }

  /** Stops what the project serves now (a template instance's `POST …/stop`); 409 when nothing runs. */
  async stopServing(access: Access, projectSlug: ProjectRef): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const current = await this.deps.store.repos.deployments.serving(project.id);
    if (current?.status !== 'running') throw conflict('Nothing of it is running: there is nothing to stop.');
    return this.stop(access, projectSlug, current.id);
  }

  /** The current image again, without a build. */
  async redeploy(access: Access, projectSlug: ProjectRef): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const current = await this.deps.store.repos.deployments.serving(project.id);
    if (current === undefined || current.image === null) throw conflict('The project has no running deployment whose image could be redeployed; deploy it first.');
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'redeploy', image: current.image, branch: current.branch, commitSha: current.commit_sha, commitMessage: current.commit_message });
  }

  /**
   * replicas, cpu or ram changed: a running project takes the new size at once, by a rolling
   * redeploy of its current image (a project that does not run takes it on its next deploy).
   */
  async resized(access: Access, projectSlug: ProjectRef): Promise<void> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const current = await this.deps.store.repos.deployments.serving(project.id);
    if (current === undefined || current.image === null) return;
    try {
      await this.redeploy(access, projectSlug);
    } catch (err) {
      // Without credit the new size waits for the next paid deploy; the change itself is saved.
      if (!(err instanceof AppError && err.code === 'PAYMENT_REQUIRED')) throw err;
    }
  }

  /** A new deployment of an earlier deployment's image. */
  async rollback(access: Access, projectSlug: ProjectRef, id: string): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const target = await this.find(project.id, id);
    if (target.image === null) {
      throw conflict('That deployment has no image to roll back to: it never produced one, or its image was removed (a project keeps the images of its newest deployments only, see --keep-images). Deploy its commit again instead.');
    }
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'rollback', image: target.image, branch: target.branch, commitSha: target.commit_sha, commitMessage: target.commit_message });
  }

  async stop(access: Access, projectSlug: ProjectRef, id: string): Promise<DeploymentView> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const target = await this.find(project.id, id);
    if (target.status !== 'running') throw conflict(`Only a running deployment can be stopped; this one is ${target.status}.`);
    // Recorded first: from here on nothing heals it, and containers left behind by a failure
    // below are orphans the reconciler removes.
    const stopped = await this.queue.advance(target.id, null, { kind: 'stop' });
    if (stopped === null) throw conflict('The deployment changed while it was being stopped; look at it again.');
    await refreshProjectStatus(this.deps.store.repos, project.id, iso(this.deps.clock.now()));
    await this.engine.stop(project, target);
    return deploymentView(stopped);
  }

  async restart(access: Access, projectSlug: ProjectRef): Promise<ProjectRow> {
    const project = await resolveProject(this.deps.store.repos, access, projectSlug);
    const current = await this.deps.store.repos.deployments.serving(project.id);
    if (current === undefined) throw conflict('The project has no running deployment to restart.');
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    await this.engine.restart(project, current);
    return project;
  }

  /**
   * A GitHub App delivery of a push to `repo@branch`: deploy every project connected to it with
   * auto_deploy on whose connection uses that very installation, linked to the project's own
   * workspace. Projects of workspaces without credit are skipped, and so are projects that
   * already have a Git deployment of the pushed commit queued, under way or running (the same
   * push delivered by a repository webhook too). The deployments build the pushed commit only if
   * it is still the branch's head when fetched. Returns them.
   */
  async deployFromAppPush(push: AppPush): Promise<DeploymentView[]> {
    if (!Number.isSafeInteger(push.installationId) || push.installationId <= 0) return [];
    const projects = await this.deps.store.repos.gitConnections.appPushTargets(push.installationId, push.repoFullName, push.branch);
    const queued: DeploymentView[] = [];
    for (const p of projects) {
      const d = await this.deployPush(p, push);
      if (d !== null) queued.push(d);
    }
    return queued;
  }

  /**
   * A repository webhook's push, delivered to one connection's URL and verified with its secret:
   * deploy that connection's project, and only if the push is for its repository and branch and
   * auto_deploy is on (the caller checked); null when its workspace has no credit or the project
   * already has a Git deployment of that commit queued, under way or running.
   */
  async deployConnectionPush(projectId: string, push: Push): Promise<DeploymentView | null> {
    const p = await this.deps.store.repos.projects.byId(projectId);
    if (p === undefined) return null;
    return this.deployPush(p, push);
  }

  /**
   * Claims a delivery for `receiver` (`app`, or a connection's webhook id): false when the same
   * delivery id, or the same body, was claimed before (the store's unique keys decide, so two
   * replicas or two concurrent retries never both act). Claims older than a week are pruned.
   */
  async claimDelivery(receiver: string, deliveryId: string, payloadDigest: string): Promise<boolean> {
    const { webhookDeliveries } = this.deps.store.repos;
    const now = this.deps.clock.now();
    await webhookDeliveries.prune(iso(new Date(now.getTime() - DELIVERY_RETENTION_MS)));
    return webhookDeliveries.claim({ receiver, delivery_id: deliveryId, payload_digest: payloadDigest, received_at: iso(now) });
  }

  /** A claimed delivery whose handling failed: GitHub's redelivery may try again. */
  async releaseDelivery(receiver: string, deliveryId: string): Promise<void> {
    await this.deps.store.repos.webhookDeliveries.release(receiver, deliveryId);
  }

  /**
   * Billing stops a workspace's work once its wallet stayed empty past the grace period: every
   * serving deployment of its projects and template instances is stopped (images, volumes and
   * data are kept) and the project marked `suspended`. Idempotent. Returns the projects stopped.
   */
  async suspendWorkspace(workspaceId: string): Promise<number> {
    const { projects, deployments } = this.deps.store.repos;
    let stopped = 0;
    for (const kind of ['project', 'template'] as const) {
      for (const project of await projects.list(workspaceId, kind)) {
        const current = await deployments.serving(project.id);
        if (current?.status === 'running') {
          const row = await this.queue.advance(current.id, null, { kind: 'stop' });
          if (row !== null) {
            await this.engine.stop(project, current);
            stopped++;
          }
        }
        if (current?.status === 'running' || project.status === 'running' || project.status === 'crashed') {
          await projects.setStatus(project.id, 'suspended', iso(this.deps.clock.now()));
        }
      }
    }
    return stopped;
  }

  /**
   * A top-up brought the wallet back above 0: every `suspended` project runs the image it ran
   * before again (a redeploy). Returns the deployments queued.
   */
  async resumeWorkspace(workspaceId: string): Promise<number> {
    const { projects, deployments } = this.deps.store.repos;
    let queued = 0;
    for (const kind of ['project', 'template'] as const) {
      for (const project of await projects.list(workspaceId, kind)) {
        if (project.status !== 'suspended') continue;
        const last = (await deployments.page(project.id, 20, 0)).find((d) => d.image !== null && (d.status === 'stopped' || d.status === 'running'));
        if (last?.image == null) {
          await projects.setStatus(project.id, 'stopped', iso(this.deps.clock.now()));
          continue;
        }
        await this.enqueue({ projectId: project.id, source: 'redeploy', image: last.image, branch: last.branch, commitSha: last.commit_sha, commitMessage: last.commit_message });
        queued++;
      }
    }
    return queued;
  }

  private async deployPush(p: { id: string; workspace_id: string }, push: Push): Promise<DeploymentView | null> {
    try {
      await this.wallets.requireFunds(p.workspace_id);
      // past --max-reserved-memory a push is not deployed either (like one without credit)
      const sized = await this.deps.store.repos.projects.byId(p.id);
      if (sized !== undefined) await this.memoryFor(sized);
    } catch (err) {
      if (err instanceof AppError && (err.code === 'PAYMENT_REQUIRED' || err.code === 'CONFLICT')) return null;
      throw err;
    }
    const { row, queued } = await this.queue.enqueueOrFind({ projectId: p.id, source: 'git', branch: push.branch, commitSha: push.commitSha, commitMessage: push.commitMessage ?? null, requireHead: true });
    // the same push, delivered by the other way in (repository webhook or GitHub App): already deployed
    return queued ? this.started(row) : null;
  }

  /** 409 when the project's containers (replicas × memory) would take the installation past `--max-reserved-memory`. */
  private async memoryFor(project: { id: string; replicas: number; ram: string }): Promise<void> {
    await holdMemoryRoom(this.deps, this.deps.store.repos, project.id, projectReservationMb(project));
  }

  private async enqueue(input: EnqueueInput): Promise<DeploymentView> {
    return this.started(await this.queue.enqueue(input));
  }

  /** A deployment just queued: its project's status follows, and the engine looks at the queue. */
  private async started(row: DeploymentRow): Promise<DeploymentView> {
    await refreshProjectStatus(this.deps.store.repos, row.project_id, iso(this.deps.clock.now()));
    this.engine.wake();
    return deploymentView(row);
  }

  private async find(projectId: string, id: string): Promise<DeploymentRow> {
    const row = await this.deps.store.repos.deployments.find(projectId, id);
    if (row === undefined) throw notFound('Deployment');
    return row;
  }
}
