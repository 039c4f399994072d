import type { Generated, Selectable } from 'kysely';
import type { Role } from '../domain/roles.js';

/**
 * The tables as the query layer sees them. Ids are UUIDv7 text, timestamps RFC 3339 text
 * (sortable, and identical on SQLite and PostgreSQL), booleans 0/1 integers, JSON as text:
 * one representation on both dialects keeps the repositories free of per-dialect branches.
 */
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  created_at: string;
}

export interface WorkspacesTable {
  id: string;
  name: string;
  slug: string;
  /** JSON text of WorkspaceSettings */
  settings: string;
  created_at: string;
  updated_at: string;
}

export interface MembersTable {
  workspace_id: string;
  user_id: string;
  role: Role;
  joined_at: string;
}

export interface InvitationsTable {
  id: string;
  workspace_id: string;
  email: string;
  role: Role;
  token_hash: string;
  status: 'pending' | 'accepted';
  invited_by: string | null;
  expires_at: string;
  created_at: string;
  accepted_at: string | null;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  workspace_id: string;
  name: string;
  key_hash: string;
  key_prefix: string;
  expires_at: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export type ProjectStatus = 'pending' | 'building' | 'deploying' | 'running' | 'stopped' | 'failed' | 'crashed' | 'suspended';

export interface ProjectsTable {
  id: string;
  workspace_id: string;
  name: string;
  slug: string;
  port: number;
  replicas: number;
  /** vCPU as a decimal string, e.g. "0.5" */
  cpu: string;
  /** GiB as a decimal string, e.g. "0.5" */
  ram: string;
  status: ProjectStatus;
  created_at: string;
  updated_at: string;
}

export interface GitConnectionsTable {
  project_id: string;
  repo_full_name: string;
  branch: string;
  /** bigint: pg returns it as a string */
  installation_id: string | number;
  auto_deploy: number;
  dockerfile_path: string;
  root_dir: string;
  created_at: string;
  updated_at: string;
}

export interface EnvVarsTable {
  id: string;
  project_id: string;
  key: string;
  /** plaintext, or the sealed form when is_secret = 1 */
  value: string;
  is_secret: number;
  created_at: string;
  updated_at: string;
}

export interface DomainsTable {
  id: string;
  project_id: string;
  domain: string;
  verified: number;
  created_at: string;
}

export type UptimeStatus = 'unknown' | 'up' | 'down' | 'paused';

export interface UptimeMonitorsTable {
  project_id: string;
  enabled: number;
  check_interval_sec: number;
  check_path: string;
  /** sealed */
  chat_webhook_url: string | null;
  notify_email: string | null;
  status: UptimeStatus;
  last_checked_at: string | null;
  last_response_ms: number | null;
  updated_at: string;
}

export type DeploymentStatus = 'queued' | 'building' | 'deploying' | 'running' | 'failed' | 'superseded' | 'stopped';
export type DeploymentSource = 'git' | 'redeploy' | 'rollback' | 'template';

export interface DeploymentsTable {
  id: string;
  project_id: string;
  status: DeploymentStatus;
  source: DeploymentSource;
  image: string | null;
  branch: string | null;
  commit_sha: string | null;
  commit_message: string | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** the worker that holds this deployment while it is building or deploying */
  lease_owner: string | null;
  lease_until: string | null;
  attempts: Generated<number>;
  /** a rolling restart asked of a standby, for the deploy engine's reconciler to run */
  restart_requested_at: Generated<string | null>;
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

export interface WalletsTable {
  workspace_id: string;
  /** minor units; bigint (string from pg) */
  balance: string | number;
  currency: string;
  alert_threshold: string | number;
  created_at: string;
  updated_at: string;
}

export type TransactionType = 'topup' | 'usage' | 'refund' | 'adjustment';

export interface WalletTransactionsTable {
  id: string;
  workspace_id: string;
  type: TransactionType;
  amount: string | number;
  balance_after: string | number;
  description: string;
  created_at: string;
}

export interface DB {
  users: UsersTable;
  workspaces: WorkspacesTable;
  members: MembersTable;
  invitations: InvitationsTable;
  api_keys: ApiKeysTable;
  projects: ProjectsTable;
  git_connections: GitConnectionsTable;
  env_vars: EnvVarsTable;
  domains: DomainsTable;
  uptime_monitors: UptimeMonitorsTable;
  deployments: DeploymentsTable;
  wallets: WalletsTable;
  wallet_transactions: WalletTransactionsTable;
  deployment_logs: DeploymentLogsTable;
  meta: MetaTable;
  leases: LeasesTable;
}

export interface MetaTable {
  key: string;
  value: string;
}

/** A named lease: `holder` does the lease's work until `expires_at` unless it renews it. */
export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: string;
  /** when the current holder took the lease; renewals keep it */
  acquired_at: string;
}
