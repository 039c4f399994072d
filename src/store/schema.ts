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

export interface DB {
  users: UsersTable;
  workspaces: WorkspacesTable;
  members: MembersTable;
  invitations: InvitationsTable;
  api_keys: ApiKeysTable;
}
