import type { Clock, IdSource, Random } from '../domain/clock.js';
import type { Role } from '../domain/roles.js';
import type { Store } from '../store/db.js';
import type { UsersTable, WorkspacesTable } from '../store/schema.js';

/** What every tenancy service needs, injected. */
export interface TenancyDeps {
  store: Store;
  clock: Clock;
  random: Random;
  ids: IdSource;
}

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
