import type { Kysely } from 'kysely';
import { iso } from '../domain/clock.js';
import { LEASED, next, type DeploymentEvent } from '../domain/deployment.js';
import type { Deps } from '../deps.js';
import { lockClause } from '../store/dialects.js';
import type { DB, DeploymentRow, DeploymentSource } from '../store/schema.js';

export interface EnqueueInput {
  projectId: string;
  source: DeploymentSource;
  image?: string | null;
  branch?: string | null;
  commitSha?: string | null;
  commitMessage?: string | null;
  /** a push webhook's deployment: built only if commitSha is still the branch's head */
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
    private readonly deps: Deps,
    private readonly leaseMs: number,
  ) {}

  /**
   * A new queued deployment. An older deployment of the project still waiting in the queue is
   * superseded in the same transaction: only the newest request is worth building.
   */
  async enqueue(input: EnqueueInput): Promise<DeploymentRow> {
    const now = iso(this.deps.clock.now());
    const row: DeploymentRow = {
      id: this.deps.ids.id(),
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
    await this.deps.store.db.transaction().execute(async (trx) => {
      // Concurrent enqueues of one project queue on its row (PostgreSQL; SQLite has one writer).
      await trx
        .selectFrom('projects')
        .select('id')
        .where('id', '=', input.projectId)
        .$if(lockClause(this.deps.store.dialect), (q) => q.forUpdate())
        .execute();
      await trx
        .updateTable('deployments')
        .set({ status: 'superseded', finished_at: now, error: `Superseded by deployment ${row.id} before it started.` })
        .where('project_id', '=', input.projectId)
        .where('status', '=', 'queued')
        .execute();
      await trx.insertInto('deployments').values(row).execute();
    });
    return row;
  }

  /** The next deployment to build, now leased to `worker`; null when there is nothing to do. */
  async claim(worker: string): Promise<DeploymentRow | null> {
    const { db } = this.deps.store;
    // A competing worker may win the guarded update; try the next candidate a few times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const candidate = await db
        .selectFrom('deployments as d')
        .select('d.id')
        .where('d.status', '=', 'queued')
        .where((eb) =>
          eb.not(
            eb.exists(
              eb
                .selectFrom('deployments as x')
                .select('x.id')
                .whereRef('x.project_id', '=', 'd.project_id')
                .where('x.status', 'in', LEASED),
            ),
          ),
        )
        .orderBy('d.created_at')
        .orderBy('d.id')
        .limit(1)
        .executeTakeFirst();
      if (candidate === undefined) return null;
      const now = this.deps.clock.now();
      const claimed = await db
        .updateTable('deployments')
        .set((eb) => ({
          status: 'building',
          started_at: iso(now),
          lease_owner: worker,
          lease_until: iso(new Date(now.getTime() + this.leaseMs)),
          attempts: eb('attempts', '+', 1),
        }))
        .where('id', '=', candidate.id)
        .where('status', '=', 'queued')
        .returningAll()
        .executeTakeFirst();
      if (claimed !== undefined) return claimed;
    }
    return null;
  }

  /** Renew the lease; false when the worker no longer holds the deployment. */
  async heartbeat(id: string, worker: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const r = await this.deps.store.db
      .updateTable('deployments')
      .set({ lease_until: iso(new Date(now.getTime() + this.leaseMs)) })
      .where('id', '=', id)
      .where('lease_owner', '=', worker)
      .where('status', 'in', LEASED)
      .executeTakeFirst();
    return r.numUpdatedRows === 1n;
  }

  /**
   * Move a deployment on by one event of the state machine, only from the state the event
   * applies to and only while `worker` holds it (`null`: a deployment nobody leases, such as a
   * running one being superseded or stopped). Reaching a final or running state ends the lease.
   */
  async advance(id: string, worker: string | null, event: DeploymentEvent, progress: Progress = {}, db: Kysely<DB> = this.deps.store.db): Promise<DeploymentRow | null> {
    const current = await db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst();
    if (current === undefined) return null;
    const to = next(current.status, event);
    if (to === null) return null;
    const done = to !== 'building' && to !== 'deploying';
    const now = iso(this.deps.clock.now());
    return (
      (await db
        .updateTable('deployments')
        .set({
          ...progress,
          status: to,
          ...(done ? { finished_at: to === 'running' ? null : now, lease_owner: null, lease_until: null } : {}),
        })
        .where('id', '=', id)
        .where('status', '=', current.status)
        .where('lease_owner', worker === null ? 'is' : '=', worker)
        .returningAll()
        .executeTakeFirst()) ?? null
    );
  }

  /**
   * Fail every deployment whose worker stopped renewing its lease (a crash, a kill -9): nothing
   * stays `building` or `deploying` forever. Returns the reaped rows.
   */
  async reap(): Promise<DeploymentRow[]> {
    const now = iso(this.deps.clock.now());
    return this.deps.store.db
      .updateTable('deployments')
      .set({ status: 'failed', error: INTERRUPTED, finished_at: now, lease_owner: null, lease_until: null })
      .where('status', 'in', LEASED)
      .where('lease_until', '<', now)
      .returningAll()
      .execute();
  }
}
