/** Workspace roles, strongest first: owner > admin > member. */
export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { owner: 3, admin: 2, member: 1 };

export const atLeast = (role: Role, required: Role): boolean => RANK[role] >= RANK[required];

export const isRole = (value: string): value is Role => (ROLES as readonly string[]).includes(value);

/**
 * The permission table (docs/decisions.md#roles). Every workspace route names one action; the auth plugin
 * checks the caller's role against it in one place. Finer rules that depend on the data (an
 * admin may not grant `owner`, a member sees only their own keys) live in the services.
 */
export const ACTIONS = {
  /** read the workspace, its projects, deployments, logs, databases, templates, wallet balance */
  'workspace.read': 'member',
  /** create/update/delete projects, env, domains, git, deployments, databases, templates, uptime */
  'workspace.operate': 'member',
  /** create API keys; list/revoke one's own keys (everyone's for admin and up) */
  'keys.manage': 'member',
  /** members and invitations (roles member/admin) */
  'members.manage': 'admin',
  /** link and unlink GitHub App installations */
  'integrations.manage': 'admin',
  /** download and delete backups; backup policies and destinations; in-place restores (docs/backups.md#permissions) */
  'backups.manage': 'admin',
  /** wallet top-up, alert threshold, payments, transactions */
  'billing.manage': 'admin',
  /** grant/remove owner, update or delete the workspace */
  'workspace.own': 'owner',
} as const satisfies Record<string, Role>;

export type Action = keyof typeof ACTIONS;

export const allows = (role: Role, action: Action): boolean => atLeast(role, ACTIONS[action]);
