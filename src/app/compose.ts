import type { Parts } from './adapters.js';
import { Late } from '../domain/late.js';
import type { Engine } from '../domain/ports.js';
import { BackupService, idleBackupWork, type BackupWork } from '../modules/backups/backups.service.js';
import { Destinations, LocalDestination } from '../modules/backups/destinations.js';
import { DestinationService } from '../modules/backups/destinations.service.js';
import { noCreditListener, WalletService, type CreditListener } from '../modules/billing/wallet.service.js';
import { DatabaseService, idleDatabaseWork, type DatabaseWork } from '../modules/databases/databases.service.js';
import { BuildLog } from '../modules/deployments/build-log.js';
import { DeployService, idleEngine } from '../modules/deployments/deploy.service.js';
import { DeploymentService } from '../modules/deployments/deployments.service.js';
import { DeployQueue } from '../modules/deployments/queue.js';
import { DomainService } from '../modules/domains/domains.service.js';
import { EnvService } from '../modules/env/env.service.js';
import { GitHubInstallationService } from '../modules/github/installations.js';
import { AnalysisPool, type AnalysisPoolOptions } from '../modules/logs/analysis-pool.js';
import { LogAnalysisService } from '../modules/logs/analysis.service.js';
import { LlmAnalyzer, type LlmOptions } from '../modules/logs/llm.js';
import { LogService } from '../modules/logs/logs.service.js';
import { MetricsService } from '../modules/metrics/metrics.service.js';
import { GitService } from '../modules/projects/git.service.js';
import { ProjectService } from '../modules/projects/projects.service.js';
import { TemplateService } from '../modules/templates/templates.service.js';
import { ApiKeyService } from '../modules/tenancy/api-keys.service.js';
import { InvitationService } from '../modules/tenancy/invitations.service.js';
import { MemberService } from '../modules/tenancy/members.service.js';
import { WorkspaceService } from '../modules/tenancy/workspaces.service.js';
import { UptimeNotifier } from '../modules/uptime/notifier.js';
import { UptimeService } from '../modules/uptime/uptime.service.js';
import { WebhookService } from '../modules/webhooks/webhooks.service.js';

/**
 * The leader's objects the API-side services reach (domain/late.ts): set by the leader
 * (leader.ts; the engine also by a standby, engine-supervisor.ts) and cleared when it stops.
 * Idle, deployments and databases only queue in the store and no billing worker is told.
 */
export interface LeaderLinks {
  /** the deploy engine: the leader's orchestrator, or the standby's view of the engine */
  engine: Late<Engine>;
  /** the leader's database worker, woken when databases are created, deleted, locked */
  databases: Late<DatabaseWork>;
  /** the leader's billing worker, told when a credit may have brought a workspace back above 0 */
  billing: Late<CreditListener>;
  /** the leader's backup worker, woken when a backup is asked for */
  backups: Late<BackupWork>;
}

export function leaderLinks(): LeaderLinks {
  return { engine: new Late(idleEngine), databases: new Late(idleDatabaseWork), billing: new Late(noCreditListener), backups: new Late(idleBackupWork) };
}

/** Every service, each built once: the routes call them, the leader's workers share some. */
export interface Services {
  apiKeys: ApiKeyService;
  workspaces: WorkspaceService;
  members: MemberService;
  invitations: InvitationService;
  wallets: WalletService;
  projects: ProjectService;
  git: GitService;
  installations: GitHubInstallationService;
  deployments: DeploymentService;
  buildLog: BuildLog;
  queue: DeployQueue;
  deploys: DeployService;
  envVars: EnvService;
  domains: DomainService;
  uptime: UptimeService;
  /** delivers uptime notifications: the test ones from the API, the queued ones when the leader wakes it */
  notifier: UptimeNotifier;
  logs: LogService;
  logAnalysis: LogAnalysisService;
  databases: DatabaseService;
  backups: BackupService;
  /** local and the workspaces' S3 backup destinations, shared by the API and the leader's backup worker */
  backupDestinations: Destinations;
  destinations: DestinationService;
  templates: TemplateService;
  metrics: MetricsService;
  webhooks: WebhookService;
}

/** The log of the services that log by themselves (the uptime notifier, the model's fallbacks). */
export interface ServiceLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface ServiceOptions {
  log: ServiceLog;
  /** lines of the project were stored by this process (the live tail's hub wakes its readers) */
  onLogsStored?: (projectId: string) => void;
  /** `--github-webhook-secret`: verifies POST /api/webhooks/github; absent or empty refuses every delivery */
  githubWebhookSecret?: string | undefined;
  /** `--llm-base-url`: the OpenAI-compatible model POST …/logs/analyze also asks (docs/logs-analyzer.md) */
  llm?: Pick<LlmOptions, 'baseUrl' | 'model' | 'apiKey' | 'timeoutMs'> | null | undefined;
  /** the log analysis's worker pool: its size, queue and budget (docs/logs-analyzer.md#cost) */
  analysisPool?: AnalysisPoolOptions | undefined;
}

/** A worker that stops renewing its lease for this long is taken for dead and its work reaped. */
export const LEASE_MS = 60_000;

/** Every service, each built once from the dependencies, linked to the leader's objects through `leader`. */
export function createServices(deps: Parts, leader: LeaderLinks, o: ServiceOptions): Services {
  const { store, clock, random, ids, secrets, logs, policies } = deps;
  const { repos } = store;
  const apiKeys = new ApiKeyService(repos, clock, random, ids);
  const wallets = new WalletService(store, clock, ids, policies.billing, deps.gateways, policies.projects.publicUrl, leader.billing);
  const queue = new DeployQueue(store, clock, ids, LEASE_MS);
  const projects = new ProjectService(store, clock, ids, policies.projects, policies.limits, logs, leader.engine, wallets);
  const git = new GitService(repos, clock, random, secrets, policies.projects, deps.github);
  const deploys = new DeployService(repos, clock, ids, policies.limits, queue, wallets, leader.engine);
  const envVars = new EnvService(store, clock, ids, secrets, policies.projects);
  const backupDestinations = new Destinations(repos, secrets, new LocalDestination(policies.backups.dir), policies.backups.allowPrivate);
  const backups = new BackupService(store, clock, ids, secrets, backupDestinations, wallets, leader.backups);
  const databases = new DatabaseService(store, clock, random, ids, secrets, policies.databases, policies.limits, wallets, leader.engine, leader.databases, backups);
  const notifier = new UptimeNotifier({
    repos,
    clock,
    random,
    secrets,
    mailer: deps.mailer,
    appsDomain: policies.projects.appsDomain,
    routerPort: policies.projects.routerPort,
    policy: policies.notify,
    log: o.log,
  });
  const llm =
    o.llm === undefined || o.llm === null
      ? undefined
      : new LlmAnalyzer({ ...o.llm, onFallback: (reason) => { o.log.warn({ reason }, 'log analysis: the model gave no usable answer; the built-in analysis was returned'); } });
  return {
    apiKeys,
    workspaces: new WorkspaceService(store, clock, ids, policies.limits, policies.wallet, logs),
    members: new MemberService(store, clock),
    invitations: new InvitationService(store, clock, random, ids, policies.invitations, apiKeys, deps.mailer),
    wallets,
    projects,
    installations: new GitHubInstallationService(repos, clock, random, secrets, deps.github),
    git,
    deployments: new DeploymentService(repos),
    buildLog: new BuildLog(repos, logs, clock, o.onLogsStored),
    queue,
    deploys,
    envVars,
    domains: new DomainService(store, clock, random, ids, policies.domains, policies.projects, (projectId) => leader.engine.get().routesChanged(projectId)),
    uptime: new UptimeService(repos, clock, ids, secrets, policies.projects, policies.notify, notifier),
    notifier,
    logs: new LogService(repos, logs, clock, secrets, policies.logs),
    logAnalysis: new LogAnalysisService(repos, logs, envVars, llm, new AnalysisPool(o.analysisPool)),
    databases,
    backups,
    backupDestinations,
    destinations: new DestinationService(store, clock, ids, secrets, backupDestinations),
    templates: new TemplateService(store, random, policies.templates, policies.projects, wallets, projects, envVars, databases, deploys, git),
    metrics: new MetricsService(repos, clock),
    webhooks: new WebhookService(deploys, git, o.githubWebhookSecret ?? ''),
  };
}
