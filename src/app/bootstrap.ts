import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Duplicate } from '../domain/errors.js';
import { MAX_KEY_DAYS, type ApiKeyService } from '../modules/tenancy/api-keys.service.js';
import type { Parts } from './adapters.js';
import { createNewUser } from '../modules/tenancy/users.js';
import { createWorkspace } from '../modules/tenancy/workspaces.service.js';

export const BOOTSTRAP_WORKSPACE = 'default';

export interface Bootstrapped {
  email: string;
  workspace: string;
  key: string;
  keyFile: string;
}

/**
 * On a store without users: an owner, the workspace `default` and one API key, which is
 * returned to be printed once and written to `<data-dir>/bootstrap-key` (mode 0600). Returns
 * null when the store already has users (or another replica bootstrapped it first).
 */
export async function bootstrap(
  deps: Pick<Parts, 'store' | 'clock' | 'ids' | 'policies'>,
  keys: ApiKeyService,
  opts: { adminEmail: string; dataDir: string },
): Promise<Bootstrapped | null> {
  if (await deps.store.repos.users.any()) return null;
  const keyFile = join(opts.dataDir, 'bootstrap-key');
  let key: string;
  try {
    key = await deps.store.transaction(async (tx) => {
      // Strictly new: a user that appeared meanwhile (another replica) is never handed this key.
      const user = await createNewUser(deps, tx, { email: opts.adminEmail, name: 'Admin', verified: true });
      const workspace = await createWorkspace(deps, deps.policies.wallet, tx, { name: 'Default', slug: BOOTSTRAP_WORKSPACE, ownerId: user.id, countedFor: null });
      const created = await keys.issue(tx, { userId: user.id, workspaceId: workspace.id, name: 'bootstrap', expiresInDays: MAX_KEY_DAYS });
      // Written before the commit: a crash in between leaves a stale file that the next first
      // start overwrites, never a committed owner whose key exists nowhere.
      mkdirSync(opts.dataDir, { recursive: true });
      writeFileSync(keyFile, `${created.key}\n`, { mode: 0o600 });
      chmodSync(keyFile, 0o600);
      return created.key;
    });
  } catch (err) {
    // a user or the workspace `default` made meanwhile (another replica): the repository says so
    if (err instanceof Duplicate) return null;
    throw err;
  }
  return { email: opts.adminEmail, workspace: BOOTSTRAP_WORKSPACE, key, keyFile };
}
