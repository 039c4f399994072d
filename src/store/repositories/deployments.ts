import { ACTIVE, LEASED, LIVE, type DeploymentStatus } from '../../domain/deployment.js';
import { toNumber } from '../dialects.js';
import type { DeploymentRow } from '../tables/deployments.js';
import { Repository } from './repository.js';

/** A deployment the router may have to serve, with its project's default host label. */
export interface RoutableDeployment {
  id: string;
  project_id: string;
  status: DeploymentStatus;
  created_at: string;
  host_label: string;
}

/**
 * Deployments as the project views, the project status and the deploy engine read them, and the
 * changes the engine makes outside the queue (DeployQueueRepository holds the queue's own).
 */
export class DeploymentRepository extends Repository {
  /** The deployment `id` of the project. */
  find(projectId: string, id: string): Promise<DeploymentRow | undefined> {
    return this.db.selectFrom('deployments').selectAll().where('project_id', '=', projectId).where('id', '=', id).executeTakeFirst();
  }

  /** The project and workspace a deployment belongs to (undefined once it is gone). */
  owner(id: string): Promise<{ project_id: string; workspace_id: string } | undefined> {
    return this.db
      .selectFrom('deployments')
      .innerJoin('projects', 'projects.id', 'deployments.project_id')
      .select(['deployments.project_id', 'projects.workspace_id'])
      .where('deployments.id', '=', id)
      .executeTakeFirst();
  }

  /** One page of the project's deployments, newest first. */
  page(projectId: string, limit: number, offset: number): Promise<DeploymentRow[]> {
    return this.newestFirst(projectId).limit(limit).offset(offset).execute();
  }

  async count(projectId: string): Promise<number> {
    const { n } = await this.db.selectFrom('deployments').select((eb) => eb.fn.countAll<string | number>().as('n')).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return toNumber(n);
  }

  /** The project's newest deployment, whatever its status. */
  latest(projectId: string): Promise<DeploymentRow | undefined> {
    return this.newestFirst(projectId).limit(1).executeTakeFirst();
  }

  private newestFirst(projectId: string) {
    return this.db.selectFrom('deployments').selectAll().where('project_id', '=', projectId).orderBy('created_at', 'desc').orderBy('id', 'desc');
  }

  /** The deployment a project serves: its newest `running` one (two overlap only during a switch). */
  serving(projectId: string): Promise<DeploymentRow | undefined> {
    return this.db
      .selectFrom('deployments')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('status', '=', 'running')
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
  }

  /** Every `running` deployment of the project (more than one only during a switch), in no particular order. */
  running(projectId: string): Promise<DeploymentRow[]> {
    return this.db.selectFrom('deployments').selectAll().where('project_id', '=', projectId).where('status', '=', 'running').execute();
  }

  /** Whether any deployment of the project is `running`. */
  async anyRunning(projectId: string): Promise<boolean> {
    const running = await this.db.selectFrom('deployments').select('id').where('project_id', '=', projectId).where('status', '=', 'running').limit(1).executeTakeFirst();
    return running !== undefined;
  }

  /** Whether a deployment of the project is queued, building or deploying. */
  async anyActive(projectId: string): Promise<boolean> {
    const active = await this.db.selectFrom('deployments').select('status').where('project_id', '=', projectId).where('status', 'in', ACTIVE).executeTakeFirst();
    return active !== undefined;
  }

  /** The status of the project's newest deployment (by `order`) among `statuses`, or null. */
  async newestStatus(projectId: string, statuses: readonly DeploymentStatus[], order: 'created_at' | 'finished_at'): Promise<DeploymentStatus | null> {
    const row = await this.db
      .selectFrom('deployments')
      .select('status')
      .where('project_id', '=', projectId)
      .where('status', 'in', statuses)
      .orderBy(order, 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.status ?? null;
  }

  /** Every deployment that owns containers: building, deploying or running, in no particular order. */
  withContainers(): Promise<Pick<DeploymentRow, 'id' | 'project_id' | 'status'>[]> {
    return this.db.selectFrom('deployments').select(['id', 'project_id', 'status']).where('status', 'in', [...LEASED, 'running']).execute();
  }

  /** Every running or deploying (switching) deployment with its project's host label, newest first. */
  routable(): Promise<RoutableDeployment[]> {
    return this.db
      .selectFrom('deployments')
      .innerJoin('projects', 'projects.id', 'deployments.project_id')
      .select(['deployments.id', 'deployments.project_id', 'deployments.status', 'deployments.created_at', 'projects.host_label'])
      .where('deployments.status', 'in', ['running', 'deploying'])
      .orderBy('deployments.created_at', 'desc')
      .execute();
  }

  /** A rolling restart of a running deployment, for the engine's next reconciler pass. */
  async requestRestart(id: string, at: string): Promise<void> {
    await this.db.updateTable('deployments').set({ restart_requested_at: at }).where('id', '=', id).where('status', '=', 'running').execute();
  }

  /** The running deployments with a restart request. */
  restartRequested(): Promise<DeploymentRow[]> {
    return this.db.selectFrom('deployments').selectAll().where('status', '=', 'running').where('restart_requested_at', 'is not', null).execute();
  }

  /** Clears the request made at `requestedAt`: true for the one caller that gets to run it. */
  async takeRestartRequest(id: string, requestedAt: string | null): Promise<boolean> {
    const taken = await this.db.updateTable('deployments').set({ restart_requested_at: null }).where('id', '=', id).where('restart_requested_at', '=', requestedAt).executeTakeFirst();
    return Number(taken.numUpdatedRows) > 0;
  }

  /** Every deployment that names an image, newest first. */
  withImages(): Promise<Pick<DeploymentRow, 'project_id' | 'image' | 'status'>[]> {
    return this.db.selectFrom('deployments').select(['project_id', 'image', 'status']).where('image', 'is not', null).orderBy('created_at', 'desc').execute();
  }

  /** The projects with a deployment queued, building or deploying. */
  async projectsInProgress(): Promise<Set<string>> {
    return new Set((await this.db.selectFrom('deployments').select('project_id').where('status', 'in', ACTIVE).execute()).map((r) => r.project_id));
  }

  /** The images were removed: deployments that are over show no image from now on. */
  async forgetImages(images: readonly string[]): Promise<void> {
    if (images.length === 0) return;
    await this.db.updateTable('deployments').set({ image: null }).where('image', 'in', images).where('status', 'not in', LIVE).execute();
  }
}
