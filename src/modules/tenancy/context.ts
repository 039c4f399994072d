import type { Role } from '../../domain/roles.js';
import type { UsersTable, WorkspacesTable } from '../../store/schema.js';

export type UserRow = UsersTable;
export type WorkspaceRow = WorkspacesTable;

/** An authenticated caller: the key's user, and the key itself. */
export interface Caller {
  user: UserRow;
  keyId: string;
}

/** A caller who is a member of the workspace in the path, with their role there. */
export interface Access {
  caller: Caller;
  workspace: WorkspaceRow;
  role: Role;
}
