import type { DeploymentLogsTable } from '../tables/deployments.js';
import { Repository } from './repository.js';

export type BuildLogLine = DeploymentLogsTable;

/** The build lines of deployments, numbered 1, 2, 3… per deployment (src/modules/deployments/build-log.ts). */
export class BuildLogRepository extends Repository {
  /** Fails with the store's unique violation for a sequence number the deployment has already. */
  async append(lines: readonly BuildLogLine[]): Promise<void> {
    if (lines.length === 0) return;
    await this.db.insertInto('deployment_logs').values([...lines]).execute();
  }

  /** At most `limit` lines of the deployment after `afterSeq`, in order. */
  after(deploymentId: string, afterSeq: number, limit: number): Promise<Pick<BuildLogLine, 'seq' | 'line'>[]> {
    return this.db
      .selectFrom('deployment_logs')
      .select(['seq', 'line'])
      .where('deployment_id', '=', deploymentId)
      .where('seq', '>', afterSeq)
      .orderBy('seq')
      .limit(limit)
      .execute();
  }

  /** The deployment's highest sequence number; 0 before its first line. */
  async lastSeq(deploymentId: string): Promise<number> {
    const last = await this.db
      .selectFrom('deployment_logs')
      .select((eb) => eb.fn.max<number | string | null>('seq').as('max'))
      .where('deployment_id', '=', deploymentId)
      .executeTakeFirst();
    return Number(last?.max ?? 0);
  }
}
