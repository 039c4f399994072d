import { WalletService } from '../billing/wallet.service.js';
import { BuildLog } from '../deploy/build-log.js';
import { DeploymentService } from '../deploy/deployments.service.js';
import { GitService } from '../projects/git.service.js';
import { ProjectService } from '../projects/projects.service.js';
import { DomainService } from '../domains/domains.service.js';
import { EnvService } from '../env/env.service.js';
import { UptimeService } from '../uptime/uptime.service.js';
import { ApiKeyService } from '../tenancy/api-keys.service.js';
import type { Deps } from '../deps.js';
import { InvitationService } from '../tenancy/invitations.service.js';
import { MemberService } from '../tenancy/members.service.js';
import { WorkspaceService } from '../tenancy/workspaces.service.js';

/** Every service the routes call, built once from the injected dependencies. */
export interface Services {
  apiKeys: ApiKeyService;
  workspaces: WorkspaceService;
  members: MemberService;
  invitations: InvitationService;
  wallets: WalletService;
  projects: ProjectService;
  git: GitService;
  deployments: DeploymentService;
  buildLog: BuildLog;
  envVars: EnvService;
  domains: DomainService;
  uptime: UptimeService;
}

export function createServices(deps: Deps): Services {
  const apiKeys = new ApiKeyService(deps);
  return {
    apiKeys,
    workspaces: new WorkspaceService(deps),
    members: new MemberService(deps),
    invitations: new InvitationService(deps, apiKeys),
    wallets: new WalletService(deps),
    projects: new ProjectService(deps),
    git: new GitService(deps),
    deployments: new DeploymentService(deps),
    buildLog: new BuildLog(deps),
    envVars: new EnvService(deps),
    domains: new DomainService(deps),
    uptime: new UptimeService(deps),
  };
}
