import type { Role } from './roles.js';

/** A user of the installation. */
export interface UserRecord {
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

/** A workspace: the unit of membership, billing and isolation. */
export interface WorkspaceRecord {
  id: string;
  name: string;
  slug: string;
  /** JSON text of WorkspaceSettings */
  settings: string;
  created_at: string;
  updated_at: string;
}

/** An authenticated caller: the key's user, and the key itself. */
export interface Caller {
  user: UserRecord;
  keyId: string;
}

/** A caller who is a member of the workspace in the path, with their role there. */
export interface Access {
  caller: Caller;
  workspace: WorkspaceRecord;
  role: Role;
}
