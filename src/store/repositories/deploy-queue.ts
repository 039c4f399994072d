import { LEASED, LIVE, type DeploymentStatus } from '../../domain/deployment.js';
import type { DeploymentRow } from '../tables/deployments.js';
import { Repository } from './repository.js';

/** What a move along the state machine writes besides the status. */
export type DeploymentChanges = Partial<Pick<DeploymentRow, 'image' | 'commit_sha' | 'commit_message' | 'error' | 'finished_at' | 'lease_owner' | 'lease_until'>>;

/**
 * The deploy queue's statements (the queue is the deployments table itself). Every change is a
 * guarded update: it applies only from the state (and the lease holder) the caller read, so of
 * two racing writers exactly one wins, on either store.
 */
export class DeployQueueRepository extends Repository {
  /**
   * Inside a transaction (DeployQueue.enqueue): the queued deployments of the project become
   * superseded, with `error` saying by what.
   */
  async supersedeQueued(projectId: string, at: string, error: string): Promise<void> {
    await this.db.updateTable('deployments').set({ status: 'superseded', finished_at: at, error }).where('project_id', '=', projectId).where('status', '=', 'queued').execute();
  }

  /** The project's newest Git deployment of `commitSha` that is queued, under way or running. */
  async liveOfCommit(projectId: string, commitSha: string): Promise<DeploymentRow | undefined> {
    return this.db
      .selectFrom('deployments')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('source', '=', 'git')
      .where('commit_sha', '=', commitSha)
      .where('status', 'in', LIVE)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  }

  async insert(row: DeploymentRow): Promise<void> {
    await this.db.insertInto('deployments').values(row).execute();
  }

  /** The oldest queued deployment of a project that has nothing building or deploying. */
  async nextClaimable(): Promise<string | undefined> {
    const candidate = await this.db
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
    return candidate?.id;
  }

  /**
   * Queued to building, leased to `worker` until `leaseUntil`: one guarded statement, so of
   * concurrent claimers of one deployment only one gets it back (the others get undefined).
   */
  claim(id: string, worker: string, at: string, leaseUntil: string): Promise<DeploymentRow | undefined> {
    return this.db
      .updateTable('deployments')
      .set((eb) => ({ status: 'building', started_at: at, lease_owner: worker, lease_until: leaseUntil, attempts: eb('attempts', '+', 1) }))
      .where('id', '=', id)
      .where('status', '=', 'queued')
      .returningAll()
      .executeTakeFirst();
  }

  /** Extends the lease; false when `worker` no longer holds the deployment. */
  async renew(id: string, worker: string, leaseUntil: string): Promise<boolean> {
    const r = await this.db
      .updateTable('deployments')
      .set({ lease_until: leaseUntil })
      .where('id', '=', id)
      .where('lease_owner', '=', worker)
      .where('status', 'in', LEASED)
      .executeTakeFirst();
    return r.numUpdatedRows === 1n;
  }

  byId(id: string): Promise<DeploymentRow | undefined> {
    return this.db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * `from` to `to`, only while the deployment is still in `from` and held by `worker` (null: by
   * nobody); undefined when another writer got there first.
   */
  move(id: string, guard: { from: DeploymentStatus; worker: string | null }, to: DeploymentStatus, changes: DeploymentChanges): Promise<DeploymentRow | undefined> {
    return this.db
      .updateTable('deployments')
      .set({ ...changes, status: to })
      .where('id', '=', id)
      .where('status', '=', guard.from)
      .where('lease_owner', guard.worker === null ? 'is' : '=', guard.worker)
      .returningAll()
      .executeTakeFirst();
  }

  /** Fails, with `error`, every building or deploying deployment whose lease ran out before `now`. */
  failExpired(now: string, error: string): Promise<DeploymentRow[]> {
    return this.db
      .updateTable('deployments')
      .set({ status: 'failed', error, finished_at: now, lease_owner: null, lease_until: null })
      .where('status', 'in', LEASED)
      .where('lease_until', '<', now)
      .returningAll()
      .execute();
  }

  /** Fails, with `error`, every building or deploying deployment, leased or not (nothing else can be running them). */
  failAllLeased(now: string, error: string): Promise<Pick<DeploymentRow, 'id' | 'project_id'>[]> {
    return this.db
      .updateTable('deployments')
      .set({ status: 'failed', error, finished_at: now, lease_owner: null, lease_until: null })
      .where('status', 'in', LEASED)
      .returning(['id', 'project_id'])
      .execute();
  }
}
