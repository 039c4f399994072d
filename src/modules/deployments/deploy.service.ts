import type { WalletService } from '../billing/wallet.service.js';
import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { AppError, conflict, invalid, notFound } from '../../domain/errors.js';
import { resolveProject, type ProjectRow, type ProjectRef } from '../projects/resolve.js';
import { refreshProjectStatus } from '../projects/status.js';
import type { Deployment } from './deployments.schema.js';
import { deploymentView } from './deployments.service.js';
import type { DeploymentRow, Repositories } from '../../store/repositories/index.js';
import type { Engine } from '../../domain/ports.js';
import type { Access } from '../../domain/access.js';
import type { Late } from '../../domain/late.js';
import { holdMemoryRoom, type TenantLimits } from '../tenancy/policy.js';
import { projectReservationMb } from '../../store/repositories/capacity.js';
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

/** What a push did for one project (the webhook answer's `projects[]`, docs/api.md#webhooks). */
export interface PushOutcome {
  project_id: string;
  /**
   * queued; or not deployed: the wallet is empty, the installation's --max-reserved-memory would be passed, a Git deployment of that commit is already
   * queued, under way or running, or the project's workspace has not linked the installation
   */
  outcome: 'queued' | 'payment_required' | 'memory_bound' | 'duplicate_commit' | 'installation_not_linked';
  /** the deployment queued; the one already live for that commit; the failed one that records the refusal; null: none */
  deployment_id: string | null;
  /** one sentence */
  reason: string;
}

export const PUSH_REASONS = {
  payment_required:
    'Not deployed: the workspace wallet has no credit left. Top it up, then redeliver this push from GitHub (Recent Deliveries, Redeliver) or deploy the commit by hand.',
  memory_bound: (why: string) => `Not deployed: ${why} Then redeliver this push from GitHub (Recent Deliveries, Redeliver) or deploy the commit by hand.`,
  duplicate_commit: (live: DeploymentRow) =>
    `Not deployed again: deployment ${live.id} of this commit is already ${live.status}; should it fail, a redelivery deploys the commit again if it is still the branch's head.`,
  installation_not_linked: (installationId: number) =>
    `Not deployed: this project's Git connection names GitHub App installation ${installationId.toString()}, which its workspace has not linked (any more); link it again (POST /api/workspaces/:slug/github/installations/link), then redeliver this push.`,
} as const;

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
    private readonly repos: Pick<Repositories, 'projects' | 'deployments' | 'deployQueue' | 'gitConnections' | 'webhookDeliveries' | 'capacity'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly limits: TenantLimits,
    private readonly queue: DeployQueue,
    private readonly wallets: WalletService,
    /** the engine of the moment: the leader's, the standby's, or idle */
    private readonly engine: Late<Engine>,
  ) {}

  async deploy(access: Access, projectSlug: ProjectRef, input: { branch?: string | undefined; commit_sha?: string | undefined }): Promise<Deployment> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const git = await this.repos.gitConnections.of(project.id);
    if (git === undefined) throw invalid('Connect a Git repository to the project (POST …/git) before deploying it.');
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'git', branch: input.branch ?? git.branch, commitSha: input.commit_sha ?? null });
  }

  /** A template instance's catalog image, without a build (pulled by the engine when it is not there). */
  async deployImage(access: Access, projectSlug: ProjectRef, image: string): Promise<Deployment> {
    const project = await resolveProject(this.repos, access, projectSlug);
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'template', image, commitMessage: `template image ${image}` });
  }

  /** Stops what the project serves now (a template instance's `POST …/stop`); 409 when nothing runs. */
  async stopServing(access: Access, projectSlug: ProjectRef): Promise<Deployment> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const current = await this.repos.deployments.serving(project.id);
    if (current?.status !== 'running') throw conflict('Nothing of it is running: there is nothing to stop.');
    return this.stop(access, projectSlug, current.id);
  }

  /** The current image again, without a build. */
  async redeploy(access: Access, projectSlug: ProjectRef): Promise<Deployment> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const current = await this.repos.deployments.serving(project.id);
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
    const project = await resolveProject(this.repos, access, projectSlug);
    const current = await this.repos.deployments.serving(project.id);
    if (current === undefined || current.image === null) return;
    try {
      await this.redeploy(access, projectSlug);
    } catch (err) {
      // Without credit the new size waits for the next paid deploy; the change itself is saved.
      if (!(err instanceof AppError && err.code === 'PAYMENT_REQUIRED')) throw err;
    }
  }

  /** A new deployment of an earlier deployment's image. */
  async rollback(access: Access, projectSlug: ProjectRef, id: string): Promise<Deployment> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const target = await this.find(project.id, id);
    if (target.image === null) {
      throw conflict('That deployment has no image to roll back to: it never produced one, or its image was removed (a project keeps the images of its newest deployments only, see --keep-images). Deploy its commit again instead.');
    }
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    return this.enqueue({ projectId: project.id, source: 'rollback', image: target.image, branch: target.branch, commitSha: target.commit_sha, commitMessage: target.commit_message });
  }

  async stop(access: Access, projectSlug: ProjectRef, id: string): Promise<Deployment> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const target = await this.find(project.id, id);
    if (target.status !== 'running') throw conflict(`Only a running deployment can be stopped; this one is ${target.status}.`);
    // Recorded first: from here on nothing heals it, and containers left behind by a failure
    // below are orphans the reconciler removes.
    const stopped = await this.queue.advance(target.id, null, { kind: 'stop' });
    if (stopped === null) throw conflict('The deployment changed while it was being stopped; look at it again.');
    await refreshProjectStatus(this.repos, project.id, iso(this.clock.now()));
    await this.engine.get().stop(project, target);
    return deploymentView(stopped);
  }

  async restart(access: Access, projectSlug: ProjectRef): Promise<ProjectRow> {
    const project = await resolveProject(this.repos, access, projectSlug);
    const current = await this.repos.deployments.serving(project.id);
    if (current === undefined) throw conflict('The project has no running deployment to restart.');
    await this.wallets.requireFunds(project.workspace_id);
    await this.memoryFor(project);
    await this.engine.get().restart(project, current);
    return project;
  }

  /**
   * A GitHub App delivery of a push to `repo@branch`: deploy every project connected to it with
   * auto_deploy on whose connection uses that very installation, linked to the project's own
   * workspace. Each such project gets an outcome (queued, or why not: its wallet is empty, or a
   * Git deployment of the pushed commit is already queued, under way or running); connections
   * whose workspace has not linked the installation (any more) are `installation_not_linked`:
   * never acted on nor recorded in a workspace that no longer trusts the installation (only the
   * App's owner, the operator, sees the App's deliveries and their answers). The deployments build the pushed commit only if it is still the branch's head
   * when fetched.
   */
  async deployFromAppPush(push: AppPush): Promise<PushOutcome[]> {
    if (!Number.isSafeInteger(push.installationId) || push.installationId <= 0) return [];
    const targets = await this.repos.gitConnections.appPushTargets(push.installationId, push.repoFullName, push.branch);
    const outcomes: PushOutcome[] = [];
    for (const p of targets) {
      if (p.linked) outcomes.push(await this.deployPush(p, push));
      else outcomes.push({ project_id: p.id, outcome: 'installation_not_linked', deployment_id: null, reason: PUSH_REASONS.installation_not_linked(push.installationId) });
    }
    return outcomes;
  }

  /**
   * A repository webhook's push, delivered to one connection's URL and verified with its secret:
   * deploy that connection's project (the caller checked that the push is for its repository and
   * branch and that auto_deploy is on); null when the project is gone.
   */
  async deployConnectionPush(projectId: string, push: Push): Promise<PushOutcome | null> {
    const p = await this.repos.projects.byId(projectId);
    if (p === undefined) return null;
    return this.deployPush(p, push);
  }

  /**
   * Claims a delivery for `receiver` (`app`, or a connection's webhook id): false when the same
   * delivery id, or the same body, was claimed before (the store's unique keys decide, so two
   * replicas or two concurrent retries never both act). Claims older than a week are pruned.
   */
  async claimDelivery(receiver: string, deliveryId: string, payloadDigest: string): Promise<boolean> {
    const { webhookDeliveries } = this.repos;
    const now = this.clock.now();
    await webhookDeliveries.prune(iso(new Date(now.getTime() - DELIVERY_RETENTION_MS)));
    return webhookDeliveries.claim({ receiver, delivery_id: deliveryId, payload_digest: payloadDigest, received_at: iso(now) });
  }

  /** A claimed delivery whose handling failed: GitHub's redelivery may try again. */
  async releaseDelivery(receiver: string, deliveryId: string): Promise<void> {
    await this.repos.webhookDeliveries.release(receiver, deliveryId);
  }

  /**
   * Billing stops a workspace's work once its wallet stayed empty past the grace period: every
   * serving deployment of its projects and template instances is stopped (images, volumes and
   * data are kept) and the project marked `suspended`. Idempotent. Returns the projects stopped.
   */
  async suspendWorkspace(workspaceId: string): Promise<number> {
    const { projects, deployments } = this.repos;
    let stopped = 0;
    for (const kind of ['project', 'template'] as const) {
      for (const project of await projects.list(workspaceId, kind)) {
        const current = await deployments.serving(project.id);
        if (current?.status === 'running') {
          const row = await this.queue.advance(current.id, null, { kind: 'stop' });
          if (row !== null) {
            await this.engine.get().stop(project, current);
            stopped++;
          }
        }
        if (current?.status === 'running' || project.status === 'running' || project.status === 'crashed') {
          await projects.setStatus(project.id, 'suspended', iso(this.clock.now()));
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
    const { projects, deployments } = this.repos;
    let queued = 0;
    for (const kind of ['project', 'template'] as const) {
      for (const project of await projects.list(workspaceId, kind)) {
        if (project.status !== 'suspended') continue;
        const last = (await deployments.page(project.id, 20, 0)).find((d) => d.image !== null && (d.status === 'stopped' || d.status === 'running'));
        if (last?.image == null) {
          await projects.setStatus(project.id, 'stopped', iso(this.clock.now()));
          continue;
        }
        await this.enqueue({ projectId: project.id, source: 'redeploy', image: last.image, branch: last.branch, commitSha: last.commit_sha, commitMessage: last.commit_message });
        queued++;
      }
    }
    return queued;
  }

  /**
   * One project's share of a push: queued, or why not. A push refused for an empty wallet is
   * recorded on the project as a failed deployment whose error says so (the deployments list is
   * where its users look), so that it is not lost in silence (docs/security.md#webhook-answers).
   */
  private async deployPush(p: { id: string; workspace_id: string }, push: Push): Promise<PushOutcome> {
    const refused = await this.pushRefusal(p);
    if (refused !== null) {
      const row = await this.recordRefusal(p.id, push, refused.reason);
      return { project_id: p.id, ...refused, deployment_id: row.id };
    }
    const { row, queued } = await this.queue.enqueueOrFind({ projectId: p.id, source: 'git', branch: push.branch, commitSha: push.commitSha, commitMessage: push.commitMessage ?? null, requireHead: true });
    if (queued) {
      const d = await this.started(row);
      return { project_id: p.id, outcome: 'queued', deployment_id: d.id, reason: `Deployment ${d.id} of commit ${push.commitSha.slice(0, 12)} was queued.` };
    }
    // the same push, delivered by the other way in (repository webhook or GitHub App), or again
    return { project_id: p.id, outcome: 'duplicate_commit', deployment_id: row.id, reason: PUSH_REASONS.duplicate_commit(row) };
  }

  /**
   * Why a push may not deploy `p` now, or null: its workspace's wallet is empty, or its containers
   * would take the installation past `--max-reserved-memory` (each check caught on its own, so
   * that no other refusal is taken for one of these).
   */
  private async pushRefusal(p: { id: string; workspace_id: string }): Promise<{ outcome: 'payment_required' | 'memory_bound'; reason: string } | null> {
    try {
      await this.wallets.requireFunds(p.workspace_id);
    } catch (err) {
      if (err instanceof AppError && err.code === 'PAYMENT_REQUIRED') return { outcome: 'payment_required', reason: PUSH_REASONS.payment_required };
      throw err;
    }
    const sized = await this.repos.projects.byId(p.id);
    try {
      if (sized !== undefined) await this.memoryFor(sized);
    } catch (err) {
      if (err instanceof AppError && err.code === 'CONFLICT') return { outcome: 'memory_bound', reason: PUSH_REASONS.memory_bound(err.message) };
      throw err;
    }
    return null;
  }

  /** A push that was not deployed, as a failed deployment of that commit in the project's list. */
  private async recordRefusal(projectId: string, push: Push, reason: string): Promise<DeploymentRow> {
    const now = iso(this.clock.now());
    const row: DeploymentRow = {
      id: this.ids.id(),
      project_id: projectId,
      status: 'failed',
      source: 'git',
      image: null,
      branch: push.branch,
      commit_sha: push.commitSha,
      commit_message: push.commitMessage ?? null,
      error: reason,
      created_at: now,
      started_at: null,
      finished_at: now,
      lease_owner: null,
      lease_until: null,
      attempts: 0,
      restart_requested_at: null,
      require_head: 1,
    };
    await this.repos.deployQueue.insert(row);
    await refreshProjectStatus(this.repos, projectId, now);
    return row;
  }

  /** 409 when the project's containers (replicas × memory) would take the installation past `--max-reserved-memory`. */
  private async memoryFor(project: { id: string; replicas: number; ram: string }): Promise<void> {
    await holdMemoryRoom(this.limits, this.repos, project.id, projectReservationMb(project));
  }

  private async enqueue(input: EnqueueInput): Promise<Deployment> {
    return this.started(await this.queue.enqueue(input));
  }

  /** A deployment just queued: its project's status follows, and the engine looks at the queue. */
  private async started(row: DeploymentRow): Promise<Deployment> {
    await refreshProjectStatus(this.repos, row.project_id, iso(this.clock.now()));
    this.engine.get().wake();
    return deploymentView(row);
  }

  private async find(projectId: string, id: string): Promise<DeploymentRow> {
    const row = await this.repos.deployments.find(projectId, id);
    if (row === undefined) throw notFound('Deployment');
    return row;
  }
}
