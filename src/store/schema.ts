import type { Generated, Selectable } from 'kysely';
import type { DeploymentRecord } from '../domain/deployment.js';
import type { ProjectRecord } from '../domain/project.js';
import type { Role } from '../domain/roles.js';
import type { UptimeStatus } from '../domain/uptime.js';

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
  /**
   * When the address was proven (an e-mailed invitation redeemed) or the operator vouched for it
   * (bootstrap, `slipway admin create-user`, `slipway admin verify-user`); null: unverified, a
   * user made from a token handed back in an API response (no starting credit, no workspace of
   * their own).
   */
  verified_at: string | null;
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

/** Who created a workspace through the API (`--max-workspaces-per-user` counts these). */
export interface WorkspaceCreatorsTable {
  workspace_id: string;
  user_id: string;
  created_at: string;
}

/** `pending`: offered through `POST …/members`, not yet accepted by the user; it grants nothing. */
export type MemberStatus = 'active' | 'pending';

export interface MembersTable {
  workspace_id: string;
  user_id: string;
  role: Role;
  /** `active` by default in the store */
  status: Generated<MemberStatus>;
  /** when the user joined (accepted); for a pending membership, when it was offered */
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
  /** 1: the token travelled only by e-mail, so redeeming it proves the address; 0: handed back in the response */
  emailed: Generated<number>;
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

export type { ProjectStatus } from '../domain/project.js';

/** The store keeps a project's record as the domain describes it (kind and the template fields have defaults). */
export interface ProjectsTable extends Omit<ProjectRecord, 'kind' | 'template_name' | 'volumes' | 'command' | 'health_path'> {
  kind: Generated<ProjectRecord['kind']>;
  template_name: Generated<string | null>;
  volumes: Generated<string | null>;
  command: Generated<string | null>;
  health_path: Generated<string | null>;
}

export type ProjectRow = Selectable<ProjectsTable>;

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
  /** the random id in the connection's delivery URL, /api/webhooks/github/<webhook_id> (hex) */
  webhook_id: string | null;
  /** sealed (context `git-webhook:<project_id>:<webhook_id>`); null: not made yet (connections older than per-connection secrets) */
  webhook_secret: string | null;
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
  /** 1: ownership proven (DNS TXT record, the name resolving here, or --domain-verification off); only these are routed */
  verified: number;
  /** the TXT record `_slipway-challenge.<domain>` proves ownership with `slipway-verify=<token>` */
  verification_token: string;
  verified_at: string | null;
  created_at: string;
}

export type { UptimeStatus } from '../domain/uptime.js';

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
  /** consecutive failed checks (counted ones: not during the project's own rollouts) */
  failures: number;
  /** consecutive successful checks */
  successes: number;
  /** the open incident while down */
  incident_id: string | null;
  /** why the last failed check failed */
  last_error: string | null;
}

export interface UptimeChecksTable {
  project_id: string;
  at: string;
  ok: number;
  status_code: number | null;
  response_ms: number | null;
  error: string | null;
}

/** A project's checks of one hour: counts, the sum of response times and their histogram (JSON array of counts per UPTIME_BUCKETS_MS). */
export interface UptimeRollupsTable {
  project_id: string;
  hour: string;
  checks: number;
  failures: number;
  sum_ms: string | number;
  histogram: string;
}

/** A project's (or database's) resource use in one minute: averages of its samples, bytes moved. */
export interface ResourceMetricsTable {
  resource_id: string;
  /** RFC 3339 start of the minute */
  minute: string;
  cpu_millicores: number;
  memory_bytes: string | number;
  memory_limit_bytes: string | number | null;
  rx_bytes: string | number;
  tx_bytes: string | number;
  samples: number;
}

export interface UptimeIncidentsTable {
  id: string;
  project_id: string;
  started_at: string;
  ended_at: string | null;
  cause: string;
}

/** One delivery of one transition (or test) to one channel. */
export interface UptimeNotificationsTable {
  id: string;
  project_id: string;
  /** down | up | test | crash */
  event: string;
  /** what the delivery is for, unique per channel: `down:<incident>`, `up:<incident>`, `test:<id>`, `crash:<kind>:<deployment>` */
  transition: string;
  /** webhook | email */
  channel: string;
  /** what a crash alert says happened; null for the others (their incident says it) */
  cause: string | null;
  /** pending (the notifier's queue) | sending (a test, delivered by the request) | sent | failed */
  status: string;
  attempts: number;
  response_status: number | null;
  error: string | null;
  created_at: string;
  sent_at: string | null;
}

export type { DeploymentSource, DeploymentStatus } from '../domain/deployment.js';

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

export interface WalletsTable {
  workspace_id: string;
  /** micro-units of the currency (1 USD = 1,000,000); bigint (string from pg) */
  balance_micros: string | number;
  currency: string;
  /** minor units */
  alert_threshold: string | number;
  /** when the available balance reached 0; null while it is above */
  empty_since: string | null;
  /** comma-separated notices already sent for the current crossing: below, empty, suspended */
  alerts_sent: string;
  created_at: string;
  updated_at: string;
}

/** grant: credit the operator granted (`slipway admin grant-credit`), apart from payments */
export type TransactionType = 'topup' | 'usage' | 'refund' | 'adjustment' | 'grant';

export interface WalletTransactionsTable {
  id: string;
  workspace_id: string;
  type: TransactionType;
  /** micro-units, signed */
  amount_micros: string | number;
  balance_after_micros: string | number;
  description: string;
  /** what caused it, unique per workspace: `payment:<id>`, `usage:<hour>`; null: nothing to dedupe */
  reference: string | null;
  created_at: string;
}

/** A running resource's meter: minutes before `next_minute` (epoch minutes) are metered. */
export interface BillingMetersTable {
  resource_id: string;
  workspace_id: string;
  next_minute: string | number;
  /** what is below one micro-unit, in 1/1,024,000,000 of a micro-unit, carried to the next minutes */
  carry: string | number;
  /** 1: it ran when last metered (the minutes since are charged); 0: it did not (only the current minute is, once it runs again) */
  running: number;
}

/** Metered usage of one resource: per open hour (accruals) or per posted month (usage). */
export interface UsageColumns {
  workspace_id: string;
  resource_id: string;
  /** project | template | database */
  resource_kind: string;
  resource_name: string;
  minutes: string | number;
  /** replicas × millicores × minutes */
  vcpu_milli_minutes: string | number;
  /** replicas × milli-GiB × minutes */
  ram_milli_minutes: string | number;
  /** a database's memory, MiB × minutes */
  db_mib_minutes: string | number;
  amount_micros: string | number;
}

export interface BillingAccrualsTable extends UsageColumns {
  /** RFC 3339 start of the hour */
  hour: string;
}

export interface BillingUsageTable extends UsageColumns {
  /** YYYY-MM (UTC) */
  period: string;
}

export type PaymentStatus = 'pending' | 'succeeded' | 'failed';

export interface PaymentsTable {
  id: string;
  workspace_id: string;
  /** gatewaya | gatewayb */
  gateway: string;
  /** stripe | paystack | sandbox */
  provider: string;
  /** the gateway's id of the payment; null until the gateway answered */
  reference: string | null;
  /** minor units */
  amount: string | number;
  currency: string;
  status: PaymentStatus;
  checkout_url: string | null;
  failure_reason: string | null;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
}

/** A gateway event acted on; a replay of the same id is not. */
export interface PaymentEventsTable {
  gateway: string;
  event_id: string;
  payment_id: string | null;
  /** credited | failed | ignored | duplicate | mismatch | unknown */
  outcome: string;
  received_at: string;
}

/** A user whose first workspace got the starting credit. */
export interface StartingCreditsTable {
  user_id: string;
  workspace_id: string | null;
  granted_at: string;
}

export interface DB {
  users: UsersTable;
  workspaces: WorkspacesTable;
  members: MembersTable;
  workspace_creators: WorkspaceCreatorsTable;
  invitations: InvitationsTable;
  api_keys: ApiKeysTable;
  projects: ProjectsTable;
  git_connections: GitConnectionsTable;
  env_vars: EnvVarsTable;
  domains: DomainsTable;
  uptime_monitors: UptimeMonitorsTable;
  uptime_checks: UptimeChecksTable;
  uptime_rollups: UptimeRollupsTable;
  uptime_incidents: UptimeIncidentsTable;
  uptime_notifications: UptimeNotificationsTable;
  resource_metrics: ResourceMetricsTable;
  deployments: DeploymentsTable;
  wallets: WalletsTable;
  wallet_transactions: WalletTransactionsTable;
  billing_meters: BillingMetersTable;
  billing_accruals: BillingAccrualsTable;
  billing_usage: BillingUsageTable;
  payments: PaymentsTable;
  payment_events: PaymentEventsTable;
  starting_credits: StartingCreditsTable;
  deployment_logs: DeploymentLogsTable;
  meta: MetaTable;
  leases: LeasesTable;
  github_installations: GitHubInstallationsTable;
  github_link_states: GitHubLinkStatesTable;
  webhook_deliveries: WebhookDeliveriesTable;
  databases: DatabasesTable;
  database_events: DatabaseEventsTable;
}

/** A GitHub delivery acted on: a second one with the same id, or the same body, to one receiver is not. */
export interface WebhookDeliveriesTable {
  /** `app` (POST /api/webhooks/github) or a Git connection's webhook_id */
  receiver: string;
  /** X-GitHub-Delivery */
  delivery_id: string;
  /** SHA-256 of the raw body, hex */
  payload_digest: string;
  received_at: string;
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

/** A GitHub App installation linked to a workspace (its Git connections may use it). */
export interface GitHubInstallationsTable {
  workspace_id: string;
  /** bigint (string from pg) */
  installation_id: string | number;
  /** the account the app is installed on */
  account_login: string;
  /** the user who proved control of the installation */
  linked_by: string | null;
  created_at: string;
}

/** An unused `state` of the installation link flow (single-use: deleted when redeemed). */
export interface GitHubLinkStatesTable {
  nonce: string;
  workspace_id: string;
  user_id: string;
  expires_at: string;
}

/** A managed database (docs/databases.md). */
export interface DatabasesTable {
  id: string;
  workspace_id: string;
  name: string;
  slug: string;
  /** postgresql | mysql | redis | mongo */
  type: string;
  /** container (a server of its own) | shared (a database and a user on the operator's server) */
  provisioner: string;
  /** provisioning | running | failed | deleting */
  status: string;
  /** why it failed, readable; null otherwise */
  error: string | null;
  /** the image its container runs (container provisioner), once chosen */
  image: string | null;
  /** where apps on the workspace network reach it */
  host: string;
  port: number;
  /** where the host reaches it (published port); null when not published */
  external_host: string | null;
  external_port: number | null;
  username: string;
  /** sealed with the secret key (context `database:<id>`) */
  password: string;
  database_name: string;
  memory_mb: number;
  /** the template instance that provisioned it (it goes with the instance); null when made on its own */
  owner_project_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface DatabaseEventsTable {
  id: string;
  database_id: string;
  at: string;
  message: string;
}
