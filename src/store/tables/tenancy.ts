import type { Generated } from 'kysely';
import type { UserRecord, WorkspaceRecord } from '../../domain/access.js';
import type { Role } from '../../domain/roles.js';

/** The store keeps users and workspaces as the domain describes them (domain/access.ts). */
export type UsersTable = UserRecord;
export type WorkspacesTable = WorkspaceRecord;

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

export interface TenancyTables {
  users: UsersTable;
  workspaces: WorkspacesTable;
  workspace_creators: WorkspaceCreatorsTable;
  members: MembersTable;
  invitations: InvitationsTable;
  api_keys: ApiKeysTable;
}
