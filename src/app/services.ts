import { WalletService } from '../modules/billing/wallet.service.js';
import { BuildLog } from '../modules/deployments/build-log.js';
import { DeployService } from '../modules/deployments/deploy.service.js';
import { EngineHandle } from '../modules/deployments/engine-handle.js';
import { DeployQueue } from '../modules/deployments/queue.js';
import { DeploymentService } from '../modules/deployments/deployments.service.js';
import { GitService } from '../modules/projects/git.service.js';
import { GitHubInstallationService } from '../modules/github/installations.js';
import { ProjectService } from '../modules/projects/projects.service.js';
import { DatabaseService } from '../modules/databases/databases.service.js';
import { DomainService } from '../modules/domains/domains.service.js';
import { EnvService } from '../modules/env/env.service.js';
import { LogService } from '../modules/logs/logs.service.js';
import { UptimeService } from '../modules/uptime/uptime.service.js';
import { UptimeNotifier } from '../modules/uptime/notifier.js';
import { MetricsService } from '../modules/metrics/metrics.service.js';
import { TemplateService } from '../modules/templates/templates.service.js';
import { ApiKeyService } from '../modules/tenancy/api-keys.service.js';
import type { Parts } from './create-deps.js';
import { InvitationService } from '../modules/tenancy/invitations.service.js';
import { MemberService } from '../modules/tenancy/members.service.js';
import { WorkspaceService } from '../modules/tenancy/workspaces.service.js';

/** Every service the routes call, built once from the injected dependencies. */
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
  /** the engine the services talk to: idle (deployments only queue) until `serve` points it at one */
  readonly engine: EngineHandle;
  envVars: EnvService;
  domains: DomainService;
  uptime: UptimeService;
  logs: LogService;
  /** managed databases; the leader's worker attaches itself to wake it */
  databases: DatabaseService;
  templates: TemplateService;
  metrics: MetricsService;
}

/** The test notifications answer what happened; nothing to log besides. */
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A worker that stops renewing its lease for this long is taken for dead and its work reaped. */
export const LEASE_MS = 60_000;

/** `onLogsStored`: lines of the project were stored by this process (the live tail's hub wakes its readers). */
export function createServices(deps: Parts, onLogsStored: (projectId: string) => void = () => undefined): Services {
  const { store, clock, random, ids, secrets, logs, policies } = deps;
  const { repos } = store;
  const apiKeys = new ApiKeyService(repos, clock, random, ids);
  const wallets = new WalletService(store, clock, ids, policies.billing, deps.gateways, policies.projects.publicUrl);
  const installations = new GitHubInstallationService(repos, clock, random, secrets, deps.github);
  const queue = new DeployQueue(store, clock, ids, LEASE_MS);
  const engine = new EngineHandle();
  const projects = new ProjectService(store, clock, ids, policies.projects, policies.limits, logs, () => engine, wallets);
  const git = new GitService(repos, clock, random, secrets, policies.projects, deps.github);
  const deploys = new DeployService(repos, clock, ids, policies.limits, queue, wallets, engine);
  const envVars = new EnvService(store, clock, ids, secrets, policies.projects);
  const databases = new DatabaseService(store, clock, random, ids, secrets, policies.databases, policies.limits, wallets, engine);
  return {
    apiKeys,
    workspaces: new WorkspaceService(store, clock, ids, policies.limits, policies.wallet, logs),
    members: new MemberService(store, clock),
    invitations: new InvitationService(store, clock, random, ids, policies.invitations, apiKeys, deps.mailer),
    wallets,
    projects,
    installations,
    git,
    deployments: new DeploymentService(repos),
    buildLog: new BuildLog(repos, logs, clock, onLogsStored),
    queue,
    deploys,
    engine,
    envVars,
    domains: new DomainService(store, clock, random, ids, policies.domains, policies.projects, (projectId) => engine.routesChanged(projectId)),
    uptime: new UptimeService(repos, clock, ids, secrets, policies.projects, policies.notify, new UptimeNotifier({ repos, clock, random, secrets, mailer: deps.mailer, appsDomain: policies.projects.appsDomain, routerPort: policies.projects.routerPort, policy: policies.notify, log: silent })),
    logs: new LogService(repos, logs, clock, secrets, policies.logs),
    databases,
    templates: new TemplateService(store, random, policies.templates, policies.projects, wallets, projects, envVars, databases, deploys, git),
    metrics: new MetricsService(repos, clock),
  };
}
