import type { Kysely } from 'kysely';
import type { Dialect } from '../dialects.js';
import type { AccessCache } from './access-cache.js';
import type { DB } from '../schema.js';
import { ApiKeyRepository } from './api-keys.js';
import { BackupRepository } from './backups.js';
import { BillingRepository } from './billing.js';
import { BuildLogRepository } from './build-logs.js';
import { CapacityRepository } from './capacity.js';
import { DatabaseRepository } from './databases.js';
import { DeployQueueRepository } from './deploy-queue.js';
import { DeploymentRepository } from './deployments.js';
import { DomainRepository } from './domains.js';
import { EnvRepository } from './env.js';
import { GitConnectionRepository } from './git-connections.js';
import { InstallationRepository } from './installations.js';
import { InvitationRepository } from './invitations.js';
import { LeaseRepository } from './leases.js';
import { MemberRepository } from './members.js';
import { MetaRepository } from './meta.js';
import { MetricsRepository } from './metrics.js';
import { PaymentRepository } from './payments.js';
import { ProjectRepository } from './projects.js';
import { UptimeRepository } from './uptime.js';
import { UserRepository } from './users.js';
import { WalletRepository } from './wallets.js';
import { WebhookDeliveryRepository } from './webhook-deliveries.js';
import { WorkspaceRepository } from './workspaces.js';

/** Every query Slipway makes, by aggregate (the log store's PostgreSQL driver aside: src/modules/logs). */
export interface Repositories {
  users: UserRepository;
  workspaces: WorkspaceRepository;
  members: MemberRepository;
  invitations: InvitationRepository;
  apiKeys: ApiKeyRepository;
  projects: ProjectRepository;
  gitConnections: GitConnectionRepository;
  deployments: DeploymentRepository;
  deployQueue: DeployQueueRepository;
  buildLogs: BuildLogRepository;
  leases: LeaseRepository;
  webhookDeliveries: WebhookDeliveryRepository;
  env: EnvRepository;
  domains: DomainRepository;
  wallets: WalletRepository;
  billing: BillingRepository;
  capacity: CapacityRepository;
  payments: PaymentRepository;
  installations: InstallationRepository;
  uptime: UptimeRepository;
  databases: DatabaseRepository;
  backups: BackupRepository;
  meta: MetaRepository;
  metrics: MetricsRepository;
}

/** The repositories over `db`: the store's Kysely instance, or one of its transactions; `cache`: the store's. */
export function repositories(db: Kysely<DB>, dialect: Dialect, cache: AccessCache): Repositories {
  return {
    users: new UserRepository(db, dialect, cache),
    workspaces: new WorkspaceRepository(db, dialect, cache),
    members: new MemberRepository(db, dialect, cache),
    invitations: new InvitationRepository(db, dialect, cache),
    apiKeys: new ApiKeyRepository(db, dialect, cache),
    projects: new ProjectRepository(db, dialect, cache),
    gitConnections: new GitConnectionRepository(db, dialect, cache),
    deployments: new DeploymentRepository(db, dialect, cache),
    deployQueue: new DeployQueueRepository(db, dialect, cache),
    buildLogs: new BuildLogRepository(db, dialect, cache),
    leases: new LeaseRepository(db, dialect, cache),
    webhookDeliveries: new WebhookDeliveryRepository(db, dialect, cache),
    env: new EnvRepository(db, dialect, cache),
    domains: new DomainRepository(db, dialect, cache),
    wallets: new WalletRepository(db, dialect, cache),
    billing: new BillingRepository(db, dialect, cache),
    capacity: new CapacityRepository(db, dialect, cache),
    payments: new PaymentRepository(db, dialect, cache),
    installations: new InstallationRepository(db, dialect, cache),
    uptime: new UptimeRepository(db, dialect, cache),
    databases: new DatabaseRepository(db, dialect, cache),
    backups: new BackupRepository(db, dialect, cache),
    meta: new MetaRepository(db, dialect, cache),
    metrics: new MetricsRepository(db, dialect, cache),
  };
}

export type { ApiKeyRow, KeyWithUser } from './api-keys.js';
export type { BuildLogLine } from './build-logs.js';
export type { DeploymentChanges } from './deploy-queue.js';
export type { DeploymentRow } from '../schema.js';
export type { RoutableDeployment } from './deployments.js';
export type { DatabaseEventRow, DatabaseRow } from './databases.js';
export type { BackupDestinationRow, BackupPolicyRow, BackupRow, RestoreRow } from './backups.js';
export type { DomainRow } from './domains.js';
export type { EnvVarRow } from './env.js';
export type { GitConnectionChanges, GitConnectionRow } from './git-connections.js';
export type { InstallationRow } from './installations.js';
export type { InvitationRow } from './invitations.js';
export type { MemberDetail } from './members.js';
export type { ProjectRow } from './projects.js';
export type { MonitorState, MonitorTarget, Rollup, UptimeCheckRow, UptimeIncidentRow, UptimeMonitorRow, UptimeNotificationRow } from './uptime.js';
export type { UserRow } from './users.js';
export type { LedgerEntry, LedgerRow, Wallet } from './wallets.js';
export type { Meter, RunningResource, Usage } from './billing.js';
export type { PaymentRow } from './payments.js';
export type { MetricsMinute } from './metrics.js';
export type { NewWorkspace, WorkspaceAccess, WorkspaceRow } from './workspaces.js';
