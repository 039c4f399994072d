import { ApiKeyService } from '../tenancy/api-keys.service.js';
import type { TenancyDeps } from '../tenancy/context.js';
import { InvitationService } from '../tenancy/invitations.service.js';
import { MemberService } from '../tenancy/members.service.js';
import { WorkspaceService } from '../tenancy/workspaces.service.js';

/** Every service the routes call, built once from the injected dependencies. */
export interface Services {
  apiKeys: ApiKeyService;
  workspaces: WorkspaceService;
  members: MemberService;
  invitations: InvitationService;
}

export function createServices(deps: TenancyDeps): Services {
  const apiKeys = new ApiKeyService(deps);
  return {
    apiKeys,
    workspaces: new WorkspaceService(deps),
    members: new MemberService(deps),
    invitations: new InvitationService(deps, apiKeys),
  };
}
