import type { Role } from '../../domain/roles.js';
import type { ApiKeyRow, InvitationRow, MemberDetail, WorkspaceRow } from '../../store/repositories/index.js';

export interface WorkspaceSettings {
  default_region?: string;
  build_timeout_sec: number;
  log_retention_days: number;
}

export const DEFAULT_SETTINGS: WorkspaceSettings = { build_timeout_sec: 900, log_retention_days: 7 };

export interface WorkspaceView {
  id: string;
  name: string;
  slug: string;
  namespace: string;
  settings: WorkspaceSettings;
  created_at: string;
  updated_at: string;
  role?: Role;
}

/** The container network (Docker) / namespace (Kubernetes) of a workspace. */
export const namespaceOf = (slug: string): string => `ws-${slug}`;

export function parseSettings(text: string): WorkspaceSettings {
  return { ...DEFAULT_SETTINGS, ...(JSON.parse(text) as Partial<WorkspaceSettings>) };
}

export function workspaceView(row: WorkspaceRow, role?: Role): WorkspaceView {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    namespace: namespaceOf(row.slug),
    settings: parseSettings(row.settings),
    created_at: row.created_at,
    updated_at: row.updated_at,
    ...(role === undefined ? {} : { role }),
  };
}

export interface MemberView {
  user_id: string;
  email: string;
  name: string;
  role: Role;
  /** `pending`: offered, not yet accepted by the user (it grants nothing) */
  status: MemberDetail['status'];
  joined_at: string;
}

export interface ApiKeyView {
  id: string;
  name: string;
  key_prefix: string;
  user_id: string;
  expires_at: string;
  created_at: string;
  last_used_at: string | null;
}

export const apiKeyView = (row: ApiKeyRow): ApiKeyView => ({
  id: row.id,
  name: row.name,
  key_prefix: row.key_prefix,
  user_id: row.user_id,
  expires_at: row.expires_at,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
});

export type InvitationStatus = 'pending' | 'accepted' | 'expired';

export interface InvitationView {
  id: string;
  email: string;
  role: Role;
  status: InvitationStatus;
  expires_at: string;
  created_at: string;
}

export function invitationView(row: InvitationRow, now: Date): InvitationView {
  const status: InvitationStatus =
    row.status === 'pending' && row.expires_at <= now.toISOString() ? 'expired' : row.status;
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    status,
    expires_at: row.expires_at,
    created_at: row.created_at,
  };
}
