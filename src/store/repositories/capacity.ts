import { Repository } from './repository.js';

/** What a project's containers reserve: replicas × memory (GiB as stored, "0.5"), MiB. */
export const projectReservationMb = (p: { replicas: number; ram: string }): number => p.replicas * Math.ceil(Number(p.ram) * 1024);

/**
 * The memory that tenants' containers reserve on this installation (docs/operations.md "Limits"),
 * read from the store: every project and template instance with a deployment queued, under way
 * or running holds replicas × its memory; every database in a container of its own that is
 * provisioning or running holds its memory limit.
 */
export class CapacityRepository extends Repository {
  /** MiB reserved by all tenants, leaving out the resource `except` (whose new size the caller adds). */
  async reservedMemoryMb(except: string | null): Promise<number> {
    let pq = this.db
      .selectFrom('projects')
      .select(['projects.replicas', 'projects.ram'])
      .where((eb) => eb.exists(eb.selectFrom('deployments').select('deployments.id').whereRef('deployments.project_id', '=', 'projects.id').where('deployments.status', 'in', ['queued', 'building', 'deploying', 'running'])));
    let dq = this.db
      .selectFrom('databases')
      .select((eb) => eb.fn.sum<string | number | null>('memory_mb').as('mb'))
      .where('provisioner', '=', 'container')
      .where('status', 'in', ['provisioning', 'running']);
    if (except !== null) {
      pq = pq.where('projects.id', '!=', except);
      dq = dq.where('id', '!=', except);
    }
    let mb = Number((await dq.executeTakeFirst())?.mb ?? 0);
    for (const p of await pq.execute()) mb += projectReservationMb(p);
    return mb;
  }
}
