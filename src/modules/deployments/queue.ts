import { iso, type Clock, type IdSource } from '../../domain/clock.js';
import { next, type DeploymentEvent } from '../../domain/deployment.js';
import type { DeploymentSource } from '../../domain/deployment.js';
import type { DeploymentRow } from '../../store/repositories/index.js';
import type { StoreOf } from '../../store/db.js';

export interface EnqueueInput {
  projectId: string;
  source: DeploymentSource;
  image?: string | null;
  branch?: string | null;
  commitSha?: string | null;
  commitMessage?: string | null;
  /**
   * a push webhook's deployment: built only if commitSha is still the branch's head, and not
   * queued at all when a Git deployment of that commit is already queued, under way or running
   * (one push reaches a project through both its repository webhook and the GitHub App)
   */
  requireHead?: boolean;
}

/** What a worker may record on its deployment as it moves it on. */
export interface Progress {
  image?: string;
  commit_sha?: string;
  commit_message?: string;
  error?: string;
}

const INTERRUPTED = 'Interrupted: the Slipway process that ran this deployment stopped before it finished.';

/**
 * The deploy queue is the deployments table itself. A worker claims the oldest queued deployment
 * of a project that has nothing building, holds it with a lease it renews, and moves it through
 * the state machine with guarded updates: a worker whose lease was reaped can no longer write.
 */
export class DeployQueue {
  constructor(
    private readonly store: StoreOf<'projects' | 'deployQueue'>,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    private readonly leaseMs: number,
  ) {}

  /**
   * A new queued deployment. An older deployment of the project still waiting in the queue is
   * superseded in the same transaction: only the newest request is worth building.
   */
  async enqueue(input: EnqueueInput): Promise<DeploymentRow> {
    return (await this.enqueueOrFind(input)).row;
  }

  /**
   * As enqueue, except for a push (`requireHead`) of a commit the project already has queued,
   * under way or running from Git: that deployment is answered, and nothing is queued or
   * superseded. The check is made under the project's lock, so of two deliveries of one push
   * exactly one queues.
   */
  async enqueueOrFind(input: EnqueueInput): Promise<{ row: DeploymentRow; queued: boolean }> {
    const now = iso(this.clock.now());
    const row: DeploymentRow = {
      id: this.ids.id(),
      project_id: input.projectId,
      status: 'queued',
      source: input.source,
      image: input.image ?? null,
      branch: input.branch ?? null,
      commit_sha: input.commitSha ?? null,
      commit_message: input.commitMessage ?? null,
      error: null,
      created_at: now,
      started_at: null,
      finished_at: null,
      lease_owner: null,
      lease_until: null,
      attempts: 0,
      restart_requested_at: null,
      require_head: input.requireHead === true ? 1 : 0,
    };
    const commitSha = input.requireHead === true ? input.commitSha : undefined;
    const found = await this.store.transaction(async (tx) => {
      // Concurrent enqueues of one project queue on its row (PostgreSQL; SQLite has one writer).
      await tx.projects.lock(input.projectId, { noKey: false });
      const live = commitSha == null ? undefined : await tx.deployQueue.liveOfCommit(input.projectId, commitSha);
      if (live !== undefined) return live;
      await tx.deployQueue.supersedeQueued(input.projectId, now, `Superseded by deployment ${row.id} before it started.`);
      await tx.deployQueue.insert(row);
      return undefined;
    });
    return found === undefined ? { row, queued: true } : { row: found, queued: false };
  }

  /** The next deployment to build, now leased to `worker`; null when there is nothing to do. */
  async claim(worker: string): Promise<DeploymentRow | null> {
    const queue = this.store.repos.deployQueue;
    // A competing worker may win the guarded update; try the next candidate a few times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const candidate = await queue.nextClaimable();
      if (candidate === undefined) return null;
      const now = this.clock.now();
      const claimed = await queue.claim(candidate, worker, iso(now), iso(new Date(now.getTime() + this.leaseMs)));
      if (claimed !== undefined) return claimed;
    }
    return null;
  }

  /** Renew the lease; false when the worker no longer holds the deployment. */
  async heartbeat(id: string, worker: string): Promise<boolean> {
    const now = this.clock.now();
    return this.store.repos.deployQueue.renew(id, worker, iso(new Date(now.getTime() + this.leaseMs)));
  }

  /**
   * Move a deployment on by one event of the state machine, only from the state the event
   * applies to and only while `worker` holds it (`null`: a deployment nobody leases, such as a
   * running one being superseded or stopped). Reaching a final or running state ends the lease.
   */
  async advance(id: string, worker: string | null, event: DeploymentEvent, progress: Progress = {}): Promise<DeploymentRow | null> {
    const queue = this.store.repos.deployQueue;
    const current = await queue.byId(id);
    if (current === undefined) return null;
    const to = next(current.status, event);
    if (to === null) return null;
    const done = to !== 'building' && to !== 'deploying';
    const now = iso(this.clock.now());
    const changes = { ...progress, ...(done ? { finished_at: to === 'running' ? null : now, lease_owner: null, lease_until: null } : {}) };
    return (await queue.move(id, { from: current.status, worker }, to, changes)) ?? null;
  }

  /**
   * Fail every deployment whose worker stopped renewing its lease (a crash, a kill -9): nothing
   * stays `building` or `deploying` forever. Returns the reaped rows.
   */
  async reap(): Promise<DeploymentRow[]> {
    return this.store.repos.deployQueue.failExpired(iso(this.clock.now()), INTERRUPTED);
  }
}
