import type { Role } from '../../domain/roles.js';
import type { ApiKeyRow, InvitationRow, WorkspaceRow } from '../../store/repositories/index.js';
import type { ApiKey } from './api-keys.schema.js';
import type { Invitation } from './invitations.schema.js';
import type { Workspace, WorkspaceSettings } from './workspaces.schema.js';

export const DEFAULT_SETTINGS: WorkspaceSettings = { build_timeout_sec: 900, log_retention_days: 7 };

/** The container network (Docker) / namespace (Kubernetes) of a workspace. */
export const namespaceOf = (slug: string): string => `ws-${slug}`;

export function parseSettings(text: string): WorkspaceSettings {
  return { ...DEFAULT_SETTINGS, ...(JSON.parse(text) as Partial<WorkspaceSettings>) };
}

export function workspaceView(row: WorkspaceRow, role?: Role): Workspace {
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

export const apiKeyView = (row: ApiKeyRow): ApiKey => ({
  id: row.id,
  name: row.name,
  key_prefix: row.key_prefix,
  user_id: row.user_id,
  expires_at: row.expires_at,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
});

export function invitationView(row: InvitationRow, now: Date): Invitation {
  const status: Invitation['status'] =
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
