import type { Generated, Selectable } from 'kysely';
import type { DeploymentRecord } from '../../domain/deployment.js';

export type { DeploymentSource, DeploymentStatus } from '../../domain/deployment.js';

/** The deployment record; the columns with a default are filled in by the store when left out. */
export interface DeploymentsTable extends Omit<DeploymentRecord, 'attempts' | 'restart_requested_at' | 'require_head'> {
  attempts: Generated<number>;
  restart_requested_at: Generated<string | null>;
  require_head: Generated<number>;
}

/** A deployment as read from the store. */
export type DeploymentRow = Selectable<DeploymentsTable>;

export interface DeploymentLogsTable {
  deployment_id: string;
  /** 1, 2, 3… per deployment: the order lines are replayed in */
  seq: number;
  at: string;
  line: string;
}

/** A named lease: `holder` does the lease's work until `expires_at` unless it renews it. */
export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: string;
  /** when the current holder took the lease; renewals keep it */
  acquired_at: string;
}

export interface DeploymentsTables {
  deployments: DeploymentsTable;
  deployment_logs: DeploymentLogsTable;
  leases: LeasesTable;
}
